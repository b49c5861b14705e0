#!/usr/bin/env bash
# What a session lent one GPU runs after the GPU kit is installed (bash scripts/gpu_kit_install.sh install): the
# engines that have never run on a GPU, each on the tiny model made on the spot, each under its own timeout, every
# output under $OUT/<step>. One line per step: PASS / FAIL, seconds, where its log is. NOT YET RUN ON A GPU.
#
#   DRY_RUN=1 bash scripts/gpu_device_run.sh          # here: print each step's command, run nothing (tests do this)
#   OUT=$OUT bash scripts/gpu_device_run.sh           # there, after the kit's install call
#   STEPS="verl eval" OUT=$OUT bash scripts/gpu_device_run.sh   # a subset
#
# Steps (in order; each needs `prep`):
#   prep   the tiny model (hidden 128: vLLM needs head_dim >= 64), its judge (the project's SFT helper), fruit pairs,
#          the verl parquet and the LlamaFactory datasets (as tests/test_offline_train.py writes them)
#   verl   thinkj train rl --engine verl: GRPO, 3 steps, 1 node x 1 GPU, vLLM rollout (enforce_eager)
#   eval   thinkj eval run synthetic --backend vllm beside --backend hf on the same held-out slice (and, where the
#          checkout carries shared/data, an Auto-J slice the same way)
#   sft    thinkj train sft judge_sft with DeepSpeed ZeRO-3 (configs/deepspeed/ds_z3_config.json), 3 steps
#   dpo    thinkj train dpo dpo with DeepSpeed ZeRO-3, 3 steps
#   trl    TRL GRPO at 1.2 B x 64 rollouts x 512 tokens: scripts/speed/rl_step.py (random-1.2b, micro-batches)
#
# Settings: OUT [/tmp/gpu_run]; KIT_ENV [/tmp/gpu_kit/gpu_kit.env]; PYTHON [python3]; STEPS [all];
# STEP_TIMEOUT [300 s each]; SHARED_DATA [shared/data if present]; TOKENIZER (rl_step.py --tokenizer: a SmolLM2
# folder; the trl step is skipped without one). Exit status: the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_run}
KIT_ENV=${KIT_ENV:-/tmp/gpu_kit/gpu_kit.env}
PY=${PYTHON:-python3}
STEPS=${STEPS:-prep verl eval sft dpo trl}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
SHARED_DATA=${SHARED_DATA:-$( [ -d shared/data ] && echo shared/data || echo "" )}
DRY_RUN=${DRY_RUN:-0}
W=$OUT/work
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled \
       THINKJ_CACHE=$OUT/cache HF_HOME=$OUT/cache/hf VLLM_CACHE_ROOT=$OUT/cache/vllm RAY_TMPDIR=/tmp/ray_gpu_run \
       MPLCONFIGDIR=$OUT/cache/mpl PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ "$DRY_RUN" != 1 ]; then
  [ -f "$KIT_ENV" ] || { echo "FAIL setup: $KIT_ENV missing: install the kit first (scripts/gpu_kit_install.sh)"; exit 1; }
  # shellcheck disable=SC1090
  source "$KIT_ENV"
  mkdir -p "$OUT" "$W"
fi
THINKJ=("$PY" -m thinkj.cli)
failed=0

step() {  # step GROUP NAME COMMAND...: if GROUP is in STEPS, run under the timeout, log to $OUT/NAME.log
  local group=$1 name=$2; shift 2
  case " $STEPS " in *" $group "*) ;; *) return 0 ;; esac
  if [ "$DRY_RUN" = 1 ]; then printf 'DRY %s: %s\n' "$name" "$*"; return 0; fi
  local start=$SECONDS rc=0
  timeout --kill-after=20 "$STEP_TIMEOUT" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then echo "PASS $name: $((SECONDS - start)) s ($OUT/$name.log)"
  else echo "FAIL $name: exit $rc after $((SECONDS - start)) s ($OUT/$name.log): $(tail -n 3 "$OUT/$name.log" | tr '\n' ' ' | cut -c1-300)"
       failed=$((failed + 1)); fi
}

