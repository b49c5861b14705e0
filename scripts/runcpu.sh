#!/usr/bin/env bash
# The same method end to end at tiny scale on CPU (nanochat's runcpu.sh): tiny model, synthetic task,
# every stage (selection, SFT, critic-guided DPO, TRL GRPO, evaluation, report), then a tiny reward-weight sweep.
#
#   bash scripts/runcpu.sh                  # runs/cpu/smoke + runs/cpu/sweep
#   RUN_DIR=/tmp/x bash scripts/runcpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${RUN_DIR:-runs/cpu}
BIN=${BIN:-$( [ -x .venv/bin/thinkj ] && echo .venv/bin || dirname "$(command -v thinkj)" )}
"$BIN/thinkj" smoke --model tiny --run-dir "$RUN_DIR/smoke"
# The sweep starts from the smoke run's SFT judge (it already writes verdicts) with demo-scale RL settings.
S="$RUN_DIR/smoke"
"$BIN/thinkj" sweep experiments/tiny_table8.yaml --launcher inprocess --sweep-dir "$RUN_DIR/sweep" \
    --set policy="$S/sft/judge_sft" --set train_data="$S/synthetic_data/train.jsonl" \
    --set test_data="$S/synthetic_data/test.jsonl" --set steps=8 --set lr=5e-4 --set num_generations=4 \
    --set prompts_per_step=4 --set max_completion_length=72 --set eval_limit=32 --set eval_max_new_tokens=96
