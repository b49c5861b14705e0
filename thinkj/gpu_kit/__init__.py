"""The GPU kit: the wheels a bare GPU device machine lacks for verl + vLLM + Ray and LlamaFactory + DeepSpeed, cut
into parts that fit the device tool's carry, and their offline install there. ``scripts/gpu_kit.sh`` and
``scripts/gpu_kit_install.sh`` are the thin entry points.

    python -m thinkj.gpu_kit build                  # here, with PyPI: resolve, download, select, cut into parts
    python -m thinkj.gpu_kit plan                   # the device calls: how many, MB each, what each carries
    python -m thinkj.gpu_kit stash                  # there, in each call: copy the carried part to /tmp/gpu_kit
    python -m thinkj.gpu_kit install                # there, last call: reassemble, check sums, install, import
    python -m thinkj.gpu_kit tokenizer              # here: SmolLM2's config and tokenizer, no weights (the trl step)
    python -m thinkj.gpu_kit bench                  # here: the Auto-J test file from ../shared/data (the eval step)
    python -m thinkj.gpu_kit extra NAME==VERSION    # here, mid-session: a wheel the first call found the image lacks
    python -m thinkj.gpu_kit standin                # here: a venv modelling the image, to rehearse stash + install:
                                                    # PYTHON=.cache/gpu_kit/image-venv/bin/python KIT_DEST=/tmp/kitreh \
                                                    #   bash scripts/gpu_kit_install.sh install
                                                    # (and, with a kit built, the link check below)
    python -m thinkj.gpu_kit links                  # here: every library the kit's extensions link against is in
                                                    # the kit, the image stand-in or the system (ELF DT_NEEDED)

* :mod:`thinkj.gpu_kit.build`: what the kit holds (the image modelled, the stacks resolved, what is left out and why)
  and the device call plan;
* :mod:`thinkj.gpu_kit.prune`: the large files dropped from a few wheels, each with its reason;
* :mod:`thinkj.gpu_kit.links`: the libraries the kit's native extensions need, found or not;
* :mod:`thinkj.gpu_kit.device`: parts, sums, stash, offline install and import checks (what runs on the device);
* :mod:`thinkj.gpu_kit.cli`: the commands above.
"""
