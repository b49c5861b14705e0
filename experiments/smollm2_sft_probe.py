"""Probe: how much judge SFT does SmolLM2-135M-Instruct need on the facts task? (issue 14, experiments/LOG.md)

    python experiments/smollm2_sft_probe.py --name probe --n 64 --steps 32 --lr 1e-4
    python experiments/smollm2_sft_probe.py --name probe_ff --n 64 --steps 32 --lr 1e-4 --rationale fact_first
    python experiments/smollm2_sft_probe.py --name probe_bf16 --n 64 --steps 32 --lr 1e-4 --bf16

Writes ``n`` rule-based judge examples (the facts task's rationale + the right verdict) from the training entities,
trains the judge with LlamaFactory SFT on CPU, then judges ``--eval`` held-out pairs in both orders (greedy) and
appends accuracy, pair accuracy (both orders right) and per-kind counts to ``runs/probe/results.jsonl``.
``--rationale fact_first`` is the rationale order used before 2026-11-23 ("The answer is X. Response (a) says Y,
which is wrong. ..."); ``responses_first`` is the package's (``thinkj.synthetic.fact_task.explain``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from thinkj.export.llamafactory import write_sft_dataset
from thinkj.inference import SamplingParams, make_backend
from thinkj.inference.both_orders import judge_both_orders
from thinkj.models.fetch import fetch_model
from thinkj.records import PreferencePair
from thinkj.synthetic import fact_task
from thinkj.synthetic.sft_examples import judge_sft_examples
from thinkj.train.config import parse_overrides
from thinkj.train.launch import run_stage


def fact_first(pair: PreferencePair) -> str:
    fact = fact_task.fact_of(pair.instruction)
    return (f"The answer is {fact.value}. Response (a) {fact_task.describe(pair.response_a, fact)}. "
            f"Response (b) {fact_task.describe(pair.response_b, fact)}.")


RATIONALES = {"responses_first": fact_task.explain, "fact_first": fact_first}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--n", type=int, default=64, help="SFT examples (training entities only)")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--scheduler", default="cosine")
    ap.add_argument("--rationale", choices=sorted(RATIONALES), default="responses_first")
    ap.add_argument("--template", default="judge_strength_v2")
    ap.add_argument("--eval", type=int, default=30, help="held-out pairs, judged in both orders")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast where the CPU has native bf16 (for_cpu)")
    ap.add_argument("--no-gc", action="store_true", help="disable gradient checkpointing (LlamaFactory enables it)")
    ap.add_argument("--out", default="runs/probe")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra LlamaFactory argument, e.g. finetuning_type=freeze (repeatable)")
    args = ap.parse_args()

    out = Path(args.out) / args.name
    base = fetch_model("smollm2")
    start = time.monotonic()
    pairs = fact_task.make_pairs(args.n, seed=args.seed, split="train")
    write_sft_dataset(out / "data", "probe_judge", judge_sft_examples(pairs, args.template,
                                                                      explain=RATIONALES[args.rationale]))
    model = run_stage("sft", "judge_sft", profile="smollm2-135m-instruct", run_dir=out, device="cpu",
                      cpu_bf16=args.bf16, overrides={
        "model_name_or_path": str(base), "dataset": "probe_judge", "dataset_dir": str(out / "data"),
        "max_steps": args.steps, "per_device_train_batch_size": args.batch, "learning_rate": args.lr,
        "lr_scheduler_type": args.scheduler, "warmup_steps": 2, "seed": args.seed, "save_strategy": "no",
        "logging_steps": 4, "cutoff_len": 512, "gradient_accumulation_steps": 1, "plot_loss": False,
        "report_to": "none", "disable_gradient_checkpointing": args.no_gc, **parse_overrides(args.set)})
    trained = time.monotonic()
    test = fact_task.make_pairs(args.eval, seed=args.seed, split="test")
    records = judge_both_orders(make_backend("hf", str(model), batch_size=20), test, args.template,
                                SamplingParams(temperature=0.0, max_new_tokens=96, seed=0))
    kind = {p.id: p.meta["bad_kind"] for p in test}
    by_item: dict[str, list[bool]] = defaultdict(list)
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by_item[r["item_id"]].append(r["correct"])
        by_kind[kind[r["item_id"]]].append(r["correct"])
    result = {"name": args.name, **vars(args),
              "accuracy": round(100 * sum(r["correct"] for r in records) / len(records), 1),
              "pair_accuracy": round(100 * sum(all(v) for v in by_item.values()) / len(by_item), 1),
              "verdict_a": sum(r["verdict"] == "a" for r in records), "judgments": len(records),
              "by_kind": {k: f"{sum(v)}/{len(v)}" for k, v in sorted(by_kind.items())},
              "train_seconds": round(trained - start), "eval_seconds": round(time.monotonic() - trained)}
    print(json.dumps(result))
    with open(Path(args.out) / "results.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")
    (out / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


if __name__ == "__main__":
    main()
