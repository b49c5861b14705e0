#!/usr/bin/env bash
# Download the wheels scripts/gpu_smoke.sh installs on a bare GPU machine (one with torch and transformers, no
# network): TRL, datasets, accelerate, matplotlib and what they need beyond torch and transformers, at the versions
# of requirements/constraints-gpu.txt, for CPython $PYVER on Linux x86_64. Run where the package index is reachable.
#
#   bash scripts/gpu_smoke_wheels.sh                 # into .cache/gpu-wheels, for Python 3.12
#   PYVER=3.11 WHEELS=.cache/gpu-wheels-311 bash scripts/gpu_smoke_wheels.sh
#   PACKAGES="trl datasets dill multiprocess pytz" bash scripts/gpu_smoke_wheels.sh   # an image with pandas, pyarrow,
#       matplotlib and accelerate already (the H200 run of 2026-11-26: experiments/LOG.md); install those with
#       pip install --no-deps --target DIR and put DIR on PYTHONPATH
#
# The list is the dependency closure of those packages minus the closure of torch and transformers, read from pip's
# dry-run report of the GPU stack on Python 3.12 (2026-11-26); fsspec is pinned to datasets 4.0.0's cap.
set -euo pipefail
cd "$(dirname "$0")/.."

PYVER=${PYVER:-3.12}
WHEELS=${WHEELS:-.cache/gpu-wheels}
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
DEFAULT_PACKAGES=(trl datasets accelerate matplotlib contourpy cycler fonttools kiwisolver pillow pyparsing python-dateutil six
          pandas pytz tzdata pyarrow dill multiprocess xxhash fsspec psutil requests urllib3 charset-normalizer certifi
          idna)
read -r -a PACKAGES <<< "${PACKAGES:-${DEFAULT_PACKAGES[*]}}"

specs=()
for name in "${PACKAGES[@]}"; do
  version=$(grep -i -E "^${name}==" requirements/constraints-gpu.txt | head -1 | cut -d= -f3)
  [ -n "$version" ] || { echo "error: $name has no pin in requirements/constraints-gpu.txt" >&2; exit 1; }
  specs+=("$name==$version")
done
mkdir -p "$WHEELS"
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --dest "$WHEELS" "${specs[@]}"
total=$(du -cb "$WHEELS"/*.whl | tail -1 | cut -f1)
largest=$(ls -S "$WHEELS"/*.whl | head -1)
echo "$(ls "$WHEELS"/*.whl | wc -l) wheels in $WHEELS: $((total / 1048576)) MiB in all, largest $(basename "$largest")" \
     "($(( $(stat -c %s "$largest") / 1048576 )) MiB)"
