"""TRL adapters: per-sample reward callables for ``GRPOTrainer(reward_funcs=[...])``.

TRL calls ``fn(prompts=..., completions=..., **dataset_columns)`` and takes a list of floats. ``TRLReward`` reads
the Think-J ground truth from the columns ``label`` and (optionally) ``strength``::

    from thinkj.rewards.trl import TRLReward
    trainer = GRPOTrainer(model=..., reward_funcs=[TRLReward("thinkj_llama", w_str=0.2)], ...)

The last call's component averages are kept in ``last_metrics`` (accuracy, format, strength).
``TRLPresetReward`` runs any per-sample preset on a ``ground_truth`` column (the seed presets' rows). The
group-level adapter is ``thinkj.rewards.group.TRLGroupReward``.
"""

from __future__ import annotations

from typing import Any

from thinkj.errors import ThinkJError
from thinkj.rewards.registry import get_preset


def completion_text(completion: Any) -> str:
    """TRL passes plain strings, or message lists for conversational datasets."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") or "" for m in completion if isinstance(m, dict))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return ""


class TRLReward:
    def __init__(self, preset: str = "thinkj_qwen", **weights: Any):
        self.preset = get_preset(preset)
        self.weights = weights
        self.__name__ = f"{preset}_reward"  # TRL names the logged reward column after this
        self.last_metrics: dict[str, float] = {}

    def __call__(self, prompts: list | None = None, completions: list | None = None, label: list | None = None,
                 strength: list | None = None, **kwargs: Any) -> list[float]:
        completions = completions or []
        if label is None or len(label) != len(completions):
            raise ValueError("TRLReward needs a 'label' dataset column with one gold label per completion")
        strength = strength if strength is not None else [None] * len(completions)
        results = [self.preset(completion_text(c), {"label": g, "strength": s}, **self.weights)
                   for c, g, s in zip(completions, label, strength)]
        n = max(len(results), 1)
        self.last_metrics = {k: sum(r[k] for r in results) / n for k in ("acc", "format", "strength")}
        return [r["score"] for r in results]


class TRLPresetReward:
    """A per-sample preset on a ``ground_truth`` column, as a TRL reward function."""

    def __init__(self, preset: str, **weights: Any):
        self.preset, self.weights = get_preset(preset), weights
        unknown = set(weights) - set(self.preset.defaults)
        if unknown:
            raise TypeError(f"reward preset {preset!r} has no weight(s) {sorted(unknown)}; known: {sorted(self.preset.defaults)}")
        self.__name__ = f"{preset}_reward"

    def __call__(self, prompts: list | None = None, completions: list | None = None, ground_truth: list | None = None,
                 **kwargs: Any) -> list[float]:
        completions = completions or []
        if ground_truth is None or len(ground_truth) != len(completions):
            raise ThinkJError("per-sample preset needs a 'ground_truth' dataset column, one value per completion")
        return [float(self.preset(completion_text(c), g, **self.weights)["score"]) for c, g in zip(completions, ground_truth)]
