"""Both orders of a comparison in one step: the consistency term, the twin grouping and position diagnostics.

A comparison shown as (question, response A, response B) has a **twin**: the same comparison with the two
responses' positions exchanged (``PreferencePair.swapped``; the gold label follows its response). Twin rows carry
the same ``twin`` key and an ``order`` (0: as stored, 1: swapped); the RL data writers put them side by side
(``thinkj.export.verl.verl_rows(twins=True)``, ``thinkj.online.trl_grpo.load_rl_rows(twins=...)``).

**Consistency term** (J1, Whitehouse et al. 2025, arXiv 2505.10320: reward a verdict only when the judge is right in
both orders). J1 states the reward for one verdict per order; a GRPO step has a sub-group of ``n`` rollouts per
order, so which rollout of the other order is "its twin" needs a rule. Our reading pairs each rollout with every
rollout of the twin's sub-group and pays the share of those pairs in which both verdicts are right::

    R_con(i) = 1[verdict_i right] * (right verdicts in the twin sub-group) / (size of the twin sub-group)

i.e. the chance that rollout ``i`` and a rollout drawn from the other order are both right -- the only verdicts
of the twin that agree with a right verdict of ``i`` (name the same response) are the right ones. A rollout
whose twin sub-group is absent from the step earns 0 and is counted (``twin_missing``). A position-constant
judge ("(a)" in both orders) is right in exactly one order, so every one of its rollouts earns 0.

**Union grouping** (J4R's EIS-GRPO: equivalent inputs form sub-groups of one group). The GRPO advantage of a
rollout is taken over the ``2n`` rollouts of both orders instead of its own order's ``n``: the group key is the
``twin`` key (:func:`group_keys`). Under per-order groups a judge that says "(a)" in both orders gets zero
advantage everywhere (every sub-group is uniform), so nothing corrects it; over the union its right order's
rollouts are above the mean and its wrong order's below, and the advantages of its "(a)" verdicts sum to zero:
the position itself earns no net advantage, while the order it gets wrong is pushed toward the gold.

**Position diagnostics** (:func:`position_stats`), logged every training step by both engines:
``pos/a_share`` (share of rollouts whose verdict is "(a)"), ``pos/acc_gold_a`` and ``pos/acc_gold_b`` (accuracy
among rollouts whose gold is (a) / (b)), ``pos/gold_a_share`` (the step's gold balance) and, when the step holds
both orders of a comparison, ``pos/flip_rate``: over every cross-order pair of rollouts of one comparison whose two
verdicts both parse, the share that name the same *position* -- the preference flips with the order.
:func:`gold_balance` checks the RL data's gold-position balance (warns beyond :data:`BALANCE_TOLERANCE`).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

TWIN_MODES = ("off", "step", "union")  # no twins / both orders in one step, per-order groups / one group of both
BALANCE_TOLERANCE = 0.05  # gold-position share of (a) may differ from 50 % by this much before a warning


def _right(pred: Any, gold: Any) -> bool:
    return gold in ("a", "b") and pred == gold


def consistency_terms(preds: Sequence[Any], golds: Sequence[Any], twins: Sequence[Any],
                      orders: Sequence[Any]) -> list[dict[str, float]]:
    """``{"consistency": R_con, "twin_missing": 0|1}`` per rollout (the module docstring's rule).

    ``preds`` are parsed verdicts ("a", "b" or anything else for unparsed), ``golds`` the gold labels of each
    rollout's own order, ``twins`` the comparison keys and ``orders`` 0 / 1."""
    n = len(preds)
    if not (len(golds) == len(twins) == len(orders) == n):
        raise ValueError(f"consistency_terms: {n} verdicts, {len(golds)} golds, {len(twins)} twin keys, "
                         f"{len(orders)} orders")
    right: dict[tuple[Any, int], list[bool]] = defaultdict(list)
    for pred, gold, twin, order in zip(preds, golds, twins, orders):
        right[(twin, int(order))].append(_right(pred, gold))
    out = []
    for pred, gold, twin, order in zip(preds, golds, twins, orders):
        other = right.get((twin, 1 - int(order)))
        if not other:
            out.append({"consistency": 0.0, "twin_missing": 1.0})
            continue
        share = sum(other) / len(other)
        out.append({"consistency": float(_right(pred, gold)) * share, "twin_missing": 0.0})
    return out


def group_keys(twins: Sequence[Any], orders: Sequence[Any], mode: str) -> list[str]:
    """The GRPO group of each rollout: its comparison and order (``step``), or its comparison alone (``union``)."""
    if mode not in ("step", "union"):
        raise ValueError(f"group_keys: mode must be 'step' or 'union', got {mode!r}")
    if mode == "union":
        return [str(t) for t in twins]
    return [f"{t}#{int(o)}" for t, o in zip(twins, orders)]


def position_stats(preds: Sequence[Any], golds: Sequence[Any], twins: Sequence[Any] | None = None,
                   orders: Sequence[Any] | None = None) -> dict[str, float]:
    """The position diagnostics of one step's rollouts (module docstring); keys with no rollout to measure are left
    out (no gold (b) in the step: no ``pos/acc_gold_b``)."""
    n = len(preds)
    if n == 0:
        return {}
    stats = {"pos/a_share": sum(p == "a" for p in preds) / n,
             "pos/gold_a_share": sum(g == "a" for g in golds) / n}
    for side in ("a", "b"):
        hits = [_right(p, g) for p, g in zip(preds, golds) if g == side]
        if hits:
            stats[f"pos/acc_gold_{side}"] = sum(hits) / len(hits)
    if twins is not None and orders is not None:
        by_order: dict[Any, dict[int, list[str]]] = defaultdict(lambda: {0: [], 1: []})
        for pred, twin, order in zip(preds, twins, orders):
            if pred in ("a", "b"):
                by_order[twin][int(order)].append(pred)
        same = pairs = 0
        for sides in by_order.values():
            first, second = sides[0], sides[1]
            pairs += len(first) * len(second)
            same += sum(first.count(v) * second.count(v) for v in ("a", "b"))
        if pairs:
            stats["pos/flip_rate"] = same / pairs
    return stats


def gold_balance(labels: Sequence[Any], *, where: str = "RL data", warn: bool = True) -> float:
    """The share of gold (a) among the (a)/(b) labels; prints one ``warning:`` line to stderr when it is more than
    :data:`BALANCE_TOLERANCE` away from 0.5 (a judge can then gain reward by favouring one position)."""
    sides = [label for label in labels if label in ("a", "b")]
    if not sides:
        return float("nan")
    share = sum(label == "a" for label in sides) / len(sides)
    if warn and abs(share - 0.5) > BALANCE_TOLERANCE + 1e-9:  # exactly 5 points off is within
        print(f"warning: {where}: gold is (a) in {100 * share:.1f} % of {len(sides)} comparisons (more than "
              f"{100 * BALANCE_TOLERANCE:.0f} points from 50 %); a judge can gain reward by favouring one position "
              "-- write the data with both orders (twins) or rebalance it", file=sys.stderr)
    return share


def needs_twins(weights: dict[str, Any], adapter: str) -> str:
    """"" when ``weights`` need no twins; else why a per-sample ``adapter`` cannot pay them (``w_con`` > 0: the
    consistency term needs both orders' rollouts, which one sample never sees)."""
    value = weights.get("w_con", 0.0)
    if isinstance(value, (int, float)) and value > 0:
        return (f"w_con={value:g} (the consistency term) needs both orders of each comparison in one step, which "
                f"{adapter} cannot see: train with twins (verl: configs/verl/grpo_consistent.yaml; TRL: --twins step "
                "or --twins union), or drop w_con")
    return ""
