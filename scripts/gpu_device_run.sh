#!/usr/bin/env bash
# What a session lent one GPU runs after the GPU kit is installed (bash scripts/gpu_kit_install.sh install): the
# engines that have never run on a GPU, each on the tiny model made on the spot, each under its own timeout, every
# output under $RUNS/<step>. One line per step: PASS / FAIL, seconds, where its log is, then its key lines; all of
# them also in $OUT/summary.txt, and the logs in $OUT/logs.tar.gz (a device call returns 8 files at most). NOT YET
# RUN ON A GPU.
#
#   DRY_RUN=1 bash scripts/gpu_device_run.sh          # here: print each step's command, run nothing (tests do this)
#   OUT=$OUT bash scripts/gpu_device_run.sh           # there, after the kit's install call (python -m
#                                                     # thinkj.gpu_kit plan: the two calls it takes, with STEPS)
#   STEPS="verl eval" OUT=$OUT bash scripts/gpu_device_run.sh   # a subset
#   DEVICE=cpu KIT_ENV= PYTHON=.venv/bin/python RUNS=/tmp/rehearsal bash scripts/gpu_device_run.sh
#                                                     # here: the same steps on the CPU with the project's venv (fp32,
#                                                     # ZeRO-3 on 2 CPU processes, the tiny model in the trl step)
#
# Steps, in the order they run (the largest risk first, so a device session cut short still has it):
#   prep   env: Python, torch, the GPU, Triton, the C compiler Triton needs, /dev/shm and /tmp, and one Triton kernel
#          run on the GPU (without it verl's actor runs without torch.compile and vLLM judges eager, said in the
#          log), and whether vLLM's FlashAttention 3 loads (without it, as the kit has no FA2, both vLLM steps ask
#          for its TRITON_ATTN backend, said in the log); then the tiny model (hidden 128: vLLM needs head_dim >= 64),
#          its judge (the project's SFT helper), fruit pairs, the verl parquet and the LlamaFactory datasets (the
#          judge SFT examples and the plain DPO pairs of thinkj.synthetic.sft_examples)
#   verl   thinkj train rl --engine verl: GRPO, 3 steps, 1 node x 1 GPU, vLLM rollout (enforce_eager), a checkpoint,
#          metrics to the console and files (the kit leaves tensorboard out);
#          then scripts/merge_verl_checkpoint.sh turns it into a Hugging Face folder (verl-merge)
#   eval   thinkj eval run synthetic --backend vllm beside --backend hf on the same held-out pairs, both orders, with
#          the merged verl model (the judge where verl failed); eval-compare prints judgments/s (model load included),
#          parse failures and how many verdicts the two backends share (and, where the checkout carries
#          shared/data, an Auto-J slice the same way)
#   trl    TRL GRPO at 1.2 B, 8 prompts x 8 rollouts x 512 tokens: scripts/speed/rl_step.py (random-1.2b),
#          micro-batches of 8 (gpu_hf) and all 64 in one pass (gpu_before)
#   sft    thinkj train sft judge_sft with DeepSpeed ZeRO-3 (configs/deepspeed/ds_z3_config.json), 3 steps (on the
#          CPU: --processes 2, torchrun on gloo)
#   dpo    thinkj train dpo dpo with DeepSpeed ZeRO-3, 3 steps (the same)
# Each PASS / FAIL line gives the step's seconds and, on a GPU, its peak GPU memory (nvidia-smi, every 0.5 s).
#
# Settings: RUNS [/tmp/gpu_run: every step's outputs]; OUT [$RUNS/report: summary.txt and logs.tar.gz]; WORK
# [$RUNS/work: prep's models and data, which later steps read]; KIT_ENV
# [/tmp/gpu_kit/gpu_kit.env; empty: PYTHON has the packages already]; DEVICE [gpu | cpu: the rehearsal]; PYTHON
# [python3]; STEPS [prep verl eval trl sft dpo]; STEP_TIMEOUT [each step's own: env 120, prep 90, verl 240, verl-merge 60,
# eval-* 150, trl 200, sft 120 (240 on the CPU), dpo 120 s; set: the same for all]; SHARED_DATA [shared/data, else
# .cache/gpu_kit/data (the kit's copy), if present; empty: no Auto-J step]; TOKENIZER
# [.cache/gpu_kit/tokenizer if present: SmolLM2's config and tokenizer for rl_step.py's random 1.2 B model, which
# gpu_kit.sh writes; the trl step on a GPU is skipped without one]. Exit status: the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-/tmp/gpu_run}
OUT=${OUT:-$RUNS/report}
KIT_ENV=${KIT_ENV-/tmp/gpu_kit/gpu_kit.env}
PY=${PYTHON:-python3}
STEPS=${STEPS:-prep verl eval trl sft dpo}
STEP_TIMEOUT=${STEP_TIMEOUT:-}
# ../shared does not travel to the device: there the kit's copy of the Auto-J file (python -m thinkj.gpu_kit bench)
SHARED_DATA=${SHARED_DATA-$( if [ -d shared/data ]; then echo shared/data
                             elif [ -f .cache/gpu_kit/data/auto-j/testdata_pairwise.jsonl ]; then echo .cache/gpu_kit/data; fi )}
