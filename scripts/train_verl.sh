#!/usr/bin/env bash
# Online learning with verl on one node, or on NNODES of a Ray cluster (GRPO / PPO / Reinforce++ with the Think-J reward, paper §3.2.2).
#
#   ALGO=grpo MODEL=runs/qwen7b/judge_sft DATA=data/verl/train.parquet bash scripts/train_verl.sh
#   ALGO=reinforce_pp PRESET=thinkj_llama W_STR=0.2 bash scripts/train_verl.sh trainer.total_epochs=2
#   DRY_RUN=1 ALGO=ppo bash scripts/train_verl.sh          # print the command only (works without GPUs)
#   DEVICE=cpu ALGO=grpo MODEL=runs/tiny/model DATA=train.parquet bash scripts/train_verl.sh trainer.total_training_steps=2
#                                                          # verl's real trainer on this machine's CPU (tiny models)
#
# Settings (environment variables; defaults in brackets):
#   ALGO       grpo | ppo | reinforce_pp                                  [grpo]
#   MODEL      policy to start from (the SFT-initialised judge)           [Qwen/Qwen2.5-7B-Instruct]
#   DATA       training parquet (thinkj.export.verl)                      [data/verl/train.parquet]
#   VAL_DATA   held-out validation parquet                                [none: validation off]
#   OUT        checkpoints + metric logs (logs/<project>/<exp>.jsonl)     [runs/online_$ALGO]
#   PRESET     reward preset: thinkj_qwen (1,1,0.2) | thinkj_llama (1,1,0) | cot_binary | ...   [thinkj_qwen]
#   W_ACC, W_FMT, W_STR   override one weight of the preset               [unset: the preset's]
#   GPUS       GPUs on this node (DEVICE=cpu: workers, one declared GPU each)   [8; DEVICE=cpu: 1]
#   NNODES     nodes; more than 1 joins the Ray cluster at RAY_ADDRESS (scripts/ray_cluster.sh, or
#              scripts/slurm/verl.sbatch), checked before launch                [1]
#   DEVICE     gpu | cpu (cpu: verl on the host CPU, docs/online_learning.md "Run verl on your laptop")  [gpu]
#   ALLOW_THINK_TOKENS=1  launch even if the model's tokenizer / chat template would hide <think> from the reward
#   DRY_RUN=1  print the command and stop
# Any arguments are Hydra overrides for verl, applied last (ablations are overrides, not copies of this script).
# The command line itself is composed by thinkj/online/verl_launch.py from configs/verl/<algo>.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
args=(--algo "${ALGO:-grpo}" --model "${MODEL:-Qwen/Qwen2.5-7B-Instruct}" --data "${DATA:-data/verl/train.parquet}"
      --out "${OUT:-runs/online_${ALGO:-grpo}}" --preset "${PRESET:-thinkj_qwen}" --nnodes "${NNODES:-1}"
      --gpus-per-node "${GPUS:-$( [ "${DEVICE:-gpu}" = cpu ] && echo 1 || echo 8 )}")
[ -n "${VAL_DATA:-}" ] && args+=(--val-data "$VAL_DATA")
[ -n "${W_ACC:-}" ] && args+=(--weight "w_acc=$W_ACC")
[ -n "${W_FMT:-}" ] && args+=(--weight "w_fmt=$W_FMT")
[ -n "${W_STR:-}" ] && args+=(--weight "w_str=$W_STR")
[ "${DRY_RUN:-0}" = "1" ] && args+=(--dry-run)
args+=(--device "${DEVICE:-gpu}")
[ "${ALLOW_THINK_TOKENS:-0}" = "1" ] && args+=(--allow-think-tokens)

exec "$PY" -m thinkj.online.verl_launch "${args[@]}" -- "$@"
