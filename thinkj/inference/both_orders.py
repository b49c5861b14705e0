"""Judge pairs in both response orders with any backend, in one batch.

Position bias is the main failure of LLM judges, so every comparison is judged as shown
(``original``) and with the responses exchanged (``swapped``). Gold and verdict are positions as
displayed in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thinkj.inference.base import InferenceBackend, SamplingParams
from thinkj.inference.context import PromptBudget
from thinkj.inference.failures import FailedCall
from thinkj.prompts import get_template
from thinkj.records import PreferencePair
from thinkj.verdict_parser import parse_verdict

ORDERS = ("original", "swapped")


def judge_both_orders(backend: InferenceBackend, pairs: list[PreferencePair], template: str,
                      params: SamplingParams, *, strict: bool = False,
                      fields: Callable[[PreferencePair], dict[str, Any]] | None = None,
                      budget: PromptBudget | None = None) -> list[dict[str, Any]]:
    """One record per (pair, order, sample): gold, raw output, parsed verdict and whether it is right.

    ``fields(pair)`` adds per-pair keys to its records (the evaluation adds subset, domain, scenario, ...).
    With a ``budget``, a pair whose prompt (in either order) plus ``params.max_new_tokens`` exceeds the model's
    context is not generated: its records say ``too_long`` (no output, no verdict). ``truncated`` marks an
    output whose ``<think>`` the budget cut off (opened, never closed). A call that failed after the backend's
    retries (:class:`~thinkj.inference.failures.FailedCall`) is not a verdict: its record says ``failed`` with the
    ``error`` (no output, no verdict, not correct); the caller counts them and decides whether the run stands.
    """
    tmpl = get_template(template)
    shown = [(pair, order, pair if order == "original" else pair.swapped()) for pair in pairs for order in ORDERS]
    prompts = [tmpl.render(view) for _, _, view in shown]
    fits = budget.fits(prompts, params.max_new_tokens) if budget is not None else [True] * len(prompts)
    too_long = {pair.id for (pair, _, _), ok in zip(shown, fits) if not ok}
    keep = [i for i, (pair, _, _) in enumerate(shown) if pair.id not in too_long]
    generated = backend.generate([prompts[i] for i in keep], params) if keep else []
    outputs: list[list[str] | None] = [None] * len(shown)
    for i, samples in zip(keep, generated):
        outputs[i] = samples
    records = []
    for (pair, order, view), samples in zip(shown, outputs):
        for k, text in enumerate(samples if samples is not None else [None] * params.n):
            failed = isinstance(text, FailedCall)
            verdict = parse_verdict(None if failed else text, tmpl.answer, strict=strict)
            records.append({
                "item_id": pair.id, "order": order, "sample": k, "gold": view.label,
                "verdict": verdict.choice if verdict.parsed else None, "strength": verdict.strength,
                "well_formed": verdict.well_formed, "correct": not failed and verdict.choice == view.label,
                "truncated": verdict.reason == "unclosed <think>", "too_long": samples is None, "failed": failed,
                **({"error": text.error} if failed else {}),
                "output": None if failed else text, "template": template, "model": backend.name,
                "sampling": params.to_dict(), **(fields(pair) if fields is not None else {}),
            })
    return records


def accuracy_summary(records: list[dict[str, Any]]) -> dict[str, float]:
    """Accuracy, parse rate, well-formed rate and position consistency (both orders pick the same response)."""
    n = max(len(records), 1)
    by_item: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        by_item.setdefault((r["item_id"], r["sample"]), {})[r["order"]] = r
    flip = {"a": "b", "b": "a", "tie": "tie"}
    both = [v for v in by_item.values() if len(v) == 2]
    consistent = sum(1 for v in both if v["original"]["verdict"] is not None
                     and flip.get(v["swapped"]["verdict"]) == v["original"]["verdict"])
    return {"n": len(records), "failed_calls": sum(bool(r.get("failed")) for r in records),
            "accuracy": sum(r["correct"] for r in records) / n,
            "parsed": sum(r["verdict"] is not None for r in records) / n,
            "well_formed": sum(bool(r["well_formed"]) for r in records) / n,
            "consistency": consistent / max(len(both), 1)}