TOKENIZER=${TOKENIZER:-$( [ -f .cache/gpu_kit/tokenizer/config.json ] && echo .cache/gpu_kit/tokenizer || echo "" )}
DRY_RUN=${DRY_RUN:-0}
DEVICE=${DEVICE:-gpu}
case "$DEVICE" in gpu|cpu) ;; *) echo "FAIL setup: DEVICE=$DEVICE: gpu or cpu" >&2; exit 1 ;; esac
W=${WORK:-$RUNS/work}
# PYTHONUNBUFFERED: a step killed at its time limit keeps in its log what it printed (SIGTERM ends Python unflushed)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled \
       THINKJ_CACHE=$RUNS/cache HF_HOME=$RUNS/cache/hf VLLM_CACHE_ROOT=$RUNS/cache/vllm RAY_TMPDIR=/tmp/ray_gpu_run \
       MPLCONFIGDIR=$RUNS/cache/mpl PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ "$DRY_RUN" != 1 ]; then
  if [ -n "$KIT_ENV" ]; then
    [ -f "$KIT_ENV" ] || { echo "FAIL setup: $KIT_ENV missing: install the kit first (scripts/gpu_kit_install.sh)"; exit 1; }
    # shellcheck disable=SC1090
    source "$KIT_ENV"
  fi
  mkdir -p "$RUNS" "$W" "$OUT"
fi
THINKJ=("$PY" -m thinkj.cli)
failed=0

# what comes back from a device call is $OUT: at most 8 files (the device tool's limit), so the steps write under
# RUNS and $OUT keeps two files, remade after every step so that a call cut by its time limit still returns them:
# summary.txt (every PASS / FAIL / INFO line and each step's key lines) and logs.tar.gz (logs, memory traces,
# results, metrics; no weights, no caches)
say() { echo "$*"; [ "$DRY_RUN" = 1 ] || echo "$*" >>"$OUT/summary.txt"; }
pack() {
  (cd "$RUNS" && find . \( -path ./cache -o -path ./verl/checkpoints -o -path ./verl-hf -o -path "./${W#"$RUNS"/}" \) -prune \
     -o -type f \( -name '*.log' -o -name '*.memory' -o -name '*.seconds' -o -name '*.json' -o -name '*.jsonl' \) \
     -size -8M -print0 | tar --null -czf "$OUT/logs.tar.gz.part" -T - ) && mv "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"
}
# key lines of a step's log, said after its PASS / FAIL line (the whole log is in logs.tar.gz)
declare -A SHOW=(
  [env]='cat "$RUNS/env.log"'
  [verl]='"$PY" - "$RUNS/verl/logs" <<<"$VERL_METRICS"'
  [eval-compare]='cat "$RUNS/eval-compare.log"'
  [trl]='grep -E "^(engine|trl |# )" "$RUNS/trl.log"'
  [sft]='grep -E "^ +(train_loss|train_runtime|train_samples_per_second) += " "$RUNS/sft.log"'
  [dpo]='grep -E "^ +(train_loss|train_runtime|train_samples_per_second) += " "$RUNS/dpo.log"')
