#!/usr/bin/env bash
# The same method end to end at tiny scale on CPU (nanochat's runcpu.sh): the pipeline's stage list on the tiny
# model and the fruit task (configs/recipes/tiny-cpu.yaml with offline and online learning, TRL GRPO, the four
# rows compared), then the tiny reward-weight sweep: four runs of the same recipe, w_fmt x w_str, sharing one run
# folder's data and SFT stages (experiments/tiny_table8.yaml).
#
#   bash scripts/runcpu.sh                  # runs/cpu/smoke + runs/cpu/tiny_table8 (its table: runs/cpu/sweep)
#   RUN_DIR=/tmp/x bash scripts/runcpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${RUN_DIR:-runs/cpu}
BIN=${BIN:-$( [ -x .venv/bin/thinkj ] && echo .venv/bin || dirname "$(command -v thinkj)" )}
S="$RUN_DIR/smoke"
"$BIN/thinkj" run configs/recipes/tiny-cpu.yaml --set run_dir="$S" --set learning=both --set rl_engine=trl \
    --set "eval_rows=base init offline online" --set critic_wrong_side_every=2 --set offline_pairs=outside_seed_set \
    --set dedup_text_field=instruction+responses --set tables=demo
# The sweep's run folder is its own: it trains its tiny judge once, then GRPO per cell (~1-2 min in all).
"$BIN/thinkj" sweep experiments/tiny_table8.yaml --launcher inprocess --sweep-dir "$RUN_DIR/sweep" \
    --set run_dir="$RUN_DIR/tiny_table8"
