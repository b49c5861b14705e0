#!/usr/bin/env bash
# The GPU kit's device half (thinkj/gpu_kit/device.py, through python -m thinkj.gpu_kit), run THERE with the image's
# python3 and nothing else installed.
# Each device call carries .cache/gpu_kit/parts/kit.json and one part-NN (scripts/gpu_kit.sh plan lists them):
#
#   bash scripts/gpu_kit_install.sh stash     # calls 1..N-1: copy the carried part to /tmp/gpu_kit, say which it holds;
#                                             # the first also says which packages the kit takes from the image are
#                                             # absent there: fetch them here (python -m thinkj.gpu_kit extra
#                                             # NAME==VERSION) and carry .cache/gpu_kit/extra in the later calls
#   bash scripts/gpu_kit_install.sh install   # call N: stash, then reassemble, check every sha256, install offline
#                                             # (pip --no-index --no-deps --target /tmp/gpu_kit/site), import each
#                                             # package: one PASS / FAIL line each and the total seconds
#
# Afterwards `source /tmp/gpu_kit/gpu_kit.env` puts the kit first on PYTHONPATH (scripts/gpu_device_run.sh does).
# Settings: PYTHON [python3]; KIT_DEST [/tmp/gpu_kit]. Exit status: 0, or the number of failed checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEST=${KIT_DEST:-/tmp/gpu_kit}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "${1:-}" in
  stash) exec "$PY" -m thinkj.gpu_kit stash --parts .cache/gpu_kit/parts --dest "$DEST" --extra .cache/gpu_kit/extra ;;
  install)
    if [ -f .cache/gpu_kit/parts/kit.json ]; then
      "$PY" -m thinkj.gpu_kit stash --parts .cache/gpu_kit/parts --dest "$DEST" --extra .cache/gpu_kit/extra
    fi
    exec "$PY" -m thinkj.gpu_kit install --parts "$DEST" --site "$DEST/site" ;;
  *) echo "usage: bash scripts/gpu_kit_install.sh stash|install" >&2; exit 2 ;;
esac
