"""``thinkj smoke``: the whole method in one run directory, on SmolLM2-135M-Instruct or the tiny model.

    thinkj smoke --model smollm2 --run-dir runs/demo --seed 0      # make demo       (~11-12 min of stages, 2 cores)
    thinkj smoke --model tiny --run-dir runs/demo-tiny              # make demo-tiny  (~3 min; what the tests use)
    thinkj smoke --model smollm2 --run-dir runs/demo                # again: every finished stage is skipped
    thinkj smoke --model smollm2 --run-dir runs/demo --set dpo_steps=8   # redoes dpo and the stages after it
    thinkj smoke --model smollm2 --run-dir runs/demo --only summary # redo one stage, the others restored

Stages run in the order of ``STAGES``; each takes the shared :class:`DemoContext`, writes under
``run_dir/<stage>/`` and returns a small summary dict. The loop, the completion records, the per-stage logs and
the progress lines are :mod:`thinkj.stage_runner`'s, the same as the reproduction pipeline's: each stage's last act
is ``run_dir/<stage>/<stage>.done.json`` holding its settings (the seed and the plan fields of ``STAGE_FIELDS``
for it and every stage before it), its inputs' content (every path in ``ctx.artifacts`` when it started), its
summary, and the artifacts it added (with their content). A rerun skips a stage whose record matches and hands
its artifacts on to the later stages; a record made with other settings, on other inputs, or whose outputs were
changed or deleted since is not reused: the demo redoes that stage (the pipeline refuses instead), and every
stage after it. ``--only`` names stages to run whether done or not. The terminal shows one line per stage (a
skipped one says ``skipped (done)``); everything the engines print goes to ``run_dir/logs/<stage>.log``. At the
end: the table, one held-out item before and after training, and ``run_dir/summary.json``
(:mod:`thinkj.demo.summary`); ``run_dir/demo_stages.json`` keeps every stage's summary and seconds (a skipped
stage's as recorded).
"""
from __future__ import annotations

import importlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from thinkj import stage_runner
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


# The plan fields each stage's output depends on. A stage's completion record keeps its own and every earlier
# stage's (with the seed), so a changed field redoes the first stage that reads it and every stage after it:
# ``--set eval_batch=32`` redoes evaluation, report and summary; ``--set dpo_steps=8`` dpo and what follows.
# ``threads`` changes how fast, not what; the summary records the whole plan (every field by then).
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("model", "profile"),
    "synthetic_data": ("task", "train_pairs", "test_pairs"),
    "judge_base": ("base_preview", "template", "bf16_generation"),
    "difficulty": ("template", "difficulty_pairs", "difficulty_k", "difficulty_max_new_tokens", "difficulty_batch",
                   "bf16_generation"),
    "dedup": ("dedup_threshold", "dedup_text_field"),
    "teacher_traces": ("teacher", "task"),
    "clip": (),
    "seed_set": ("template", "critic_template"),
    "sft": ("sft_steps", "critic_steps", "sft_batch", "sft_lr", "sft_scheduler", "sft_warmup", "cutoff_len", "cpu_bf16",
            "gradient_checkpointing", "critic_wrong_side_every", "critic_template"),
    "critic_pairs": ("pair_limit", "pair_max_new_tokens", "pair_batch", "min_pairs", "bf16_generation"),
    "dpo": ("dpo_steps", "dpo_batch", "dpo_lr", "dpo_sft_weight"),
    "online": ("online_steps", "online_lr", "online_generations", "online_prompts_per_step", "online_max_completion",
               "online_max_rows", "online_beta", "online_data"),
    "evaluation": ("eval_pairs", "eval_max_new_tokens", "eval_batch", "rmbench_items", "autoj_items"),
    "report": (),
    "summary": ("threads",),
}


class Artifacts(dict):
    """The paths stages hand on; each stage's completion record keeps those it added, so a skipped stage restores
    them. A stage whose input no earlier stage produced or restored (``--only`` in a fresh folder) gets this error
    instead of a KeyError from inside the stage."""

    def __missing__(self, key: str) -> Any:
        raise ThinkJError(f"demo: this stage needs {key!r}, which an earlier stage produces; that stage has no "
                          "completion record for this plan in this run folder: add it to --only (or drop --only) -- "
                          "a finished stage is restored from its record, not run again")


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


