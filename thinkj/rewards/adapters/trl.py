"""TRL adapters: per-sample reward callables for ``GRPOTrainer(reward_funcs=[...])``.

TRL calls ``fn(prompts=..., completions=..., **dataset_columns)`` and takes a list of floats. ``TRLReward`` reads
the Think-J ground truth from the columns ``label`` and (optionally) ``strength``::

    from thinkj.rewards.adapters.trl import TRLReward
    trainer = GRPOTrainer(model=..., reward_funcs=[TRLReward("thinkj_llama", w_str=0.2)], ...)

The last call's component averages are kept in ``last_metrics`` (accuracy, format, strength, and gold_error: the
share of rows whose ground truth was bad, ``thinkj.rewards.gold``; a bad row never raises). Bound to a trainer
(``bind_trainer``), every per-sample adapter adds ``gold_error`` to the step's logged metrics, as verl logs the
reward's ``gold_error`` key: bad gold is counted in every step, whichever engine trains.
``TRLPresetReward`` runs any per-sample preset on a ``ground_truth`` column (the seed presets' rows). The
group-level adapter is ``thinkj.rewards.adapters.trl_group.TRLGroupReward``. Both check their weights when built
(``thinkj.rewards.weights``): an unknown name or a NaN, negative or non-numeric value fails before training.
"""

from __future__ import annotations

from typing import Any

from thinkj.errors import ThinkJError
from thinkj.rewards.designs.twins import needs_twins
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


def log_to_trainer(trainer: Any, metrics: dict[str, float]) -> None:
    """Append ``metrics`` to a GRPOTrainer's own metric buffers, which it averages into each log line (train or
    eval, by the model's mode); a reward not bound to a trainer logs nothing."""
    buffers = getattr(trainer, "_metrics", None)
    if buffers is None:
        return
    mode = "train" if trainer.model.training else "eval"
    for key, value in metrics.items():
        buffers[mode][key].append(value)


class _StepMetrics:
    """What the per-sample adapters share: the last call's means (``last_metrics``) and, bound to a GRPOTrainer,
    the share of bad gold rows in the step's logged metrics (``gold_error``)."""

    last_metrics: dict[str, float]
    _trainer: Any = None

    def bind_trainer(self, trainer: Any) -> None:
        self._trainer = trainer

    def _keep(self, results: list[dict[str, Any]], keys: tuple[str, ...]) -> None:
        n = max(len(results), 1)
        present = [k for k in keys if not results or k in results[0]]
        self.last_metrics = {k: sum(float(r[k]) for r in results) / n for k in present}
        self._log_metrics()

    def _log_metrics(self) -> None:
        log_to_trainer(self._trainer, {k: v for k, v in self.last_metrics.items() if k == "gold_error"})


class TRLReward(_StepMetrics):
    pays_consistency = False  # w_con > 0 needs both orders' rollouts: only the twin reward (trl_grpo) pays it

    def __init__(self, preset: str = "thinkj_qwen", **weights: Any):
        self.preset = get_preset(preset)
        self.weights = {k: v for k, v in self.preset.weights(weights).items() if k in weights}  # checked here
        problem = "" if self.pays_consistency else needs_twins(self.weights, "a per-sample TRL reward")
        if problem:
            raise ThinkJError(problem)
        self._score = self.preset.bind(self.weights)
        self.__name__ = f"{preset}_reward"  # TRL names the logged reward column after this
        self.last_metrics: dict[str, float] = {}

    def __call__(self, prompts: list | None = None, completions: list | None = None, label: list | None = None,
                 strength: list | None = None, **kwargs: Any) -> list[float]:
        completions = completions or []
        if label is None or len(label) != len(completions):
            raise ValueError("TRLReward needs a 'label' dataset column with one gold label per completion")
        strength = strength if strength is not None else [None] * len(completions)
        if len(strength) != len(completions):  # zip would drop the rows past the shorter column
            raise ValueError(f"TRLReward: the 'strength' column has {len(strength)} values for {len(completions)} "
                             "completions")
        results = [self._score(completion_text(c), {"label": g, "strength": s})
                   for c, g, s in zip(completions, label, strength)]
        self._keep(results, ("acc", "format", "strength", "gold_error"))
        return [r["score"] for r in results]


class TRLPresetReward(_StepMetrics):
    """A per-sample preset on a ``ground_truth`` column, as a TRL reward function."""

    def __init__(self, preset: str, **weights: Any):
        self.preset = get_preset(preset)
        self.weights = {k: v for k, v in self.preset.weights(weights).items() if k in weights}  # checked here
        self._score = self.preset.bind(self.weights)
        self.__name__ = f"{preset}_reward"
        self.last_metrics: dict[str, float] = {}

    def __call__(self, prompts: list | None = None, completions: list | None = None, ground_truth: list | None = None,
                 **kwargs: Any) -> list[float]:
        completions = completions or []
        if ground_truth is None or len(ground_truth) != len(completions):
            raise ThinkJError("per-sample preset needs a 'ground_truth' dataset column, one value per completion")
        results = [self._score(completion_text(c), g) for c, g in zip(completions, ground_truth)]
        self._keep(results, ("gold_error",))
        return [float(r["score"]) for r in results]
