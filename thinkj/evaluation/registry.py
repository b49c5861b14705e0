"""Every benchmark in one table: its data source, loader, scorer and (where it has one) its own runner.

The generic code -- ``thinkj eval run`` / ``score``, :func:`thinkj.evaluation.run.run_eval`, the pipeline and the
demo -- reads benchmarks only through this table, the way lm-evaluation-harness reads its task registry. Adding a
benchmark means writing its module (loader + scorer, with the upstream rules it follows) and one entry here::

    BENCHMARKS.add("mybench", Benchmark("mybench", "hub/name", "test", "category", "what it is",
                                        load=mybench.load, score=mybench.score))

A pair benchmark (``load`` given) is judged by the generic pairwise runner in both orders and its records are
checked by :mod:`thinkj.evaluation.judgment_records`; a benchmark whose items are not pairs brings ``run`` and
``load_records`` of its own (RewardBench 2: best-of-4 and Ties sets).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation import judgebench, loaders, metrics, rewardbench2, rewardbench2_run
from thinkj.evaluation.judgment_records import Record, RecordCheck, check_both_orders, load_records, validate_record
from thinkj.evaluation.rows import take_items
from thinkj.evaluation.scoring_rules import AUTOJ_TEST_URL
from thinkj.records import PreferencePair
from thinkj.registry import Registry

LoadFn = Callable[[str | os.PathLike, str | None], list[PreferencePair]]
ScoreFn = Callable[[list[Record], str, bool], dict[str, Any]]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: where its data lives, how it groups, how it loads, scores and (optionally) runs."""

    name: str
    default_source: str | None  # hub name or URL used when no --data is given
    default_split: str | None
    group_field: str  # record field the benchmark's groups come from (``--limit`` spreads over them)
    description: str
    score: ScoreFn  # (records, protocol, unparsed_half) -> metrics with ``complete`` and ``missing``
    load: LoadFn | None = None  # (source, split) -> comparisons; None: its items are not pairs
    run: Callable[..., Path] | None = None  # (cfg, backend=) -> results path; None: the generic pairwise runner
    read_records: Callable[[Path], list[Record]] | None = None  # its own judgment-record files; None: pair records
    check_record: RecordCheck | None = None  # the grouping fields a pair record of this benchmark must carry
    templates: tuple[str, ...] = ()  # prompts of its own that ``eval run`` accepts besides the registered judges
    extra_fields: tuple[str, ...] = ()
    # (source, split) -> (item id, prompt text) of a benchmark whose items are not pairs (decontamination reads it)
    prompts: Callable[[str | os.PathLike, str | None], list[tuple[str, str]]] | None = None

    @property
    def pairs(self) -> bool:
        return self.load is not None


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")

BENCHMARKS.add("rewardbench", Benchmark(
    "rewardbench", "allenai/reward-bench", "filtered", "subset",
    "RewardBench: 2985 chosen/rejected pairs in 23 subsets, 4 sections.",
    score=metrics.score_rewardbench, load=loaders.load_rewardbench, check_record=metrics.check_rewardbench_record,
    extra_fields=("subset",)))
BENCHMARKS.add("rmbench", Benchmark(
    "rmbench", "THU-KEG/RM-Bench", "train", "domain",
    "RM-Bench: 3 chosen x 3 rejected styles per item, 9 comparisons.",
    score=metrics.score_rmbench, load=loaders.load_rmbench, check_record=metrics.check_rmbench_record,
    extra_fields=("domain", "chosen_style", "rejected_style")))
BENCHMARKS.add("autoj", Benchmark(
    "autoj", AUTOJ_TEST_URL, None, "scenario",
    "Auto-J pairwise test: 1392 pairs with ties, 58 scenarios in 8 groups.",
    score=metrics.score_autoj, load=loaders.load_autoj, check_record=metrics.check_autoj_record,
    extra_fields=("scenario",)))
