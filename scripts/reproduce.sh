#!/usr/bin/env bash
# End-to-end Think-J reproduction for one model: data selection -> judge SFT -> offline or online learning
# -> evaluation -> tables. Every setting is checked before stage 1. A stage is done when its completion record
# (<stage>.done.json) exists with the same settings; done stages are skipped, so rerunning resumes (docs/runs.md).
#
#   bash scripts/reproduce.sh configs/recipes/llama3-8b.yaml [--set key=value ...] [--dry-run]   # = thinkj run
#   DRY_RUN=1 bash scripts/reproduce.sh                     # no recipe: the defaults and the environment only
#   LEARNING=offline OFFLINE_ITERATIONS=3 bash scripts/reproduce.sh configs/recipes/qwen2.5-7b.yaml
#   W_STR=0.5 bash scripts/reproduce.sh configs/recipes/qwen2.5-7b.yaml    # one reward weight changed
#   SEED=1 bash scripts/reproduce.sh                        # another seed: a new run in runs/<MODEL_PROFILE>_seed1
#
# A recipe (configs/recipes/*.yaml) holds a model's settings; each value comes from, last one winning: the
# default < the recipe < the environment variable of its upper-case name < --set (thinkj/pipeline/settings.py).
# Settings (recipe keys in lower case, environment variables in upper case; empty = default), each with its
# default and why, declared once in thinkj/pipeline/settings.py:   python -m thinkj.pipeline --print-env
# SEED reaches every seeded stage: difficulty (--seed), judge/critic SFT and DPO (LlamaFactory seed=), the
# offline pairs (--seed), verl (data.seed, rollout.seed, actor/critic data_loader_seed) and evaluation (--seed).
# Unset, each stage keeps its own default (difficulty 0, LlamaFactory 42, verl's null/42/42, pairs 0, eval 0),
# so earlier runs stay reproducible and done. SEED is in the completion records: changing it under one RUN_DIR
# stops the run naming SEED; with the default RUN_DIR a seeded run goes to runs/<MODEL_PROFILE>_seed<SEED>.
# A variable that looks like a setting but is none (W_STRR, any unknown W_*, w_str, BENCHMARK) is refused with
# "did you mean ...?" instead of being ignored; a reward weight must be a finite number >= 0.
# The stage list lives in thinkj/pipeline/plan.py; this script only picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
# `thinkj` and `python` in the printed commands are this environment's.
export PATH="$(dirname "$PY"):$PATH"
case "${1:-}" in
  *.yaml|*.yml) exec "$PY" -m thinkj.cli run "$@" ;;  # a recipe: `thinkj run RECIPE [--set k=v ...] [--dry-run]`
  *) exec "$PY" -m thinkj.pipeline "$@" ;;
esac
