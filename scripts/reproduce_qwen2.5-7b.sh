#!/usr/bin/env bash
# Think-J reproduction for Qwen2.5-7B-Instruct: the recipe configs/recipes/qwen2.5-7b.yaml (see scripts/reproduce.sh).
#
#   DRY_RUN=1 bash scripts/reproduce_qwen2.5-7b.sh              # print the command sequence
#   bash scripts/reproduce_qwen2.5-7b.sh                        # run (finished stages are skipped)
#   LEARNING=offline bash scripts/reproduce_qwen2.5-7b.sh       # critic-guided DPO instead of GRPO
#   bash scripts/reproduce_qwen2.5-7b.sh --set w_str=0.5        # the same as W_STR=0.5
exec bash "$(dirname "$0")/reproduce.sh" configs/recipes/qwen2.5-7b.yaml "$@"