BENCHMARKS.add("synthetic", Benchmark(
    "synthetic", None, None, "subset",
    "PreferencePair JSONL (e.g. the demo's held-out pairs): accuracy with a 95% interval.",
    score=metrics.score_synthetic, load=loaders.load_synthetic, extra_fields=("subset",)))
BENCHMARKS.add("judgebench", Benchmark(
    "judgebench", judgebench.HUB_NAME, judgebench.HUB_SPLIT, "category",
    "JudgeBench: 350 GPT-4o (split gpt) / 270 Claude pairs; net-over-both-orders accuracy.",
    score=judgebench.score_judgebench, load=judgebench.load_judgebench, check_record=judgebench.check_judgebench_record,
    extra_fields=("source", "category", "response_model")))
BENCHMARKS.add("rewardbench2", Benchmark(
    "rewardbench2", rewardbench2.HUB_NAME, rewardbench2.HUB_SPLIT, "subset",
    "RewardBench 2: 1865 prompts, best-of-4 subsets + Ties; own runner and records.",
    score=rewardbench2.score_records, run=rewardbench2_run.run_rewardbench2,
    read_records=rewardbench2.load_records, templates=tuple(rewardbench2_run.RB2_TEMPLATES), extra_fields=("subset",),
    prompts=lambda source, split: [(item.id, item.prompt) for item in rewardbench2.load_items(source, split)]))


def get_benchmark(name: str) -> Benchmark:
    return BENCHMARKS.lookup(name)


def names() -> str:
    return " | ".join(BENCHMARKS)


def load_benchmark(name: str, source: str | os.PathLike | None = None, split: str | None = None,
                   limit: int | None = None) -> list[PreferencePair]:
    """The comparisons of benchmark ``name``; ``limit`` keeps that many *items*, spread evenly over its groups."""
    bench = get_benchmark(name)
    if bench.load is None:
        raise ThinkJError(f"{name} items are not pairs: its own runner reads them (thinkj eval run {name})")
    chosen = source if source is not None else bench.default_source
    if chosen is None:
        raise ThinkJError(f"benchmark {name!r} has no default source: pass --data PATH")
    pairs = bench.load(chosen, split if split is not None else bench.default_split)
    return take_items(pairs, limit, bench.group_field) if limit else pairs


def prompt_text(messages: list[dict[str, str]]) -> str:
    """What a conversation asks, as one text: its turns' contents, one per line (one turn: that turn's text)."""
    return "\n".join(m["content"] for m in messages)


def load_prompts(name: str, source: str | os.PathLike | None = None, split: str | None = None) -> list[tuple[str, str]]:
    """(item id, prompt text) of every item of benchmark ``name``, once per item (RM-Bench's nine comparisons of
    one prompt are one item), in file order: what decontamination checks training data against."""
    bench = get_benchmark(name)
    chosen = source if source is not None else bench.default_source
    if chosen is None:
        raise ThinkJError(f"benchmark {name!r} has no default source: give its data as {name}=PATH")
    if bench.prompts is not None:
        return bench.prompts(chosen, split if split is not None else bench.default_split)
    prompts: dict[str, str] = {}
    for pair in load_benchmark(name, chosen, split):
        prompts.setdefault(str(pair.meta["record"]["item_id"]), prompt_text(pair.messages))
    return list(prompts.items())


def score(benchmark: str, records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """Metrics of ``records`` by the benchmark's own rules; pair records are validated and need both orders."""
    bench = get_benchmark(benchmark)
    if not records:
        raise ThinkJError("no judgment records to score")
    if bench.pairs:
        for record in records:
            validate_record(record, extra=bench.check_record)
        check_both_orders(records)
    return bench.score(records, protocol, unparsed_half)


def read_judgments(benchmark: str, path: str | os.PathLike) -> list[Record]:
    """A judgment-record file of ``benchmark``, validated row by row (file, row and field named on error)."""
    bench = get_benchmark(benchmark)
    if bench.read_records is not None:
        return bench.read_records(Path(path))
    return load_records(path, benchmark, extra=bench.check_record)
