#!/usr/bin/env bash
# Position-consistent GRPO vs plain GRPO vs the init judge (experiments/LOG.md, 2026-11-25 protocol + amendment).
#
#   INIT=runs/demo_seed0/train/judge_sft SEEDS="0 1 2" TASK=facts bash experiments/position_consistent.sh
#   INIT=demo SEEDS="0 1 2" TASK=constraints bash experiments/position_consistent.sh   # an init judge per seed
#   .venv/bin/python experiments/position_consistent_report.py runs/pcg --task facts --seeds 0 1 2
#
# Per seed S: with INIT=demo, the init judge is seed S's own demo on TASK (the smollm2-cpu recipe with seed S and
# synthetic_task TASK, in OUT/TASK-sS/demo; resumed, not redone, on a rerun; the runs in LOG used `thinkj smoke`,
# the demo's own runner before the recipe replaced it); then data (thinkj data task, seed S), arms plain and consistent
# (TRL GRPO from INIT), then the held-out
# evaluation of init, plain and consistent in both orders (greedy). A finished arm (its thinkj_online_done.json)
# and a finished evaluation of the same model (its results JSON's model identity) are skipped on a rerun; the
# evaluation's own cache resumes a half-finished one.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${INIT:?INIT must name the init judge folder (the train/judge_sft folder of a demo run), or be demo (one per seed)}"
TASK=${TASK:-facts}
SEEDS=${SEEDS:-"0 1 2"}
OUT=${OUT:-runs/pcg}
STEPS=${STEPS:-24}
LR=${LR:-2e-5}
MAXLEN=${MAXLEN:-96}
GENS=${GENS:-4}          # rollouts per prompt (the group of plain; consistent's group is both orders: 2 x GENS)
PROMPTS=${PROMPTS:-2}    # plain's prompts a step; consistent takes PROMPTS/2 comparisons in both orders: the same rollouts
# further TRL overrides (key=value, space-separated), e.g. the demo's "bf16=true gradient_checkpointing=false" (bf16
# autocast and the shared-prefix passes, which checkpointing turns off); empty as the 2026-11-25 runs (fp32 CPU)
TRL_EXTRA=${TRL_EXTRA:-}
TRAIN=${TRAIN:-256}
TEST=${TEST:-150}
BACKEND=${BACKEND:-vllm}
ARMS=${ARMS:-"plain consistent"}
PY=${PY:-.venv/bin}
NICE=${NICE:-nice -n 5}
INIT_ARG=$INIT
# vLLM as every evaluation of this experiment ran: chunked prefill on (the backend's CPU default became whole-prompt
# prefill after the facts runs and constraints seed 0; greedy judgments must not change engine mid-experiment, and
# a rerun must reproduce the LOG's numbers, so the pin stays now that the experiment is finished)
PIN=(); [ "$BACKEND" = vllm ] && PIN=(--backend-arg enable_chunked_prefill=true)
[ "$INIT_ARG" = demo ] || [ -f "$INIT/config.json" ] || {
  echo "error: INIT=$INIT has no config.json (not a model folder)" >&2; exit 2; }

for S in $SEEDS; do
  if [ "$INIT_ARG" = demo ]; then
    echo "[pcg] $TASK s$S init judge: the demo recipe with seed $S on $TASK"
    $NICE $PY/thinkj run configs/recipes/smollm2-cpu.yaml --set run_dir="$OUT/$TASK-s$S/demo" --set seed="$S" \
      --set task_seed="$S" --set synthetic_task="$TASK"
    INIT=$OUT/$TASK-s$S/demo/train/judge_sft
    [ -f "$INIT/config.json" ] || { echo "error: the demo of seed $S made no judge at $INIT" >&2; exit 2; }
  fi
  D=$OUT/data-$TASK-s$S
  [ -f "$D/test.jsonl" ] || $PY/thinkj data task "$TASK" "$D" --train "$TRAIN" --test "$TEST" --seed "$S"
  for ARM in $ARMS; do
    R=$OUT/$TASK-s$S/$ARM
    if [ -f "$R/thinkj_online_done.json" ]; then
      # reuse a finished arm only when it was made with this driver's budget; else refuse (a stale arm is no result)
      made=$($PY/python -c 'import json,sys; r=json.load(open(sys.argv[1]))["run"]; print(r["steps"], r["learning_rate"], r["max_completion_length"], r["num_generations"])' "$R/thinkj_online_done.json")
      want=$($PY/python -c 'import sys; print(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))' "$STEPS" "$LR" "$MAXLEN" "$GENS")
      if [ "$made" != "$want" ]; then
        echo "error: $R was made with steps/lr/max-len/generations $made, not $want: move it away or set OUT to another folder" >&2
        exit 2
      fi
      echo "[pcg] $TASK s$S $ARM: done, skipped"; continue
    fi
    case $ARM in
      plain) EXTRA=(--prompts-per-step "$PROMPTS") ;;
      consistent) EXTRA=(--twins union --weight w_con=1.0 --prompts-per-step $(( PROMPTS / 2 ))) ;;
      *) echo "error: unknown arm $ARM (plain | consistent)" >&2; exit 2 ;;
    esac
    echo "[pcg] $TASK s$S $ARM: training ($STEPS steps)"
    start=$(date +%s)
    $NICE $PY/thinkj train rl --engine trl --model "$INIT" --data "$D/train.jsonl" --out "$R" \
      --steps "$STEPS" --lr "$LR" --num-generations "$GENS" --max-completion-length "$MAXLEN" --device cpu \
      "${EXTRA[@]}" "seed=$S" $TRL_EXTRA
    echo "{\"seconds\": $(( $(date +%s) - start ))}" > "$R/wall_time.json"
  done
  for ARM in init $ARMS; do
    M=$([ "$ARM" = init ] && echo "$INIT" || echo "$OUT/$TASK-s$S/$ARM/model")
    E=$OUT/$TASK-s$S/eval-$ARM
    MADE=$([ "$ARM" = init ] && echo "$INIT/config.json" || echo "$OUT/$TASK-s$S/$ARM/thinkj_online_done.json")
    # reuse an evaluation only of this very model: its provenance's model identity (a hash of the folder's files)
    # must match; results written before that field existed fall back to "newer than the model"
    if [ -f "$E/synthetic.results.json" ]; then
      same=$($PY/python - "$E/synthetic.results.json" "$M" <<'PYEOF'
import json, sys
from thinkj.inference.identity import model_identity
seen = json.load(open(sys.argv[1]))["provenance"].get("model_identity")
print("unknown" if seen is None else "yes" if seen == model_identity(sys.argv[2]) else "no")
PYEOF
)
      if [ "$same" = yes ] || { [ "$same" = unknown ] && [ "$E/synthetic.results.json" -nt "$MADE" ]; }; then
        echo "[pcg] $TASK s$S eval $ARM: done, skipped"; continue
      fi
    fi
    echo "[pcg] $TASK s$S eval $ARM"
    $NICE $PY/thinkj eval run synthetic --model "$M" --data "$D/test.jsonl" --backend "$BACKEND" \
      --max-new-tokens "$MAXLEN" --out "$E" "${PIN[@]}"
  done
done
echo "[pcg] all done"
