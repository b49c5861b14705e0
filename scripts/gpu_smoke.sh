#!/usr/bin/env bash
# Check on one GPU what can be checked without vLLM, verl or LlamaFactory (thinkj/gpu_smoke.py): a short SFT on the
# device, the hf inference backend judging in bfloat16, and 2 TRL GRPO steps with the Think-J reward, on a tiny
# model made on the spot. One line per check (PASS / FAIL and its figures); the exit status counts the failures.
#
#   bash scripts/gpu_smoke.sh                       # CUDA
#   DEVICE=cpu bash scripts/gpu_smoke.sh            # the same checks on this machine's CPU (tests/test_gpu_smoke.py)
#
# Made for a bare GPU machine: Python 3.11/3.12 with torch and transformers, no network. What the checks import
# beyond those (TRL, datasets, accelerate, matplotlib, ...) is installed from wheels brought along
# (scripts/gpu_smoke_wheels.sh downloads them into .cache/gpu-wheels), into a venv that sees the machine's own
# torch and transformers (--system-site-packages); thinkj itself runs from this checkout (PYTHONPATH), no build step.
# Where everything imports already (the project's .venv), nothing is installed.
#
# Settings: DEVICE cuda | cpu [cuda]; OUT [runs/gpu_smoke]; PYTHON [.venv/bin/python if present, else python3];
# WHEELS [.cache/gpu-wheels]; SMOKE_VENV, where missing packages go [.cache/gpu-smoke-venv].
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=${DEVICE:-cuda}
OUT=${OUT:-runs/gpu_smoke}
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
WHEELS=${WHEELS:-.cache/gpu-wheels}
SMOKE_VENV=${SMOKE_VENV:-.cache/gpu-smoke-venv}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 \
       HF_DATASETS_OFFLINE=1 MPLCONFIGDIR="$PWD/.cache/matplotlib" WANDB_MODE=disabled

# the modules the checks import that a bare machine may lack (torch and transformers it must have)
missing() {
  "$1" - <<'EOF'
import importlib.util
need = ["torch", "transformers", "trl", "datasets", "accelerate", "matplotlib", "pandas", "pyarrow"]
print(" ".join(n for n in need if importlib.util.find_spec(n) is None))
EOF
}

lacking=$(missing "$PY")
if [ -n "$lacking" ]; then
  case " $lacking " in *" torch "*|*" transformers "*)
    echo "FAIL setup: $PY lacks $lacking; the machine must have torch and transformers (the rest comes as wheels)" >&2
    exit 1;;
  esac
  ls "$WHEELS"/*.whl >/dev/null 2>&1 || {
    echo "FAIL setup: $PY lacks $lacking and $WHEELS holds no wheels (bash scripts/gpu_smoke_wheels.sh)" >&2; exit 1; }
  [ -x "$SMOKE_VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$SMOKE_VENV"
  PY="$SMOKE_VENV/bin/python"
  if [ -n "$(missing "$PY")" ]; then
    # only what is missing gets installed; pip takes dependencies from the wheel folder or keeps the machine's
    "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" trl datasets accelerate matplotlib pandas pyarrow
  fi
  echo "INFO installed from $WHEELS into $SMOKE_VENV: $lacking"
fi
exec "$PY" -m thinkj.gpu_smoke --device "$DEVICE" --out "$OUT"
