#!/usr/bin/env bash
# The reproduction pipeline rehearsed on this machine's CPU: the same stage list as the GPU wrappers
# (scripts/reproduce_<model>.sh -> thinkj.pipeline), with settings that fit 2 cores. What it proves and what only a
# GPU run can prove: docs/reproduction.md ("Rehearse on your laptop, then run on the cluster").
#
#   bash scripts/reproduce_cpu.sh                        # SmolLM2-135M-Instruct, facts task, verl GRPO on CPU
#   W_STR=0.0 bash scripts/reproduce_cpu.sh              # the ablation: data and SFT stages skipped, a new online run
#   LEARNING=offline bash scripts/reproduce_cpu.sh       # critic SFT -> critic-guided pairs -> DPO (+ SFT term)
#   RL_ALGO=ppo bash scripts/reproduce_cpu.sh            # or reinforce_pp
#   SHARED_DATA=../shared/data bash scripts/reproduce_cpu.sh   # also evaluate Auto-J and RM-Bench slices
#   DRY_RUN=1 bash scripts/reproduce_cpu.sh              # print the stage commands, run nothing (or --dry-run)
#   CPU_MODEL=tiny bash scripts/reproduce_cpu.sh         # the 0.4 M-parameter tiny model (minutes; what tests run)
#   bash scripts/reproduce_cpu.sh --set task_train=128   # any setting by --set, as for `thinkj run`
#
# It is `thinkj run configs/recipes/${CPU_MODEL}-cpu.yaml` (CPU_MODEL: smollm2 [default] | tiny) with this
# checkout's Python and caches. The recipe's run prepares everything itself (thinkj/pipeline/prep.py): the model
# (SmolLM2 fetched into the cache; the tiny one built in the run folder by a `model` stage), the generated task
# (a `task` stage: TRAIN_SOURCE=pairs and the `synthetic` benchmark), the scripted R1 teacher on a free 127.0.0.1 port
# while the traces stage runs. Settings read from the environment as before, now pipeline settings:
# TASK_TRAIN [64], TASK_TEST [20], TASK_SEED [0], SHARED_DATA [unset: no Auto-J / RM-Bench], and every other one
# (python -m thinkj.pipeline --print-env) as an environment variable or `--set key=value` after the script's name.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
export PATH="$(dirname "$PY"):$PATH"
export THINKJ_CACHE=${THINKJ_CACHE:-$PWD/.cache} HF_HOME=${HF_HOME:-$PWD/.cache/hf}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1}
export TOKENIZERS_PARALLELISM=false RAY_TMPDIR=${RAY_TMPDIR:-$PWD/.cache/ray} VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$PWD/.cache/vllm}
exec "$PY" -m thinkj.cli run "configs/recipes/${CPU_MODEL:-smollm2}-cpu.yaml" "$@"
