"""``thinkj smoke``: the whole method in one run directory, on SmolLM2-135M-Instruct or the tiny model.

    thinkj smoke --model smollm2 --run-dir runs/demo --seed 0      # make demo       (~11-12 min of stages, 2 cores)
    thinkj smoke --model tiny --run-dir runs/demo-tiny              # make demo-tiny  (~3 min; what the tests use)
    thinkj smoke --model smollm2 --run-dir runs/demo --only summary # re-render from a finished run

Stages run in the order of ``STAGES``; each takes the shared :class:`DemoContext`, writes under
``run_dir/<stage>/`` and returns a small summary dict. The terminal shows one line per stage; everything the
engines print goes to ``run_dir/logs/<stage>.log``. At the end: the table, one held-out item before and after
training, and ``run_dir/summary.json`` (:mod:`thinkj.demo.summary`); ``run_dir/demo_stages.json`` keeps every
stage's summary and seconds.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkj.demo.plans import PLANS, DemoPlan, with_overrides
from thinkj.errors import ThinkJError
from thinkj.paths import stage_dir
from thinkj.records import write_json

# (order, stage name, "module:function"), run by ascending order.
STAGES: list[tuple[int, str, str]] = [
    (10, "model", "thinkj.demo.stages_setup:build_model"),
    (20, "synthetic_data", "thinkj.demo.stages_setup:make_data"),
    (25, "judge_base", "thinkj.demo.stages_setup:judge_base"),
    (30, "difficulty", "thinkj.demo.stages_selection:difficulty"),
    (40, "dedup", "thinkj.demo.stages_selection:dedup"),
    (50, "teacher_traces", "thinkj.demo.stages_teacher:teacher_traces"),
    (60, "clip", "thinkj.demo.stages_teacher:clip"),
    (70, "seed_set", "thinkj.demo.stages_teacher:seed_set"),
    (80, "sft", "thinkj.demo.stages_offline:sft"),
    (90, "critic_pairs", "thinkj.demo.stages_offline:critic_pairs"),
    (100, "dpo", "thinkj.demo.stages_offline:dpo"),
    (110, "online", "thinkj.demo.stages_online:online"),
    (120, "evaluation", "thinkj.demo.stages_eval:evaluate"),
    (130, "report", "thinkj.tables.report:report"),
    (140, "summary", "thinkj.demo.summary:summary"),
]


class Artifacts(dict):
    """The paths stages hand on, in memory only: a stage run alone (``--only``) whose input an earlier stage of the
    same call did not produce gets this error instead of a KeyError from inside the stage."""

    def __missing__(self, key: str) -> Any:
        raise ThinkJError(f"demo: this stage needs {key!r}, which an earlier stage produces in the same call; add the "
                          "earlier stages to --only (or drop --only) -- finished training stages and cached "
                          "generations are reused, so they cost little")


@dataclass
class DemoContext:
    run_dir: Path
    seed: int = 0
    plan: DemoPlan = field(default_factory=lambda: PLANS["tiny"])
    # Paths later stages need. Conventions: "base_model"; "train_pairs" / "test_pairs" (PreferencePair JSONL);
    # "models": {"base" | "init" | "offline" | "online": model dir} -- the evaluation stage judges each one.
    artifacts: dict[str, Any] = field(default_factory=Artifacts)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per stage
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # CPU seconds (this process + children) per stage

    def stage(self, name: str) -> Path:
        return stage_dir(self.run_dir, name)


@contextlib.contextmanager
def engine_output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so C++ and child output too) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def fix_threads(threads: int) -> None:
    """The same thread count for every engine, so timings and (CPU) numerics compare between runs."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)