VERL_METRICS='
import json, sys
from pathlib import Path
keys = ("timing_s/step", "timing_s/gen", "timing_s/update_actor", "critic/score/mean", "response_length/mean",
        "perf/max_memory_allocated_gb", "perf/throughput")
for path in sorted(Path(sys.argv[1]).glob("*/*.jsonl")):
    for line in path.read_text().splitlines():
        row = json.loads(line)
        data = row["data"]
        print("verl step", row["step"], "; ".join(f"{k} {data[k]:.4g}" for k in keys if k in data))
'

declare -A LIMIT=([env]=120 [prep]=90 [verl]=240 [verl-merge]=60 [trl]=200 [sft]=120 [dpo]=120)
# the CPU rehearsal's sft first compiles DeepSpeed's CPU comm op (about 60 s on 2 cores; 108 s for the step)
[ "$DEVICE" = cpu ] && LIMIT[sft]=240

clip() {  # clip N: each line cut to N bytes, less a UTF-8 character the cut split (summary.txt stays valid UTF-8)
  cut -b "1-$1" | { iconv -c -f UTF-8 -t UTF-8 2>/dev/null || cat; }
}

why() {  # a failed step's reason: its log's last error line (a rich traceback's box lines skipped: their width of
  # UTF-8 frame would fill the 300 characters), else its last 3 lines
  local line
  line=$(grep -aE '([A-Za-z]+(Error|Exception)|error):' "$1" | grep -avE '^[[:space:]]*[│╭╰┃]' | tail -n 1)
  if [ -n "$line" ]; then echo "$line" | clip 300; else tail -n 3 "$1" | tr '\n' ' ' | clip 300; fi
}

step() {  # step GROUP NAME COMMAND...: if GROUP is in STEPS, run under its timeout, log to $RUNS/NAME.log
  local group=$1 name=$2; shift 2
  case " $STEPS " in *" $group "*) ;; *) return 0 ;; esac
  if [ "$DRY_RUN" = 1 ]; then printf 'DRY %s: %s\n' "$name" "$*"; return 0; fi
  local start=$SECONDS rc=0 limit=${STEP_TIMEOUT:-${LIMIT[$name]:-150}} watcher="" memory=""
  if [ "$DEVICE" = gpu ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"$RUNS/$name.memory" 2>/dev/null &
    watcher=$!
  fi
  timeout --kill-after=20 "$limit" "$@" >"$RUNS/$name.log" 2>&1 || rc=$?
  if [ -n "$watcher" ]; then
    kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
    memory=", peak GPU memory $(sort -n "$RUNS/$name.memory" | tail -n 1) MiB"
  fi
  echo "$((SECONDS - start))" >"$RUNS/$name.seconds"
  if [ "$rc" = 0 ]; then say "PASS $name: $((SECONDS - start)) s$memory ($RUNS/$name.log)"
  else say "FAIL $name: exit $rc after $((SECONDS - start)) s (limit $limit s)$memory ($RUNS/$name.log):" \
           "$(why "$RUNS/$name.log")"
       failed=$((failed + 1)); fi
  if [ -n "${SHOW[$name]:-}" ]; then
    eval "${SHOW[$name]}" 2>/dev/null | clip 400 | while IFS= read -r line; do say "  $line"; done
  fi
  pack
}

# what the machine offers that the engines take for granted: the GPU, Triton (torch.compile in verl's actor, some of
# vLLM's kernels), and the C compiler Triton builds each kernel's launcher with; a tiny Triton kernel is run on a GPU
step prep env "$PY" - "$W" "$DEVICE" <<'EOF'
import os
import shutil
import sys
from pathlib import Path

import torch

work, device = Path(sys.argv[1]), sys.argv[2]
print(f"python {sys.version.split()[0]}; torch {torch.__version__} (CUDA {torch.version.cuda})")
if torch.cuda.is_available():
    props = torch.cuda.get_device_properties(0)
    print(f"GPU: {torch.cuda.device_count()} x {props.name}, {props.total_memory / 2**30:.0f} GiB, sm{props.major}{props.minor}")
