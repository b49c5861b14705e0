#!/usr/bin/env bash
# Build the GPU kit HERE (needs the package index): the wheels a bare GPU device machine (Python 3.12, torch 2.11.0,
# transformers 5.17.0, no network) lacks for verl + vLLM + Ray and LlamaFactory + DeepSpeed, at
# requirements/constraints-gpu.txt's pins, stored uncompressed in one xz stream cut into parts of at most 50 MB with
# sha256 sums under .cache/gpu_kit/parts (ignored), then print the device call plan. The logic is thinkj/gpu_kit/.
# The build takes about 7 minutes on 2 cores, 5 of them compressing.
#
#   bash scripts/gpu_kit.sh                 # build, then print the plan
#   bash scripts/gpu_kit.sh plan            # the plan of the kit built already
#   bash scripts/gpu_kit.sh links           # every library the kit's extensions link against: in the kit, the
#                                           # stand-in or the system (standin runs it too, with a kit built)
#   bash scripts/gpu_kit.sh standin         # a venv modelling the device image (.cache/gpu_kit/image-venv), then
#   PYTHON=.cache/gpu_kit/image-venv/bin/python KIT_DEST=/tmp/kitreh bash scripts/gpu_kit_install.sh install
#
# On the device, one call per part: bash scripts/gpu_kit_install.sh stash (then install in the last call).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec "$PY" -m thinkj.gpu_kit "${1:-build}" "${@:2}"