def fix_threads(threads: int) -> None:
    """The same thread count for every engine, so timings and (CPU) numerics compare between runs."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)


def _brief(name: str, summary: dict[str, Any]) -> str:
    """A few words about what a stage did, for its progress line."""
    get = summary.get
    if name == "model":
        return f"{get('name', 'tiny')} ({get('parameters', get('n_params', '?'))} parameters)"
    if name == "synthetic_data":
        split = get("split") or {}
        # each task reports its own train/test overlap (facts: entities; constraints: items); all must be 0
        shared = {k.removeprefix("shared_"): v for k, v in split.items() if k.startswith("shared_")}
        extra = ", train/test share " + ", ".join(f"{v} {k}" for k, v in shared.items()) if shared else ""
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


def planned_stages(plan: DemoPlan) -> list[tuple[str, str]]:
    """The (name, target) of every stage this plan runs, in order."""
    return [(n, t) for _, n, t in sorted(STAGES) if not (n == "judge_base" and not plan.base_preview)]


def select_stages(plan: DemoPlan, only: list[str] | None) -> list[tuple[str, str]]:
    """The (name, target) of the stages to run: the plan's, narrowed to ``--only``. A name that is no stage, or one
    this plan skips, is refused in one line (a typo would otherwise run nothing and exit 0)."""
    planned = planned_stages(plan)
    if not only:
        return planned
    names = [n for _, n, _ in sorted(STAGES)]
    for name in only:
        if name not in names:
            raise ThinkJError(f"--only {name!r}: no such stage; the stages: {', '.join(names)}")
        if name not in dict(planned):
            raise ThinkJError(f"--only {name!r}: the {plan.model} plan does not run this stage (base_preview is off)")
    return [(n, t) for n, t in planned if n in only]


def stage_settings(plan: DemoPlan, seed: int, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per stage, what its completion record keeps as its settings: the seed and the plan fields of
    ``STAGE_FIELDS`` for it and every stage before it; from evaluation on, where the benchmark slices come from."""
    from thinkj.demo.stages_eval import shared_data_dir

    values, seen, out = asdict(plan), {"seed": seed}, {}
    for name in names:
        seen.update({f: values[f] for f in STAGE_FIELDS[name]})
        if name == "evaluation":  # RM-Bench / Auto-J slices are judged when this folder holds them
            data = shared_data_dir()
            seen["shared_data"] = str(data) if data.is_dir() else ""
        out[name] = dict(seen)
    return out


STAGE_FOLDER = "stage_folder"  # the role of a stage's own folder among its record's outputs
# ctx.artifacts in a record: a path inside the run folder is {"$run": "<relative path>"}, any other {"$path": "..."}
# (both turned back into Paths on load, the first under the run folder it is loaded in: a moved or copied run
# folder hands on its own files); dicts and lists as such.
_RUN, _PATH = "$run", "$path"


def encode_artifacts(value: Any, run_dir: Path) -> Any:
    if isinstance(value, Path):
        inside = value.is_relative_to(run_dir) if value.is_absolute() == run_dir.is_absolute() else False
        return {_RUN: value.relative_to(run_dir).as_posix()} if inside else {_PATH: str(value)}
    if isinstance(value, dict):
        return {str(k): encode_artifacts(v, run_dir) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_artifacts(v, run_dir) for v in value]
    return value


def _as_path(value: Any, run_dir: Path) -> Path | None:
    if isinstance(value, dict) and len(value) == 1:
        if isinstance(value.get(_RUN), str):
            return run_dir / value[_RUN]
        if isinstance(value.get(_PATH), str):
            return Path(value[_PATH])
    return None


