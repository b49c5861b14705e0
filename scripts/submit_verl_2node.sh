#!/usr/bin/env bash
# Submit a 2 x 8 GPU verl run (GRPO / PPO / Reinforce++, Table 11) to a Ray cluster started with ray_cluster.sh.
#
#   HEAD_ADDR=10.0.0.1 ALGO=grpo MODEL=/shared/runs/qwen7b/judge_sft DATA=/shared/data/verl/train.parquet \
#       OUT=/shared/runs/qwen7b/online_grpo bash scripts/submit_verl_2node.sh
#   ... W_STR=0.0 bash scripts/submit_verl_2node.sh trainer.total_epochs=2     # an ablation = an override
#   DRY_RUN=1 ... bash scripts/submit_verl_2node.sh                              # print the submit command only
#
#   HEAD_ADDR=127.0.0.1 DASHBOARD_PORT=48265 NNODES=2 GPUS=1 DEVICE=cpu MODEL=... DATA=... OUT=... \
#       bash scripts/submit_verl_2node.sh trainer.total_training_steps=2   # the same launch rehearsed on one machine
#
# Settings as in train_verl.sh (ALGO, MODEL, DATA, VAL_DATA, OUT, PRESET, W_ACC, W_FMT, W_STR) plus
# HEAD_ADDR (required), DASHBOARD_PORT [8265], NNODES [2], GPUS [8 per node; DEVICE=cpu: 1],
# DEVICE [gpu] (cpu: verl's CPU platform on every node, for a cluster that ray_cluster.sh started on one
# machine with GPUS=1 per node; docs/online_learning.md "Rehearse the two-node launch on one machine"),
# RAY_AUTH_MODE [disabled] (as the cluster was started with: scripts/ray_cluster.sh).
# MODEL, DATA and OUT must be paths every node can read (shared storage). The runtime env ships this
# checkout as the job's working_dir (so `thinkj` imports on every node: the reward runs inside Ray workers);
# top-level big folders are excluded (anchored with "/", so the package thinkj/data/ still travels).
# With DEVICE=cpu the nodes are this machine: relative paths are made absolute here (the job runs in its own
# copy of the checkout), and the caches this shell uses (THINKJ_CACHE, HF_HOME, ...) travel with the job.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${HEAD_ADDR:?set HEAD_ADDR to the Ray head node IP address}"
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
# `ray` is this environment's (as in ray_cluster.sh)
export PATH="$(cd "$(dirname "$(command -v "$PY")")" && pwd):$PATH"
RAY=${RAY:-ray}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-disabled}
DEVICE=${DEVICE:-gpu}
MODEL=${MODEL:?set MODEL} DATA=${DATA:?set DATA} OUT=${OUT:?set OUT on shared storage} VAL_DATA=${VAL_DATA:-}
env_vars='"TOKENIZERS_PARALLELISM": "false", "NCCL_DEBUG": "WARN", "VLLM_LOGGING_LEVEL": "WARN"'
case "$DEVICE" in
  gpu) GPUS=${GPUS:-8} ;;
  cpu)
    GPUS=${GPUS:-1}
    local_path() { if [ -e "$1" ]; then realpath "$1"; else echo "$1"; fi; }  # a hub id stays as given
    MODEL=$(local_path "$MODEL") DATA=$(local_path "$DATA") OUT=$(realpath -m "$OUT")
    [ -n "$VAL_DATA" ] && VAL_DATA=$(local_path "$VAL_DATA")
    for name in THINKJ_CACHE HF_HOME HF_HUB_OFFLINE HF_DATASETS_OFFLINE VLLM_CACHE_ROOT; do
      value=${!name:-}
      [ -z "$value" ] && continue
      [ -e "$value" ] && value=$(realpath "$value")
      env_vars+=", \"$name\": \"$value\""
    done
    ;;
  *) echo "error: DEVICE=$DEVICE: choose gpu or cpu" >&2; exit 2 ;;
esac
args=(--algo "${ALGO:-grpo}" --model "$MODEL" --data "$DATA" --out "$OUT" --preset "${PRESET:-thinkj_qwen}"
      --nnodes "${NNODES:-2}" --gpus-per-node "$GPUS" --device "$DEVICE")
[ -n "$VAL_DATA" ] && args+=(--val-data "$VAL_DATA")
[ -n "${W_ACC:-}" ] && args+=(--weight "w_acc=$W_ACC")
[ -n "${W_FMT:-}" ] && args+=(--weight "w_fmt=$W_FMT")
[ -n "${W_STR:-}" ] && args+=(--weight "w_str=$W_STR")

# The entry point runs on the head node inside the uploaded working_dir; it composes the verl command
# (thinkj/online/verl_launch.py) there, so the config path is that node's copy of configs/verl.
# Words, not one string: `ray job submit` shell-quotes each word it gets (shlex.join), so a single string would
# run as a command named "python -m ...".
entry=(python -m thinkj.online.verl_launch "${args[@]}" -- "$@")
runtime_env='{"working_dir": ".", "excludes": ["/.venv/", "/.cache/", "/runs/", "/data/", "/.git/", "*.parquet", "*.safetensors"], '
runtime_env+="\"env_vars\": {$env_vars}}"

cmd=("$RAY" job submit --address "http://$HEAD_ADDR:${DASHBOARD_PORT:-8265}" --runtime-env-json "$runtime_env" -- "${entry[@]}")
if [ "${DRY_RUN:-0}" = "1" ]; then
  printf '%q ' "${cmd[@]}"; echo
  exit 0
fi
exec "${cmd[@]}"
