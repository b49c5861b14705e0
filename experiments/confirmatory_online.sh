#!/usr/bin/env bash
# The confirmatory online run (experiments/LOG.md, "2026-11-28, session 15: confirmatory online run — protocol"):
# plain TRL GRPO vs its init judge at 2,000 rollouts on seed 3, 300 distinct held-out comparisons, records kept.
#
#   bash experiments/confirmatory_online.sh          # the whole run; rerun it to resume
#
# 1. the init judge: the demo recipe, seed 0, in INIT_DEMO (default OUT/init_demo; the pipeline resumes its stages,
#    so a finished `make demo` run of the same commit, INIT_DEMO=runs/demo_seed0, skips its done stages; name the
#    folder the demo ran in: a moved copy is refused, its stage records hold their paths), its judge SFT
#    copied once to OUT/init_judge;
# 2. data, the plain arm and the evaluations of init and plain: experiments/position_consistent.sh with the
#    2,000-rollout experiment's settings (ARMS=plain, TEST=300); it skips a finished arm or evaluation and resumes
#    an arm from its last 50-step checkpoint;
# 3. the records, compact, in experiments/results/confirmatory_seed<SEED>/ and the table with the primary test
#    (experiments/recompute.py, the cluster permutation test in thinkj.stats by held-out question).
# Each heavy step takes the shared lock (LOCK) itself, so other engineers' jobs can run between them.
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${SEED:-3}
OUT=${OUT:-runs/confirmatory}
PY=${PY:-.venv/bin}
LOCK=${LOCK:-/tmp/thinkj-heavy.lock}
BACKEND=${BACKEND:-vllm}
RESULTS=${RESULTS:-experiments/results/confirmatory_seed$SEED}
TEST=300
INIT=$OUT/init_judge
INIT_DEMO=${INIT_DEMO:-$OUT/init_demo}
# bf16 autocast only where the CPU computes bf16 natively (thinkj.train.config.cpu_has_bf16), as the demo: emulated
# bf16 is several times slower than fp32
BF16=$("$PY/python" -c 'from thinkj.train.config import cpu_has_bf16; print(str(cpu_has_bf16()).lower())')

if [ ! -f "$INIT/config.json" ]; then
  echo "[confirm] init judge: the demo recipe, seed 0, in $INIT_DEMO"
  flock "$LOCK" "$PY/thinkj" run configs/recipes/smollm2-cpu.yaml --set run_dir="$INIT_DEMO" --set seed=0 \
    --set task_seed=0
  [ -f "$INIT_DEMO/train/judge_sft/config.json" ] || {
    echo "error: the demo made no judge at $INIT_DEMO/train/judge_sft" >&2; exit 2; }
  mkdir -p "$OUT"
  rm -rf "$INIT.partial"
  cp -r "$INIT_DEMO/train/judge_sft" "$INIT.partial"
  mv "$INIT.partial" "$INIT"  # whole or absent: a cut copy is never taken for the init
fi

echo "[confirm] seed $SEED (TRL bf16=$BF16): data, the plain arm, the evaluations of init and plain"
INIT=$INIT OUT=$OUT TASK=facts SEEDS=$SEED STEPS=250 LR=5e-6 TRAIN=512 TEST=$TEST GENS=4 PROMPTS=2 ARMS=plain \
  BACKEND=$BACKEND TRL_EXTRA="bf16=$BF16 gradient_checkpointing=false" PY=$PY \
  flock "$LOCK" bash experiments/position_consistent.sh

echo "[confirm] records in $RESULTS"
mkdir -p "$RESULTS"
"$PY/python" - "$OUT" "$SEED" "$RESULTS" <<'PYEOF'
import json
import sys
from pathlib import Path

from thinkj.records import read_jsonl

out, seed, results = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])


def compact(rows, path: Path) -> None:
    """One JSON object a line, no spaces, written whole (a cut write leaves the old file)."""
    tmp = path.with_suffix(".partial")
    tmp.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in rows))
    tmp.replace(path)


for arm in ("init", "plain"):  # only whole evaluations become records: a cut one would shrink the paired test
    done = json.loads((out / f"facts-s{seed}" / f"eval-{arm}" / "synthetic.results.json").read_text())
    if done.get("complete") is not True or done.get("missing"):
        sys.exit(f"error: the {arm} evaluation is incomplete (missing {done.get('missing')}): rerun this script")
compact([r for _, r in read_jsonl(out / f"data-facts-s{seed}" / "test.jsonl")], results / "pairs.jsonl")
for arm in ("init", "plain"):
    compact([r for _, r in read_jsonl(out / f"facts-s{seed}" / f"eval-{arm}" / "synthetic.judgments.jsonl")],
            results / f"{arm}.judgments.jsonl")
state = json.loads((out / f"facts-s{seed}" / "plain" / "trainer_state.json").read_text())
compact(state["log_history"], results / "train_log.jsonl")
for arm in ("init", "plain"):  # which model each row judged with (a hash of its files) and on which backend
    prov = json.loads((out / f"facts-s{seed}" / f"eval-{arm}" / "synthetic.results.json").read_text())["provenance"]
    print(f"{arm}: model_identity {prov.get('model_identity')}")
PYEOF
"$PY/python" experiments/recompute.py "$RESULTS" --compare plain:init | tee "$RESULTS/table.md"
echo "[confirm] done: commit $RESULTS with the LOG's results section"