step prep prep "$PY" - "$W" <<'EOF'
import sys
from pathlib import Path
from thinkj.export.llamafactory import write_preference_dataset, write_sft_dataset
from thinkj.models.tiny import build_tiny_model, finetune_tiny_judge
from thinkj.offline.baselines import synthetic_judge_examples
from thinkj.prompts import get_template, judge_output
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import explain, make_pairs

work = Path(sys.argv[1])
base = build_tiny_model(work / "tiny", seed=0)
finetune_tiny_judge(base, work / "judge", device="cuda")  # writes verdicts, so rewards and accuracy are not all 0
pairs = [p for p in make_pairs(96, seed=202) if p.label in ("a", "b")]
write_jsonl(work / "rl_pairs.jsonl", pairs[:48])
write_jsonl(work / "heldout.jsonl", pairs[48:80])
lf = work / "lf"
judge = get_template("judge_strength_v2")
write_sft_dataset(lf, "thinkj_judge_sft", synthetic_judge_examples(pairs[:16]))
write_preference_dataset(lf, "thinkj_dpo", [
    (judge.render(p), judge_output(explain(p), p.label, p.strength),
     judge_output(explain(p), "b" if p.label == "a" else "a", p.strength)) for p in pairs[:16]])
print("prep done:", work)
EOF
step prep prep-parquet "${THINKJ[@]}" data verl-parquet "$W/rl_pairs.jsonl" "$W/rl.parquet" --val-out "$W/val.parquet"

step verl verl "${THINKJ[@]}" train rl --engine verl --algo grpo --model "$W/judge" --data "$W/rl.parquet" \
  --val-data "$W/val.parquet" --out "$OUT/verl" --nnodes 1 --gpus-per-node 1 \
  trainer.total_training_steps=3 data.train_batch_size=8 actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.enforce_eager=True actor_rollout_ref.rollout.gpu_memory_utilization=0.3 \
  data.max_prompt_length=768 data.max_response_length=128

for backend in hf vllm; do
  step eval "eval-$backend" "${THINKJ[@]}" eval run synthetic --model "$W/judge" --backend "$backend" \
    --data "$W/heldout.jsonl" --out "$OUT/eval-$backend" --max-new-tokens 96 --profile tiny
  if [ -n "$SHARED_DATA" ]; then
    step eval "autoj-$backend" "${THINKJ[@]}" eval run autoj --model "$W/judge" --backend "$backend" \
      --data "$SHARED_DATA/auto-j" --limit 40 --out "$OUT/autoj-$backend" --max-new-tokens 96 --profile tiny
  fi
done

LF_STEPS=(max_steps=3 per_device_train_batch_size=2 gradient_accumulation_steps=1 save_strategy=no logging_steps=1
          cutoff_len=1024 plot_loss=false "model_name_or_path=$W/tiny" "dataset_dir=$W/lf"
          deepspeed=configs/deepspeed/ds_z3_config.json bf16=true)
step sft sft "${THINKJ[@]}" train sft judge_sft --model tiny --device gpu --run-dir "$OUT/lf" "${LF_STEPS[@]}"
step dpo dpo "${THINKJ[@]}" train dpo dpo --model tiny --device gpu --run-dir "$OUT/lf" "${LF_STEPS[@]}"

if [ -n "${TOKENIZER:-}" ] || [ "$DRY_RUN" = 1 ]; then
  step trl trl "$PY" scripts/speed/rl_step.py --engines trl --settings after --model random-1.2b \
    --tokenizer "${TOKENIZER:-SMOLLM2_FOLDER}" --device gpu --generations 64 --prompts 1 --max-completion 512 \
    --micro-batch 8 --steps 2 --json "$OUT/trl_1.2b.json"
else
  echo "SKIP trl: TOKENIZER (a SmolLM2 folder for rl_step.py --tokenizer) not set"
fi
[ "$DRY_RUN" = 1 ] || echo "$([ "$failed" = 0 ] && echo PASS || echo FAIL) total: $failed failed steps"
exit "$failed"
