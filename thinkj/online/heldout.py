"""Held-out judge metrics of an RL run: accuracy in each order, pair accuracy and the share of "(a)" verdicts.

Validation data holds both orders of every held-out comparison (``thinkj data verl-parquet --twins --split val``,
or ``--val-out`` to split a held-out share off the RL pairs); each row's ``extra_info`` carries the comparison key
(``twin``) and its ``order`` (0: as stored, "original"; 1: positions exchanged, "swapped"). From the policy's
verdicts on those rows (greedy in verl's validation: ``val_kwargs.do_sample`` false, and in TRL's evaluation):

* ``acc`` -- share of right verdicts over all rows (an unparsed verdict is wrong);
* ``acc_original`` / ``acc_swapped`` -- the same within each order. A judge that learns the position instead of
  the content moves these two apart;
* ``pair_acc`` -- per comparison, the chance that a verdict of each order are both right (with one verdict per
  order: right in both orders), averaged over the comparisons that have both orders. The consistency term's
  reading (``thinkj.rewards.designs.twins``); a judge that always says "(a)" scores 0 here while ``acc`` stays near 0.5;
* ``a_share`` -- share of "(a)" verdicts. The gold is (a) in exactly half of a both-orders set, so far from 0.5 is
  a position preference.

Per-order and pair keys need the order of every row; without it (rows written without ``--twins``) only ``acc`` and
``a_share`` are reported. verl logs these as ``val-judge/<data_source>/<name>`` (``thinkj.online.verl_hooks``), TRL
as ``eval_judge/<name>`` (``thinkj.online.trl_grpo``); ``thinkj train curves`` plots them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

ORDER_NAMES = ("original", "swapped")  # extra_info.order 0 / 1
METRICS = ("acc", "acc_original", "acc_swapped", "pair_acc", "a_share")


def order_name(info: Any) -> tuple[str, str]:
    """(comparison key, "original" | "swapped") of a row's ``extra_info``; ("", "") when it names no twin."""
    if not isinstance(info, dict):
        return "", ""
    twin, order = info.get("twin"), info.get("order")
    if twin in (None, "") or order not in (0, 1):
        return "", ""
    return str(twin), ORDER_NAMES[int(order)]


def judge_stats(preds: Sequence[Any], golds: Sequence[Any], twins: Sequence[str],
                orders: Sequence[str]) -> dict[str, float]:
    """The module docstring's metrics of one held-out set (one entry per generated verdict; a comparison's rows may
    repeat, n verdicts each). ``orders`` are "original" / "swapped" / "" (unknown)."""
    n = len(preds)
    if not (len(golds) == len(twins) == len(orders) == n):
        raise ValueError(f"judge_stats: {n} verdicts, {len(golds)} golds, {len(twins)} twin keys, {len(orders)} orders")
    if n == 0:
        return {}
    right = [g in ("a", "b") and p == g for p, g in zip(preds, golds)]
    stats = {"acc": sum(right) / n, "a_share": sum(p == "a" for p in preds) / n}
    if not all(o in ORDER_NAMES and t for t, o in zip(twins, orders)):
        return stats
    for name in ORDER_NAMES:
        hits = [r for r, o in zip(right, orders) if o == name]
        if hits:
            stats[f"acc_{name}"] = sum(hits) / len(hits)
    by_twin: dict[str, dict[str, list[bool]]] = defaultdict(lambda: {name: [] for name in ORDER_NAMES})
    for hit, twin, order in zip(right, twins, orders):
        by_twin[twin][order].append(hit)
    both = [sides for sides in by_twin.values() if all(sides[name] for name in ORDER_NAMES)]
    if both:
        stats["pair_acc"] = sum((sum(s["original"]) / len(s["original"])) * (sum(s["swapped"]) / len(s["swapped"]))
                                for s in both) / len(both)
    return stats
