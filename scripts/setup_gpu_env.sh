#!/usr/bin/env bash
# Create or update the project's virtual environment on a GPU cluster node (the twin of setup_cpu_env.sh).
#
#   bash scripts/setup_gpu_env.sh                       # the cluster install, into .venv
#   INSTALL_FLASH_ATTN=1 bash scripts/setup_gpu_env.sh  # then FlashAttention-2 as well (compiles; see below)
#
# Needs Linux x86_64, Python 3.11 or 3.12 (LlamaFactory 0.9.5 needs >= 3.11, verl 0.9.1 < 3.13) and an NVIDIA
# driver >= 580: torch 2.11.0's PyPI wheels are built for CUDA 13.0. Every node of a multi-node run needs the same
# environment at the same path (a shared file system, or this script run on each node).
#
# It runs the README's cluster install with the exact versions of requirements/constraints-gpu.txt, which pip
# resolves without backtracking (tests/test_gpu_stack.py checks that on 3.11 and 3.12):
#   pip install -c requirements/constraints-gpu.txt -e ".[train,embed,gpu,dev]"
# A stamp keyed on the hash of the constraints, setup.py, this script and INSTALL_FLASH_ATTN makes a second run a
# no-op.
#
# FlashAttention-2 is a separate step on purpose: it has no wheel on PyPI and its sdist imports torch in setup.py,
# so pip's isolated build fails (ModuleNotFoundError: torch). It is built against the torch installed above, with
# --no-build-isolation, at verl 0.9.1's own pin 2.8.3 (its extra flash-attn-cu130torch211); compiling takes long
# (MAX_JOBS limits the parallel compile jobs and the memory they take). Without it everything still runs: verl's
# models load with sdpa (the launcher chooses and says so, thinkj/online/verl_gpu.py) and LlamaFactory's
# `flash_attn: fa2` falls back to its default attention with a warning.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
INSTALL_FLASH_ATTN=${INSTALL_FLASH_ATTN:-0}
FLASH_ATTN_VERSION=2.8.3
STAMP="$VENV/.thinkj-gpu-env-stamp"
hash=$( (cat requirements/constraints-gpu.txt setup.py scripts/setup_gpu_env.sh; echo "flash=$INSTALL_FLASH_ATTN") \
  | sha256sum | cut -c1-16)

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$hash" ] && [ -x "$VENV/bin/thinkj" ]; then
  echo "environment $VENV is up to date ($hash)"
  exit 0
fi

"$PYTHON" - <<'EOF'
import platform, sys
if sys.version_info[:2] not in ((3, 11), (3, 12)):
    sys.exit(f"error: Python {platform.python_version()}: the GPU stack needs 3.11 or 3.12 (LlamaFactory 0.9.5 >= 3.11, "
             "verl 0.9.1 < 3.13); set PYTHON=python3.12")
if platform.system() != "Linux" or platform.machine() != "x86_64":
    sys.exit(f"error: {platform.system()} {platform.machine()}: requirements/constraints-gpu.txt is for Linux x86_64")
EOF
if command -v nvidia-smi >/dev/null; then
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
  if [ "${driver%%.*}" -lt 580 ] 2>/dev/null; then
    echo "error: NVIDIA driver $driver: torch 2.11.0's CUDA 13.0 wheels need a driver >= 580" >&2
    exit 1
  fi
else
  echo "warning: nvidia-smi not found; the GPU stack needs an NVIDIA driver >= 580 on the nodes that run it" >&2
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip "$@"; }
pip install -q --upgrade pip
pip install -q -c requirements/constraints-gpu.txt -e ".[train,embed,gpu,dev]"
if [ "$INSTALL_FLASH_ATTN" = "1" ]; then
  pip install -q -c requirements/constraints-gpu.txt "flash-attn==$FLASH_ATTN_VERSION" --no-build-isolation
fi

"$VENV/bin/python" - <<'EOF'
import torch, transformers, vllm, verl, llamafactory
from thinkj.online.verl_gpu import attention_choice
print(f"stack ok: torch {torch.__version__} (CUDA {torch.version.cuda}), vllm {vllm.__version__}, "
      f"transformers {transformers.__version__}, verl {verl.__version__}, llamafactory {llamafactory.__version__}")
print("verl attention: %s (%s)" % attention_choice())
EOF
echo "$hash" > "$STAMP"
echo "environment $VENV ready ($hash)"