compilers = {name: shutil.which(name) for name in ("cc", "gcc", "clang", "nvcc", "ninja")}
print("on PATH:", ", ".join(f"{k} {v or 'absent'}" for k, v in compilers.items()), f"; CC={os.environ.get('CC', '')}")
for folder in ("/dev/shm", "/tmp"):
    usage = shutil.disk_usage(folder)
    print(f"{folder}: {usage.free / 2**30:.1f} GiB free of {usage.total / 2**30:.1f}")
# what the kit's link check (python -m thinkj.gpu_kit links) takes the system to provide, loaded here by name
import ctypes

from thinkj.gpu_kit.links import SYSTEM

unloadable = []
for name in sorted(SYSTEM):
    try:
        ctypes.CDLL(name)
    except OSError:
        unloadable.append(name)
print(f"system libraries: {len(SYSTEM) - len(unloadable)} of {len(SYSTEM)} load; not: {', '.join(unloadable) or 'none'}")
try:
    import triton
    print(f"triton {triton.__version__}")
except ImportError as err:
    triton = None
    print(f"triton does not import: {err}")
(work / "triton.failed").unlink(missing_ok=True)
if device == "gpu" and triton is not None:
    import triton.language as tl

    @triton.jit
    def add(x, y, out, n, block: tl.constexpr):
        i = tl.program_id(0) * block + tl.arange(0, block)
        tl.store(out + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)

    try:
        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        out = torch.empty_like(x)
        add[(4,)](x, x, out, 1000, block=256)
        assert torch.equal(out, 2 * x)
        print("triton kernel: compiled and ran")
    except Exception as err:
        (work / "triton.failed").write_text(f"{type(err).__name__}: {err}")
        print(f"triton kernel FAILED ({type(err).__name__}: {' '.join(str(err).split())[:300]}); the verl step turns "
              "torch.compile off")
(work / "fa3.unusable").unlink(missing_ok=True)
if device == "gpu":
    # The kit drops FlashAttention 2 (thinkj/gpu_kit/prune.py). vLLM's FLASH_ATTN backend, first on sm90, would fall
    # back to FA2 without FA3 and fail at the first forward, so without FA3 the vLLM steps ask for TRITON_ATTN.
    try:
        from vllm.vllm_flash_attn.flash_attn_interface import fa_version_unsupported_reason

        reason = fa_version_unsupported_reason(3)
    except Exception as err:
        reason = f"the check failed: {type(err).__name__}: {' '.join(str(err).split())[:300]}"
    if reason is None:
        print("vLLM FlashAttention 3: usable")
    else:
        (work / "fa3.unusable").write_text(reason)
        print(f"vLLM FlashAttention 3 NOT usable ({reason}); the verl and vllm eval steps use TRITON_ATTN")
EOF

TORCH_DEVICE=$([ "$DEVICE" = gpu ] && echo cuda || echo cpu)
step prep prep "$PY" - "$W" "$TORCH_DEVICE" <<'EOF'
import sys
from pathlib import Path
from thinkj.export.llamafactory import write_preference_dataset, write_sft_dataset
from thinkj.models.tiny import build_tiny_model, finetune_tiny_judge
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs
from thinkj.synthetic.sft_examples import judge_dpo_examples, judge_sft_examples

work = Path(sys.argv[1])
base = build_tiny_model(work / "tiny", seed=0)
finetune_tiny_judge(base, work / "judge", device=sys.argv[2])  # writes verdicts, so rewards and accuracy are not all 0
pairs = [p for p in make_pairs(96, seed=202) if p.decided]
write_jsonl(work / "rl_pairs.jsonl", pairs[:48])
write_jsonl(work / "heldout.jsonl", pairs[48:80])
lf = work / "lf"
write_sft_dataset(lf, "thinkj_judge_sft", judge_sft_examples(pairs[:16]))
write_preference_dataset(lf, "thinkj_dpo", judge_dpo_examples(pairs[:16]))
print("prep done:", work)
EOF
step prep prep-parquet "${THINKJ[@]}" data verl-parquet "$W/rl_pairs.jsonl" "$W/rl.parquet" --val-out "$W/val.parquet"

