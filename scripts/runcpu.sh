#!/usr/bin/env bash
# The same method end to end at tiny scale on CPU (nanochat's runcpu.sh): the pipeline's stage list on the tiny
# model and the fruit task (configs/recipes/tiny-cpu.yaml with offline and online learning, TRL GRPO, the four
# rows compared), then a tiny reward-weight sweep from its SFT judge.
#
#   bash scripts/runcpu.sh                  # runs/cpu/smoke + runs/cpu/sweep
#   RUN_DIR=/tmp/x bash scripts/runcpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${RUN_DIR:-runs/cpu}
BIN=${BIN:-$( [ -x .venv/bin/thinkj ] && echo .venv/bin || dirname "$(command -v thinkj)" )}
S="$RUN_DIR/smoke"
"$BIN/thinkj" run configs/recipes/tiny-cpu.yaml --set run_dir="$S" --set learning=both --set rl_engine=trl \
    --set "eval_rows=base init offline online" --set critic_wrong_side_every=2 --set tables=demo
# The sweep starts from the run's SFT judge (it already writes verdicts) with demo-scale RL settings.
"$BIN/thinkj" sweep experiments/tiny_table8.yaml --launcher inprocess --sweep-dir "$RUN_DIR/sweep" \
    --set policy="$S/train/judge_sft" --set train_data="$S/task/train.jsonl" \
    --set test_data="$S/task/test.jsonl" --set steps=8 --set lr=5e-4 --set num_generations=4 \
    --set prompts_per_step=4 --set max_completion_length=72 --set eval_limit=32 --set eval_max_new_tokens=96