def cpu_time() -> float:
    """CPU seconds used so far by this process and its waited-for children: comparable between idle and busy machines."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _brief(name: str, summary: dict[str, Any]) -> str:
    """A few words about what a stage did, for its progress line."""
    get = summary.get
    if name == "model":
        return f"{get('name', 'tiny')} ({get('parameters', get('n_params', '?'))} parameters)"
    if name == "synthetic_data":
        split = get("split") or {}
        extra = f", held-out facts share {split.get('shared_entities', 0)} entities" if split else ""
        return f"{get('task')}: {get('train')} train / {get('test')} held-out pairs{extra}"
    if name in ("difficulty", "dedup", "teacher_traces", "clip"):
        return f"kept {get('n_out')} of {get('n_in')}"
    if name == "seed_set":
        return f"SFT sets {get('datasets')}, {get('rl_rows')} RL rows"
    if name == "sft":
        return f"judge loss {get('judge_sft', {}).get('train_loss')}, critic loss {get('critic_sft', {}).get('train_loss')}"
    if name == "critic_pairs":
        return (f"{get('pairs')} DPO pairs from {get('comparisons')} training comparisons "
                f"({get('seed_set_pairs_left_out')} seed-set pairs left out) {get('counts')}")
    if name == "dpo":
        return f"loss {get('train_loss')}"
    if name == "online":
        return f"{get('steps')} GRPO steps, reward {get('first_reward')} -> {get('last_reward')}"
    if name == "evaluation":
        return ", ".join(f"{row} {s.get('synthetic', {}).get('accuracy')}" for row, s in (get("scores") or {}).items())
    return json.dumps(summary, default=str)[:100]


# Plan fields where 0 means "none" (no preview, no benchmark slice, no warmup, no minimum); every other count must be
# at least 1. Learning rates must be positive; weights, the KL coefficient and rates are finite and not negative.
_ZERO_OK = ("base_preview", "rmbench_items", "autoj_items", "sft_warmup", "min_pairs")
_POSITIVE = ("sft_lr", "dpo_lr", "online_lr")


def check_plan(plan: DemoPlan) -> None:
    """Every number of the plan (after ``--set``) makes sense: one line naming the field, before any stage runs."""
    from dataclasses import fields

    from thinkj.checks import check_range

    for f in fields(plan):
        value = getattr(plan, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = f"demo plan: --set {f.name}"
        if f.name == "dedup_threshold":
            check_range(name, value, low=0, low_open=True, high=1)
        elif f.name in _POSITIVE:
            check_range(name, value, low=0, low_open=True)
        elif isinstance(value, float) or f.name in _ZERO_OK:
            check_range(name, value, low=0)
        else:
            check_range(name, value, low=1)
    for key, rate in plan.teacher.items():
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            check_range(f"demo plan: teacher {key}", rate, low=0, high=1)


def select_stages(plan: DemoPlan, only: list[str] | None) -> list[tuple[str, str]]:
    """The (name, target) of the stages to run: the plan's, narrowed to ``--only``. A name that is no stage, or one
    this plan skips, is refused in one line (a typo would otherwise run nothing and exit 0)."""
    planned = [(n, t) for _, n, t in sorted(STAGES) if not (n == "judge_base" and not plan.base_preview)]
    if not only:
        return planned
    names = [n for _, n, _ in sorted(STAGES)]
    for name in only:
        if name not in names:
            raise ThinkJError(f"--only {name!r}: no such stage; the stages: {', '.join(names)}")
        if name not in dict(planned):
            raise ThinkJError(f"--only {name!r}: the {plan.model} plan does not run this stage (base_preview is off)")
    return [(n, t) for n, t in planned if n in only]


def run_demo(run_dir: Path, seed: int = 0, model: str = "smollm2", only: list[str] | None = None,
             threads: int | None = None, overrides: list[str] | None = None) -> DemoContext:
    """Run the stages; ``threads`` overrides the plan's thread count (1 is faster on a machine other jobs load),
    ``overrides`` (``["dpo_steps=16"]``) any other field of the plan. Options are checked before anything is
    written."""
    from dataclasses import replace

    from thinkj.checks import check_output_dir, check_range

    check_range("--threads", threads, low=1)
    check_range("--seed", seed, low=0)
    plan = with_overrides(PLANS.lookup(model), overrides or [])
    if threads:
        plan = replace(plan, threads=threads)
    check_plan(plan)
    stages = select_stages(plan, only)
    check_output_dir("--run-dir", run_dir)
    fix_threads(plan.threads)
    ctx = DemoContext(Path(run_dir), seed, plan)
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    logs = ctx.run_dir / "logs"
    print(f"thinkj demo: {plan.model} on the {plan.task} task, seed {seed}, {plan.threads} threads -> {ctx.run_dir}",
          flush=True)
    for i, (name, target) in enumerate(stages, 1):
        module, func = target.split(":")
        start, cpu_start = time.monotonic(), cpu_time()
        log = logs / f"{name}.log"
        try:
            with engine_output_to(log):
                summary = getattr(importlib.import_module(module), func)(ctx) or {}
        except BaseException:
            print(f"[{i:2d}/{len(stages)}] {name:15s} FAILED after {time.monotonic() - start:.0f} s; log: {log}",
                  flush=True)
            raise
        ctx.timings[name] = round(time.monotonic() - start, 1)
        ctx.cpu_seconds[name] = round(cpu_time() - cpu_start, 1)
        ctx.summaries[name] = summary
        print(f"[{i:2d}/{len(stages)}] {name:15s} {ctx.timings[name]:6.1f} s (cpu {ctx.cpu_seconds[name]:6.1f} s)  "
              f"{_brief(name, summary)}", flush=True)
    record = {"model": plan.model, "seed": seed, "stages": ctx.summaries, "seconds": ctx.timings,
              "cpu_seconds": ctx.cpu_seconds, "total_seconds": round(sum(ctx.timings.values()), 1),
              "total_cpu_seconds": round(sum(ctx.cpu_seconds.values()), 1), "load_average": os.getloadavg()}
    write_json(ctx.run_dir / "demo_stages.json", record)
    if "summary" in ctx.artifacts:
        # the timings of this run, including the summary stage itself
        ctx.artifacts["summary"]["stage_seconds"] = dict(ctx.timings)
        ctx.artifacts["summary"]["stage_cpu_seconds"] = dict(ctx.cpu_seconds)
        ctx.artifacts["summary"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        write_json(ctx.run_dir / "summary.json", ctx.artifacts["summary"])
        print_results(ctx.artifacts["summary"])
    print(f"\nstage time {record['total_seconds']:.0f} s wall, {record['total_cpu_seconds']:.0f} s CPU "
          f"(load average now {os.getloadavg()[0]:.1f}); engine logs: {logs}/<stage>.log; "
          f"summary: {ctx.run_dir / 'summary.json'}", flush=True)
    return ctx


def print_results(document: dict[str, Any]) -> None:
    rows = document["rows"]
    print("\nHeld-out pairs, judged in both orders (greedy); accuracy with Wilson 95% interval over judgments, %")
    print(f"{'row':9s} {'accuracy':>8s} {'95% CI':>14s} {'pair acc':>9s} {'consistent':>10s} {'unparsed':>9s} {'items':>6s}")
    for row, m in rows.items():
        ci = f"[{m['accuracy_ci95'][0]:.1f}, {m['accuracy_ci95'][1]:.1f}]"
        print(f"{row:9s} {m['accuracy']:8.1f} {ci:>14s} {m['pair_accuracy']:9.1f} {m['consistency']:10.1f} "
              f"{m['parse_failure']:9.1f} {m['n_items']:6d}")
    for name, c in (document.get("comparisons") or {}).items():
        needed = c["accuracy_needed_for_separated_ci"]
        print(f"{name.replace('_vs_', ' vs '):17s} {c['change_points']:+6.1f} points; right only in one: "
              f"{c['only_later_right']} vs {c['only_earlier_right']} (McNemar exact p = {c['mcnemar_p']:.2g}); "
              f"separated intervals need {'an unreachable' if needed is None else f'{needed:.1f} %'}")
    checks = document.get("checks") or {}
    if checks:
        print("checks: " + ", ".join(f"{k}={v}" for k, v in checks.items()))
    ex = document.get("example")
    if ex:
        pair = ex.get("pair") or {}
        question = (pair.get("messages") or [{}])[-1].get("content", "")
        print(f"\nOne held-out item ({ex['item_id']}, gold ({ex['gold']})):")
        if pair:
            print(f"  Q: {question}\n  (a) {pair['response_a']}\n  (b) {pair['response_b']}")
        print(f"--- base model, verbatim (verdict: {ex['base_verdict']}):\n{ex['base_output'].strip()}")
        print(f"--- trained judge ({ex['after_row']}), verbatim (verdict: {ex['trained_verdict']}):\n"
              f"{ex['trained_output'].strip()}")
