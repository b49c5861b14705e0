"""Probe: does the offline stage (critic-guided pairs, DPO + SFT term) teach SmolLM2 the comparison? (issue 14)

    python experiments/smollm2_dpo_probe.py --run runs/demo --name d1 --pairs 16 --steps 8 --lr 3e-4
    python experiments/smollm2_dpo_probe.py --run runs/demo --name d2 --pairs 32 --steps 16 --lr 1e-4 --ftx 5

Starts from a finished ``make demo`` run folder (its init judge ``train/judge_sft``, its critic ``train/critic_sft`` and
its generated data): builds critic-guided pairs on the first ``--pairs`` training comparisons (cached per run and
size under ``--out``), trains LlamaFactory DPO with the SFT term (``pref_ftx = --ftx``) from the init judge, judges the
run's first 30 held-out pairs in both orders (greedy, in fp32: the demo itself now generates in bf16) and appends
accuracy, pair accuracy, unparsed answers and timings to ``<out>/results.jsonl``. Quicker than a whole demo rerun
for sweeping the DPO budget.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from thinkj.inference import SamplingParams, make_backend
from thinkj.inference.both_orders import judge_both_orders
from thinkj.offline.build import DPO_DATASET, build_critic_pairs
from thinkj.records import load_pairs
from thinkj.train.config import parse_overrides
from thinkj.train.launch import run_stage


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="runs/demo", help="a finished smollm2 demo run folder")
    ap.add_argument("--name", required=True)
    ap.add_argument("--pairs", type=int, default=16, help="training comparisons the judge and critic see")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--ftx", type=float, default=1.0, help="weight of the SFT term (LlamaFactory pref_ftx)")
    ap.add_argument("--eval", type=int, default=30, help="held-out pairs, judged in both orders")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra LlamaFactory argument")
    ap.add_argument("--out", default="runs/dpo_probe")
    args = ap.parse_args()

    run, out = Path(args.run), Path(args.out)
    start = time.monotonic()
    pairs_dir = out / "pairs" / f"{run.resolve().name}_n{args.pairs}_seed{args.seed}"
    summary = build_critic_pairs(load_pairs(run / "task" / "train.jsonl")[:args.pairs], run / "train" / "judge_sft",
                                 run / "train" / "critic_sft", pairs_dir, dataset=DPO_DATASET, max_new_tokens=96,
                                 seed=args.seed, backend_kwargs={"batch_size": 16})
    built = time.monotonic()
    model = run_stage("dpo", "dpo", profile="smollm2-135m-instruct", run_dir=out / args.name, name="model", device="cpu",
                      cpu_bf16=True, overrides={
        "model_name_or_path": str(run / "train" / "judge_sft"), "dataset": DPO_DATASET,
        "dataset_dir": str(pairs_dir.resolve()), "max_steps": args.steps, "per_device_train_batch_size": args.batch,
        "learning_rate": args.lr, "pref_ftx": args.ftx, "seed": args.seed, "save_strategy": "no", "logging_steps": 2,
        "cutoff_len": 512, "gradient_accumulation_steps": 1, "plot_loss": False, "report_to": "none",
        "disable_gradient_checkpointing": True, **parse_overrides(args.set)})
    trained = time.monotonic()
    test = load_pairs(run / "task" / "test.jsonl")[:args.eval]
    records = judge_both_orders(make_backend("hf", str(model), batch_size=30), test, "judge_strength_v2",
                                SamplingParams(temperature=0.0, max_new_tokens=96, seed=0))
    by_item: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by_item[r["item_id"]].append(r["correct"])
    result = {"name": args.name, **vars(args), "dpo_pairs": summary["pairs"], "counts": summary["counts"],
              "accuracy": round(100 * sum(r["correct"] for r in records) / len(records), 1),
              "pair_accuracy": round(100 * sum(all(v) for v in by_item.values()) / len(by_item), 1),
              "verdict_a": sum(r["verdict"] == "a" for r in records),
              "unparsed": sum(r["verdict"] is None for r in records), "judgments": len(records),
              "pairs_seconds": round(built - start), "dpo_seconds": round(trained - built),
              "eval_seconds": round(time.monotonic() - trained)}
    print(json.dumps(result))
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