def decode_artifacts(value: Any, run_dir: Path) -> Any:
    path = _as_path(value, run_dir)
    if path is not None:
        return path
    if isinstance(value, dict):
        return {k: decode_artifacts(v, run_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_artifacts(v, run_dir) for v in value]
    return value


def _added(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What ``after`` adds to or changes in ``before`` (encoded artifacts), nested dicts by key."""
    out = {}
    for key, value in after.items():
        old = before.get(key)
        if value == old:
            continue
        plain = isinstance(value, dict) and isinstance(old, dict) and not ({_RUN, _PATH} & (set(value) | set(old)))
        out[key] = _added(old, value) if plain else value
    return out


def _merge(target: dict[str, Any], changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def artifact_paths(encoded: Any, run_dir: Path, prefix: str = "") -> dict[str, Path]:
    """Every path in encoded artifacts, by its dotted key (``models.init``)."""
    path = _as_path(encoded, run_dir)
    if path is not None:
        return {prefix: path}
    items = encoded.items() if isinstance(encoded, dict) else enumerate(encoded) if isinstance(encoded, list) else ()
    return {k: p for key, v in items for k, p in artifact_paths(v, run_dir, f"{prefix}.{key}" if prefix else str(key)).items()}


def demo_step(ctx: DemoContext, name: str, target: str, settings: dict[str, Any]) -> stage_runner.Step:
    """One demo stage as the shared loop runs it: the function, its engines' output in the stage's log; its record
    adds its summary, the artifacts it added, and the content of those and of its folder's top-level files
    (``outputs``: a stage whose output was deleted or edited since is not done)."""

    def work(log: Path) -> dict[str, Any]:
        module, func = target.split(":")
        before = encode_artifacts(ctx.artifacts, ctx.run_dir)
        with stage_runner.output_to(log):
            summary = getattr(importlib.import_module(module), func)(ctx) or {}
        added = _added(before, encode_artifacts(ctx.artifacts, ctx.run_dir))
        ctx.stage(name)  # its folder, where its record goes, exists whether the stage wrote there or not
        made = outputs({"artifacts": added})
        return {"summary": summary, "artifacts": added, "outputs": stage_runner.fingerprints(made),
                "output_paths": {role: str(path) for role, path in made.items()}}

    def outputs(record: dict[str, Any]) -> dict[str, Path]:
        """Where the stage's outputs are in this run folder: its artifacts, and what it wrote beside them
        (judgments, the table) as its folder's top-level files."""
        return {**artifact_paths(record.get("artifacts") or {}, ctx.run_dir), STAGE_FOLDER: ctx.run_dir / name}

    def done(record: dict[str, Any], skipped: bool) -> None:
        if skipped:
            _merge(ctx.artifacts, decode_artifacts(record.get("artifacts") or {}, ctx.run_dir))
        ctx.summaries[name] = record.get("summary") or {}
        ctx.timings[name] = float(record.get("seconds") or 0.0)
        ctx.cpu_seconds[name] = float(record.get("cpu_seconds") or 0.0)

    path = ctx.run_dir / name / f"{name}{stage_runner.RECORD_SUFFIX}"  # in the stage's folder (ctx.stage)
    return stage_runner.Step(name, path, settings, work,
                             inputs=lambda: artifact_paths(encode_artifacts(ctx.artifacts, ctx.run_dir), ctx.run_dir),
                             done=done, outputs=outputs,
                             brief=lambda record: _brief(name, record.get("summary") or {}))


def run_demo(run_dir: Path, seed: int = 0, model: str = "smollm2", only: list[str] | None = None,
             threads: int | None = None, overrides: list[str] | None = None) -> DemoContext:
    """Run the stages, skipping those whose completion record matches (their artifacts restored); ``threads``
    overrides the plan's thread count (1 is faster on a machine other jobs load), ``overrides``
    (``["dpo_steps=16"]``) any other field of the plan. Options are checked before anything is written."""
    from dataclasses import replace

    from thinkj.checks import check_output_dir, check_range

    check_range("--threads", threads, low=1)
    check_range("--seed", seed, low=0)
    plan = with_overrides(PLANS.lookup(model), overrides or [])
    if threads:
        plan = replace(plan, threads=threads)
    check_plan(plan)
    select_stages(plan, only)  # refuses a name that is no stage of this plan
    planned = planned_stages(plan)
    check_output_dir("--run-dir", run_dir)
    fix_threads(plan.threads)
    ctx = DemoContext(Path(run_dir), seed, plan)
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    logs = ctx.run_dir / "logs"
    print(f"thinkj demo: {plan.model} on the {plan.task} task, seed {seed}, {plan.threads} threads -> {ctx.run_dir}",
          flush=True)
    settings = stage_settings(plan, seed, [n for n, _ in planned])
    steps = [demo_step(ctx, name, target, settings[name]) for name, target in planned]
    outcome = stage_runner.run_steps(steps, policy=stage_runner.REDO, logs=logs, only=only or None)
    record = stage_runner.timings_record(ctx.timings, ctx.cpu_seconds, model=plan.model, seed=seed,
                                         stages=ctx.summaries)
    record.update(ran=outcome.ran, skipped=outcome.skipped)
    write_json(ctx.run_dir / "demo_stages.json", record)
    if "summary" in ctx.artifacts:
        # the timings of this run, including the summary stage itself (a skipped stage's as recorded)
        ctx.artifacts["summary"]["stage_seconds"] = dict(ctx.timings)
        ctx.artifacts["summary"]["stage_cpu_seconds"] = dict(ctx.cpu_seconds)
        ctx.artifacts["summary"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        write_json(ctx.run_dir / "summary.json", ctx.artifacts["summary"])
        print_results(ctx.artifacts["summary"])
    done_before = f"; {len(outcome.skipped)} stages done before, their recorded times" if outcome.skipped else ""
    print(f"\nstage time {record['total_seconds']:.0f} s wall, {record['total_cpu_seconds']:.0f} s CPU "
          f"(load average now {os.getloadavg()[0]:.1f}{done_before}); engine logs: {logs}/<stage>.log; "
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