# without a Triton that can build kernels here (the env step), verl's actor runs without torch.compile
NO_COMPILE=()
if [ -f "$W/triton.failed" ]; then
  NO_COMPILE=(actor_rollout_ref.actor.use_torch_compile=False actor_rollout_ref.actor.fsdp_config.use_torch_compile=False
              actor_rollout_ref.ref.fsdp_config.use_torch_compile=False)
  say "INFO verl: torch.compile off, Triton could not build a kernel here ($(head -c 200 "$W/triton.failed"))"
fi
# without FlashAttention 3 (the env step), vLLM's rollouts use its Triton attention instead
TRITON_ATTN=()
if [ -f "$W/fa3.unusable" ]; then
  TRITON_ATTN=(+actor_rollout_ref.rollout.engine_kwargs.vllm.attention_backend=TRITON_ATTN)
  say "INFO verl: vLLM attention TRITON_ATTN, FlashAttention 3 is not usable here ($(head -c 200 "$W/fa3.unusable"))"
fi
step verl verl "${THINKJ[@]}" train rl --engine verl --device "$DEVICE" --algo grpo --model "$W/judge" \
  --data "$W/rl.parquet" --val-data "$W/val.parquet" --out "$RUNS/verl" --nnodes 1 --gpus-per-node 1 \
  trainer.total_training_steps=3 data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8 \
  actor_rollout_ref.rollout.n=4 actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.enforce_eager=True actor_rollout_ref.rollout.gpu_memory_utilization=0.3 \
  data.max_prompt_length=768 data.max_response_length=128 'trainer.logger=[console,file]' "${NO_COMPILE[@]}" \
  "${TRITON_ATTN[@]}"

# a verl run cut by its time limit can leave Ray's workers holding GPU memory that the next steps need (on the device
# nothing else runs Ray; here, other tests may, so the CPU rehearsal leaves Ray alone)
case " $STEPS " in *" verl "*)
  if [ "$DRY_RUN" != 1 ] && [ "$DEVICE" = gpu ] && command -v ray >/dev/null; then
    ray stop --force >"$RUNS/ray-stop.log" 2>&1 || true
  fi ;;
esac
step verl verl-merge env PYTHON="$PY" bash scripts/merge_verl_checkpoint.sh \
  "$RUNS/verl/checkpoints/global_step_3/actor" "$RUNS/verl-hf"

# the merged verl model where the merge wrote one, so the evaluation also shows that it loads in both backends
EVAL_MODEL=$W/judge
[ -f "$RUNS/verl-hf/config.json" ] && EVAL_MODEL=$RUNS/verl-hf
case " $STEPS " in *" eval "*) [ "$DRY_RUN" = 1 ] || say "INFO eval: model $EVAL_MODEL" ;; esac
EVALS=(synthetic)
for backend in hf vllm; do
  # vLLM's default on a GPU compiles the model (torch.compile, Triton) for CUDA graphs: eager where Triton cannot
  extra=()
  [ "$backend" = vllm ] && [ -f "$W/triton.failed" ] && extra=(--backend-arg enforce_eager=true)
  [ "$backend" = vllm ] && [ -f "$W/fa3.unusable" ] && extra+=(--backend-arg attention_backend=TRITON_ATTN)
  step eval "eval-$backend" "${THINKJ[@]}" eval run synthetic --model "$EVAL_MODEL" --backend "$backend" \
    --data "$W/heldout.jsonl" --out "$RUNS/eval-$backend" --max-new-tokens 96 --profile tiny "${extra[@]}"
  if [ -n "$SHARED_DATA" ]; then
    EVALS=(synthetic autoj)
    step eval "autoj-$backend" "${THINKJ[@]}" eval run autoj --model "$EVAL_MODEL" --backend "$backend" \
      --data "$SHARED_DATA/auto-j" --limit 40 --out "$RUNS/autoj-$backend" --max-new-tokens 96 --profile tiny \
      "${extra[@]}"
  fi
done
step eval eval-compare "$PY" - "$RUNS" "${EVALS[@]}" <<'EOF'
import json
import sys
from pathlib import Path

