"""The evaluation phase: every benchmark judged by the final model, or by each row of Table 4's layout (``EVAL_ROWS``:
base, init, offline, online), and a ``compare`` stage that sets the rows against each other on the same judgments.

Planned by :func:`eval_stages` for :func:`thinkj.pipeline.plan.plan`, after the learning phase
(:mod:`thinkj.pipeline.learn`) has said which model each row is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from thinkj.pipeline.prep import task_files
from thinkj.pipeline.stage import Stage, Where, hf_args, opt

ROWS = ("base", "init", "offline", "online")  # EVAL_ROWS' values: Table 4's rows


def eval_folder(w: Where, row: str, model: Path) -> Path:
    """A row's evaluation folder, named by its model's place under train/ (a new online run: a new folder)."""
    if row == "base":
        return w.run / "eval" / "base"
    return w.run / "eval" / model.relative_to(w.run / "train").as_posix().replace("/", "_")


def eval_limit(s: Mapping[str, str], data: str) -> str:
    """EVAL_LIMIT for a benchmark read from ``data``, or "" where it cuts nothing: the generated task's held-out file
    holds TASK_TEST pairs, and a ``--limit`` run is never complete even when it covers the set
    (thinkj.evaluation.results), which would leave the demo's rows marked incomplete."""
    limit = s["EVAL_LIMIT"]
    if limit and s["SYNTHETIC_TASK"] and data == str(task_files(s["RUN_DIR"])[1]) \
            and int(limit) >= int(s["TASK_TEST"]):
        return ""
    return limit


def eval_stages(s: Mapping[str, str], w: Where, models: dict[str, Path], methods: dict[str, str],
                bench_data: Mapping[str, str], dp: list[str]) -> list[Stage]:
    """One ``eval_<bench>`` stage per benchmark for the final model, or ``eval_<row>_<bench>`` per EVAL_ROWS row;
    then ``compare`` when rows are judged."""
    from thinkj.evaluation.registry import get_benchmark

    rows = s["EVAL_ROWS"].split() or ["final"]
    base_tags = {"model": s["MODEL_NAME"], "train_data": s["TRAIN_DATA_NAME"]}
    weights = {name.lower(): s[name] for name in ("W_FMT", "W_STR", "W_CON") if s[name]}  # the online run's only
    stages, folders = [], {}
    for row in rows:
        model, folder = models[row], eval_folder(w, row, models[row])
        folders[row] = folder
        online = row == "online" or (row == "final" and s["LEARNING"] != "offline")
        tags = {**base_tags, "method": methods[row], **(weights if online else {})}
        if row == "offline" or (row == "final" and s["LEARNING"] == "offline"):
            tags["iteration"] = s["OFFLINE_ITERATIONS"]
        tag_args = [x for k, v in tags.items() for x in ("--tag", f"{k}={v}")]
        for bench in s["BENCHMARKS"].split():
            data = bench_data.get(bench, "")
            local = {"data": Path(data)} if data and (Path(data).exists() or Path(data) in w.planned) else {}
            stages.append(Stage(
                f"eval_{bench}" if row == "final" else f"eval_{row}_{bench}",
                ["thinkj", "eval", "run", bench, "--model", str(model), "--backend", s["JUDGE_BACKEND"],
                 "--out", str(folder / bench), *tag_args, "--max-new-tokens", s["MAX_NEW_TOKENS"],
                 *opt("--limit", eval_limit(s, data)), *opt("--seed", s["SEED"]), *opt("--data", data),
                 *hf_args(s, s["EVAL_BATCH"]),
                 *(["--backend-arg", f"tensor_parallel_size={s['TP']}"] if s["JUDGE_BACKEND"] == "vllm" else []),
                 *(dp if get_benchmark(bench).run is None else [])],  # a benchmark with its own runner: 1 worker
                folder / bench / f"{bench}.results.json",
                inputs={**({"model": model} if row != "base" or w.base_local else {}), **local}))
    if rows != ["final"]:
        # with an online row the table is this online run's (the folder its settings name): runs that share a
        # RUN_DIR and differ in those settings (a sweep's cells) each keep their own; otherwise every run's is the same
        out = w.run / "compare" / (models["online"].parent.name if "online" in rows else "")
        stages.append(Stage("compare", ["thinkj", "eval", "compare", *[f"{r}={folders[r]}" for r in rows],
                                        "--out", str(out)], out / "compare.json"))
    return stages


def eval_benchmark(stage: Stage) -> str:
    """The benchmark an evaluation stage judges (its command's fourth word: ``thinkj eval run <bench>``)."""
    return stage.argv[3]
