"""Pair judgment records: validation, the two orders of a comparison, trials under a protocol, shared metrics.

A judgment record is one (comparison, order): ``item_id``, ``order`` (original | swapped), ``gold`` and
``verdict`` ("a" | "b" | "tie", positions as displayed in that order; ``verdict`` is None when the output
could not be parsed), plus the benchmark's grouping fields. Scoring never needs the model or the data.
``too_long`` marks a judgment that was never generated because prompt + budget exceed the model's context;
``truncated`` one whose thinking the budget cut off (no ``</think>``).

Protocols: ``single`` -- every judgment is one trial; ``pair`` -- a comparison is one trial, right only
when both of its orders are right. A verdict that is neither of the two responses (unparsable, tie, too long)
scores 0, or 0.5 with ``unparsed_half`` (RewardBench's ``scripts/run_generative.py``: every answer that is
neither A nor B is "effectively a tie", 0.5). The defaults -- both orders counted as two trials, an unparsed
verdict scoring 0 -- are those of Think-J's public ``star/eval_reward_bench.py``.

Every benchmark scorer reports ``complete`` and ``missing`` (:func:`completeness`), so a partial run can never
pass for a full one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.records import RecordError, read_jsonl

ORDERS = ("original", "swapped")
CHOICES = ("a", "b", "tie")
PROTOCOLS = ("single", "pair")
FLAGS = ("too_long", "truncated", "failed", "correct")  # the record's booleans
FLIP = {"a": "b", "b": "a", "tie": "tie", None: None}
PROTOCOL_RULES = {"single": "single: every judgment (comparison x order) is one trial",
                  "pair": "pair: a comparison is one trial, right only when both orders are right"}

Record = dict[str, Any]
RecordCheck = Callable[[Record, str | None, int | None], None]  # a benchmark's own record fields


def pct(x: float) -> float:
    return round(100.0 * x, 2)


def validate_record(row: Any, *, path: str | None = None, line: int | None = None,
                    extra: RecordCheck | None = None) -> Record:
    """Check the fields scoring relies on (and a benchmark's ``extra`` check); raise RecordError naming the file,
    row and field."""
    if not isinstance(row, dict):
        raise RecordError(f"expected a JSON object, got {type(row).__name__}", path=path, line=line)
    for name in ("item_id", "order", "gold", "verdict"):
        if name not in row:
            raise RecordError("missing", path=path, line=line, field=name)
    if row["order"] not in ORDERS:
        raise RecordError(f"must be one of {ORDERS}, got {row['order']!r}", path=path, line=line, field="order")
    if row["gold"] not in CHOICES:
        raise RecordError(f"must be one of {CHOICES}, got {row['gold']!r}", path=path, line=line, field="gold")
    if row["verdict"] is not None and row["verdict"] not in CHOICES:
        raise RecordError(f"must be one of {CHOICES} or null, got {row['verdict']!r}", path=path, line=line,
                          field="verdict")
    for flag in FLAGS:  # read as truth values: "yes" or 0 would silently count (or not) as a flag
        if row.get(flag) is not None and not isinstance(row[flag], bool):
            raise RecordError(f"must be true, false or null, got {row[flag]!r:.40}", path=path, line=line, field=flag)
    if extra is not None:
        extra(row, path, line)
    return row


def check_flipped_gold(original: Record, swapped: Record, key: tuple, *, path: str | None = None,
                       line: int | None = None) -> None:
    """The swapped order shows the responses the other way round, so its gold must be the original's flipped
    (a -> b, b -> a, tie -> tie); otherwise a right verdict would be scored wrong."""
    if swapped["gold"] != FLIP[original["gold"]]:
        raise RecordError(f"the swapped record of comparison {key} has gold {swapped['gold']!r}, but its original's "
                          f"gold is {original['gold']!r}: the swapped gold must be {FLIP[original['gold']]!r}",
                          path=path, line=line, field="gold")


def check_both_orders(records: list[Record], *, path: str | None = None, lines: list[int] | None = None) -> None:
    """Every comparison must have exactly its two orders (a lone order would be scored as if it were complete), and
    the swapped order's gold must be the original's flipped."""
    seen: dict[tuple, dict[str, tuple[int, Record]]] = defaultdict(dict)
    for index, record in enumerate(records):
        key, order = comparison_key(record), record["order"]
        line = lines[index] if lines else None
        if order in seen[key]:
            raise RecordError(f"a second {order} record for comparison {key}", path=path, line=line, field="order")
        seen[key][order] = (line if line is not None else index + 1, record)
    for key, orders in seen.items():
        if len(orders) != 2:
            (order, (line, _)), = orders.items()
            missing = "swapped" if order == "original" else "original"
            raise RecordError(f"comparison {key} has only its {order} order (no {missing} record); every comparison "
                              "is judged in both orders", path=path, line=line if lines else None, field="order")
        line, swapped = orders["swapped"]
        check_flipped_gold(orders["original"][1], swapped, key, path=path, line=line if lines else None)


def load_records(path: str | Path, benchmark: str | None = None, extra: RecordCheck | None = None) -> list[Record]:
    """Judgment records from JSONL, validated; with ``benchmark``, every row must belong to it."""
    rows, lines = [], []
    for line, row in read_jsonl(path):
        validate_record(row, path=str(path), line=line, extra=extra)
        if benchmark is not None and row.get("benchmark", benchmark) != benchmark:
            raise RecordError(f"belongs to benchmark {row.get('benchmark')!r}, not {benchmark!r}", path=str(path),
                              line=line, field="benchmark")
        rows.append(row)
        lines.append(line)
    if not rows:
        raise RecordError("no judgment records", path=str(path))
    check_both_orders(rows, path=str(path), lines=lines)
    return rows


def comparison_key(record: Record) -> tuple:
    """One comparison = item, RM-Bench style cell and sample index; its two records differ only in order."""
    return (str(record["item_id"]), record.get("chosen_style"), record.get("rejected_style"), record.get("sample", 0))


def by_comparison(records: Iterable[Record]) -> dict[tuple, dict[str, Record]]:
    """The records of each comparison by order; a repeated order or a swapped gold that is not the original's
    flipped raises (every scorer groups through here)."""
    groups: dict[tuple, dict[str, Record]] = defaultdict(dict)
    for record in records:
        key = comparison_key(record)
        if record["order"] in groups[key]:
            raise RecordError(f"two {record['order']} records for comparison {key}", field="order")
        groups[key][record["order"]] = record
    for key, orders in groups.items():
        if len(orders) == 2:
            check_flipped_gold(orders["original"], orders["swapped"], key)
    return groups


def trial_value(verdict: str | None, gold: str, unparsed_half: bool = False) -> float:
    """1 right, 0 wrong; with ``unparsed_half`` a verdict that names neither response of an a/b gold is 0.5."""
    if unparsed_half and gold in ("a", "b") and verdict not in ("a", "b"):
        return 0.5
    if verdict is None:
        return 0.5 if unparsed_half else 0.0
    return 1.0 if verdict == gold else 0.0


def trials(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> list[tuple[Record, float]]:
    """(record, value) per trial. Under ``pair`` the value is the worse of the two orders (1 only if both right)."""
    if protocol not in PROTOCOLS:
        raise ThinkJError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol == "single":
        return [(r, trial_value(r["verdict"], r["gold"], unparsed_half)) for r in records]
    out = []
    for key, orders in by_comparison(records).items():
        if len(orders) != 2:
            missing = [o for o in ORDERS if o not in orders]
            raise ThinkJError(f"protocol 'pair' needs both orders; comparison {key} lacks {missing}")
        value = min(trial_value(r["verdict"], r["gold"], unparsed_half) for r in orders.values())
        out.append((orders["original"], value))
    return out


def in_original_positions(record: Record) -> str | None:
    """The verdict mapped back to the original order's positions."""
    return record["verdict"] if record["order"] == "original" else FLIP[record["verdict"]]


def position_consistency(records: list[Record]) -> float | None:
    """Share of comparisons judged in both orders whose two verdicts name the same response (tie/tie counts)."""
    both = [o for o in by_comparison(records).values() if len(o) == 2]
    if not both:
        return None
    same = sum(1 for o in both if o["original"]["verdict"] is not None
               and in_original_positions(o["original"]) == in_original_positions(o["swapped"]))
    return pct(same / len(both))


def common_metrics(records: list[Record], protocol: str, unparsed_half: bool) -> dict[str, Any]:
    n = max(len(records), 1)
    too_long = sum(bool(r.get("too_long")) for r in records)
    truncated = sum(bool(r.get("truncated")) and not r.get("too_long") for r in records)
    other = sum(r["verdict"] is None and not r.get("too_long") and not r.get("truncated") for r in records)
    return {"position_consistency": position_consistency(records),
            "position_consistency_rule": "both orders name the same response (tie/tie counts; unparsed never)",
            "parse_failure": pct(other / n),
            "parse_failure_rule": "share of judgments without a readable verdict, not counting truncated or too_long",
            "truncated": pct(truncated / n),
            "truncated_rule": "share of judgments whose <think> the generation budget cut off (no </think>)",
            "n_too_long": too_long, "n_judgments": len(records), "n_comparisons": len(by_comparison(records)),
            "protocol": protocol, "protocol_rule": PROTOCOL_RULES[protocol],
            "unparsed": "half" if unparsed_half else "wrong",
            "unparsed_rule": ("a verdict naming neither response (unparsed, tie, too long) scores 0.5 "
                              "(RewardBench run_generative.py)") if unparsed_half
            else "a verdict naming neither response (unparsed, too long) scores 0; a tie is right only on a tie gold"}


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def items_per(records: list[Record], field: str, rename: dict[str, str] | None = None) -> dict[str, int]:
    items: dict[str, set] = defaultdict(set)
    for r in records:
        group = str(r.get(field))
        items[(rename or {}).get(group, group)].add(str(r["item_id"]))
    return {g: len(v) for g, v in items.items()}


def completeness(missing: list[str], records: list[Record]) -> dict[str, Any]:
    too_long = len({str(r["item_id"]) for r in records if r.get("too_long")})
    if too_long:
        missing = missing + [f"{too_long} item(s) too long for the model's context (not judged)"]
    return {"complete": not missing, "missing": missing}