out, benchmarks = Path(sys.argv[1]), sys.argv[2:]
missing = []
for bench in benchmarks:
    prefix = "eval" if bench == "synthetic" else bench
    verdicts = {}
    for backend in ("hf", "vllm"):
        folder = out / f"{prefix}-{backend}"
        if not (folder / f"{bench}.results.json").is_file():  # its eval step failed: the other backend still reports
            missing.append(f"{prefix}-{backend}")
            print(f"{bench} {backend}: no results in {folder} ({prefix}-{backend} failed: its log says why)")
            continue
        rows = [json.loads(line) for line in (folder / f"{bench}.judgments.jsonl").read_text().splitlines()]
        metrics = json.loads((folder / f"{bench}.results.json").read_text())["metrics"]
        seconds = int((out / f"{prefix}-{backend}.seconds").read_text())
        verdicts[backend] = {(r["item_id"], r["order"], r["sample"]): r["verdict"] for r in rows}
        score = {k: metrics[k] for k in ("accuracy", "agreement") if k in metrics}
        print(f"{bench} {backend}: {len(rows)} judgments in {seconds} s, model load included "
              f"({len(rows) / max(seconds, 1):.2f}/s); not well-formed {sum(not r['well_formed'] for r in rows)}, "
              f"truncated {sum(r['truncated'] for r in rows)}, failed calls {sum(r['failed'] for r in rows)}; {score}")
    if len(verdicts) == 2:
        shared = verdicts["hf"].keys() & verdicts["vllm"].keys()
        same = sum(verdicts["hf"][k] == verdicts["vllm"][k] for k in shared)
        print(f"{bench}: the two backends give the same verdict on {same} of {len(shared)} judgments")
if missing:
    sys.exit(f"nothing to compare for {', '.join(missing)}")
EOF

# TRL: GRPORun's GPU layout (micro-batches of 8, transformers generate) first, then every rollout in one pass (what
# ran out of GPU memory on an H200 at 8 x 8 x 512), so the first row survives the second's failure
if [ "$DEVICE" = cpu ]; then
  step trl trl "$PY" scripts/speed/rl_step.py --engines trl --settings gpu_hf,gpu_before --model tiny --device cpu \
    --generations 4 --prompts 2 --max-completion 32 --micro-batch 4 --steps 2 --json "$RUNS/trl.json"
elif [ -n "$TOKENIZER" ] || [ "$DRY_RUN" = 1 ]; then
  step trl trl "$PY" scripts/speed/rl_step.py --engines trl --settings gpu_hf,gpu_before --model random-1.2b \
    --tokenizer "${TOKENIZER:-SMOLLM2_FOLDER}" --device gpu --generations 8 --prompts 8 --max-completion 512 \
    --steps 2 --json "$RUNS/trl.json"
else
  say "SKIP trl: TOKENIZER (a SmolLM2 folder for rl_step.py --tokenizer) not set"
fi

LF_STEPS=(max_steps=3 save_strategy=no logging_steps=1
          cutoff_len=1024 plot_loss=false "model_name_or_path=$W/tiny" "dataset_dir=$W/lf")
# ZeRO-3 on both devices: one process per GPU there, 2 CPU processes on gloo in the rehearsal (DeepSpeed's CPU
# accelerator, fp32; the launch tests/test_lf_deepspeed.py checks against one process)
LF_STEPS+=(deepspeed=configs/deepspeed/ds_z3_config.json)
# a global batch of 2 on both: 2 x 1 on the GPU; on the CPU the launcher splits the 2 accumulation steps over the
# 2 processes (it keeps the one-process run's global batch)
if [ "$DEVICE" = gpu ]; then
  LF_STEPS+=(bf16=true per_device_train_batch_size=2 gradient_accumulation_steps=1); LF_PROCS=()
else
  LF_STEPS+=(per_device_train_batch_size=1 gradient_accumulation_steps=2); LF_PROCS=(--processes 2)
fi
step sft sft "${THINKJ[@]}" train sft judge_sft --model tiny --device "$DEVICE" "${LF_PROCS[@]}" --run-dir "$RUNS/lf" \
  "${LF_STEPS[@]}"
step dpo dpo "${THINKJ[@]}" train dpo dpo --model tiny --device "$DEVICE" "${LF_PROCS[@]}" --run-dir "$RUNS/lf" \
  "${LF_STEPS[@]}"
[ "$DRY_RUN" = 1 ] || say "$([ "$failed" = 0 ] && echo PASS || echo FAIL) total: $failed failed steps"
exit "$failed"
