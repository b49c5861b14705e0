"""JudgeBench (Tan et al. 2024, arXiv:2410.12784): pairs with an objectively correct answer, and its scoring.

    thinkj eval run judgebench --model ckpt/judge --data path/to/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl
    thinkj eval run judgebench --model ckpt/judge --split claude      # hub ScalerLab/JudgeBench, split gpt | claude
    thinkj eval score judgebench runs/eval/judgebench.judgments.jsonl

Data: ScalerLab/JudgeBench ``data/*.jsonl`` or the hub set (splits ``gpt``: 350 pairs of GPT-4o answers, the set
the paper's main table uses; ``claude``: 270 pairs of Claude-3.5-Sonnet answers; 620 in all). Row fields:
``pair_id``, ``source`` (``mmlu-pro-<subject>``, ``livebench-reasoning``, ``livebench-math``, ``livecodebench``),
``question``, ``response_A``, ``response_B``, ``label`` (``A>B`` | ``B>A``), ``response_model``.

Scoring (ScalerLab/JudgeBench ``utils/metrics.py`` ``compute_final_metrics`` with ``reverse_order``, called per
source prefix by ``run_judge.py``): the pair is judged as given and with the answers swapped; each order adds +1
when its verdict (mapped back to the original positions) equals the label, -1 when it is the reverse, 0 for a tie
or no verdict; the pair is correct when the sum is > 0. Accuracy = correct pairs / all pairs, per category (source
prefix) and overall (all pairs pooled, not a mean of categories).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation.judgment_records import ORDERS, by_comparison, completeness, in_original_positions, pct
from thinkj.evaluation.rows import read_rows, row_field, unique_pairs
from thinkj.records import PreferencePair, RecordError

HUB_NAME = "ScalerLab/JudgeBench"
HUB_SPLIT = "gpt"
# Category -> source prefix, in upstream run_judge.py's report order.
CATEGORIES: dict[str, str] = {"knowledge": "mmlu-pro", "reasoning": "livebench-reasoning",
                              "math": "livebench-math", "coding": "livecodebench"}
# Pairs per response model in the released data (data/*.jsonl of ScalerLab/JudgeBench).
PAIRS_PER_MODEL: dict[str, int] = {"gpt-4o-2024-05-13": 350, "claude-3-5-sonnet-20240620": 270}
LABELS = {"A>B": "a", "B>A": "b"}
SOURCE = "ScalerLab/JudgeBench utils/metrics.py compute_final_metrics (reverse_order=True), run_judge.py"
ACCURACY_RULE = ("both orders judged; each order +1 if it matches the label, -1 if reversed, 0 for tie or no "
                 f"verdict; pair correct when the net is > 0; accuracy over all pairs ({SOURCE})")
FLIP = {"a": "b", "b": "a", "tie": "tie", None: None}


def category_of(source: str) -> str | None:
    for name, prefix in CATEGORIES.items():
        if source.startswith(prefix):
            return name
    return None


def load_judgebench(source: str | os.PathLike, split: str | None = HUB_SPLIT) -> list[PreferencePair]:
    """JudgeBench rows -> comparisons (response_A shown as (a)); a bad row names file, row and field."""
    pairs = []
    for where, line, row in read_rows(source, split or HUB_SPLIT):
        pair_id = str(row_field(row, "pair_id", (str, int), where, line))
        origin = row_field(row, "source", str, where, line)
        category = category_of(origin)
        if category is None:
            raise RecordError(f"unknown source {origin!r} (expected a prefix in {sorted(CATEGORIES.values())})",
                              path=where, line=line, field="source")
        question = row_field(row, "question", str, where, line)
        a, b = row_field(row, "response_A", str, where, line), row_field(row, "response_B", str, where, line)
        label = row_field(row, "label", str, where, line)
        if label not in LABELS:
            raise RecordError(f"must be one of {sorted(LABELS)}, got {label!r}", path=where, line=line, field="label")
        record = {"item_id": pair_id, "source": origin, "category": category,
                  "response_model": str(row.get("response_model"))}
        pairs.append(PreferencePair(pair_id, "judgebench", [{"role": "user", "content": question}], a, b,
                                    LABELS[label], None, {"record": record}))
    return unique_pairs(pairs, source)


def check_judgebench_record(row: dict[str, Any], path: str | None = None, line: int | None = None) -> None:
    """JudgeBench records need their source, the category it belongs to, and the response model (a record without
    them would be scored in a category "unknown" and counted against no released set)."""
    source = row.get("source")
    if not isinstance(source, str) or category_of(source) is None:
        raise RecordError("missing" if source is None else f"unknown source {source!r} (expected a prefix in "
                          f"{sorted(CATEGORIES.values())})", path=path, line=line, field="source")
    if row.get("category") != category_of(source):
        raise RecordError("missing" if row.get("category") is None else
                          f"{row.get('category')!r} is not the category of source {source!r} ({category_of(source)!r})",
                          path=path, line=line, field="category")
    if not isinstance(row.get("response_model"), str) or not row["response_model"].strip():
        raise RecordError("missing" if row.get("response_model") is None else
                          f"must be a non-empty string, got {row.get('response_model')!r}", path=path, line=line,
                          field="response_model")


def pair_points(original: str | None, swapped_in_original: str | None, gold: str) -> int:
    """The net of ``compute_final_metrics``: +1 per order naming the labelled answer, -1 per order naming the other."""
    return sum(1 if d == gold else -1 if d == FLIP[gold] else 0 for d in (original, swapped_in_original))


def score_judgebench(records: list[dict[str, Any]], protocol: str = "single",
                     unparsed_half: bool = False) -> dict[str, Any]:
    """Accuracy per category and overall from judgment records in both orders (JudgeBench's own rule).

    ``protocol`` does not apply (the rule already combines both orders); ``unparsed_half`` is refused because
    JudgeBench counts a missing verdict 0 in the net.
    """
    if unparsed_half:
        raise ThinkJError("judgebench: --unparsed-half does not apply (officially a missing verdict counts 0)")
    correct: dict[str, list[float]] = defaultdict(list)
    every, consistent, models = [], [], defaultdict(int)
    for key, orders in by_comparison(records).items():
        if len(orders) != 2:
            raise ThinkJError(f"JudgeBench scoring needs both orders; pair {key[0]} lacks "
                              f"{[o for o in ORDERS if o not in orders]}")
        first = orders["original"]
        one, two = in_original_positions(first), in_original_positions(orders["swapped"])
        right = float(pair_points(one, two, first["gold"]) > 0)
        category = first.get("category") or category_of(str(first.get("source", ""))) or "unknown"
        correct[category].append(right)
        every.append(right)
        consistent.append(float(one is not None and one == two))
        models[str(first.get("response_model"))] += 1
    missing = [f"category {c}: no pairs" for c in CATEGORIES if c not in correct]
    for model, got in sorted(models.items()):
        if model not in PAIRS_PER_MODEL:
            missing.append(f"response_model {model!r} is not one of the released sets {sorted(PAIRS_PER_MODEL)}")
        elif got != PAIRS_PER_MODEL[model]:
            missing.append(f"{model}: {got} of {PAIRS_PER_MODEL[model]} pairs")
    order = [c for c in CATEGORIES if c in correct] + sorted(set(correct) - set(CATEGORIES))
    unparsed = sum(r["verdict"] is None for r in records)
    return {"accuracy": pct(sum(every) / len(every)),
            "categories": {c: pct(sum(correct[c]) / len(correct[c])) for c in order},
            "category_counts": {c: len(correct[c]) for c in order},
            "accuracy_rule": ACCURACY_RULE,
            "categories_rule": "the same accuracy over the pairs whose source starts with mmlu-pro (knowledge), "
                               "livebench-reasoning, livebench-math, livecodebench (coding), as run_judge.py",
            **completeness(missing, records), "response_models": dict(models),
            "consistency": pct(sum(consistent) / len(consistent)),
            "consistency_rule": "share of pairs whose two orders name the same answer (ours, not in JudgeBench)",
            "parse_failure": pct(unparsed / len(records)), "n_pairs": len(every), "n_judgments": len(records)}
