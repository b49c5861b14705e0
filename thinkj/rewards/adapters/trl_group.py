"""Group-level rewards: presets that must see all completions of one prompt at once, and their TRL adapter.

A group reward (:class:`~thinkj.rewards.presets.GroupReward`, registered in ``thinkj.rewards.registry``) is
``fn(prompt, texts, ground_truths, **weights) -> list[dict]`` (or a coroutine returning it), one dict per completion
with the preset's fixed keys plus ``group_size`` and ``group_skipped``. It is used by two adapters:

* TRL: ``TRLGroupReward("xml_judge")`` in ``GRPOTrainer(reward_funcs=[...])``. TRL hands the reward function
  every completion of the generation batch, each prompt repeated ``num_generations`` times; the adapter
  groups completions by identical prompt (``scope="group"``) or scores the whole call as one set
  (``scope="batch"``, the seed-000 reading of "batch accuracy").
* verl: ``thinkj.rewards.adapters.verl_group.GroupRewardManager``, a reward-loop manager that gathers the samples
  of one ``uid`` before scoring them (see that module for the overrides).

The diversity guard (``min_unique_ratio``, seed 004) is described in ``thinkj.rewards.presets``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from thinkj.rewards.adapters.trl import completion_text, log_to_trainer
from thinkj.rewards.presets import GROUP_EXTRA_KEYS, GroupFn, GroupReward, per_sample_group, run_sync
from thinkj.rewards.registry import GROUP_REWARDS, get_group_reward, register_group_reward

__all__ = ["GROUP_EXTRA_KEYS", "GROUP_REWARDS", "GroupFn", "GroupReward", "TRLGroupReward", "completion_text",
           "get_group_reward", "per_sample_group", "prompt_key", "register_group_reward", "rows_ground_truth",
           "run_sync"]


def prompt_key(prompt: Any) -> str:
    """A stable key for grouping identical prompts (strings or chat message lists)."""
    try:
        return json.dumps(prompt, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(prompt)


def rows_ground_truth(n: int, columns: dict[str, Any]) -> list[Any]:
    """Ground truth per completion from TRL dataset columns: ``ground_truth``, else ``label`` (+``strength``)."""
    if columns.get("ground_truth") is not None:
        values = list(columns["ground_truth"])
    elif columns.get("label") is not None:
        strengths = columns.get("strength") or [None] * n
        values = [{"label": g, "strength": s} for g, s in zip(columns["label"], strengths)]
    else:
        raise ValueError("group reward needs a 'ground_truth' (or 'label') dataset column, one value per completion")
    if len(values) != n:
        raise ValueError(f"ground truth column has {len(values)} values for {n} completions")
    return values


class TRLGroupReward:
    """``reward_funcs`` entry for TRL's GRPOTrainer scoring completions group by group.

    ``last_metrics`` keeps the means of the numeric keys over the last call (for logging). With
    ``expected_group_size`` (= ``num_generations``) a group of another size raises: under several processes TRL
    splits the generation batch across them, and a group cut in two would be scored as two smaller groups.
    Keep ``per_device_train_batch_size * steps_per_generation`` a multiple of ``num_generations``.

    ``bind_trainer(trainer)`` (TRL's GRPOTrainer) also logs those means with the trainer's own metrics, as
    ``<name>/<key>`` (e.g. the judge presets' failure rate, flip rate and latency), at every logging step.
    """

    def __init__(self, name: str, scope: str = "group", expected_group_size: int | None = None, **weights: Any):
        if scope not in ("group", "batch"):
            raise ValueError(f"scope must be 'group' or 'batch', got {scope!r}")
        self.reward = get_group_reward(name)
        checked = self.reward.weights(weights)  # an unknown, NaN, negative or non-numeric weight fails here
        self.scope = scope
        self.expected_group_size = expected_group_size
        self.weights = {k: v for k, v in checked.items() if k in weights}
        self.__name__ = f"{name}_group_reward"
        self.last_metrics: dict[str, float] = {}
        self._trainer: Any = None

    def bind_trainer(self, trainer: Any) -> None:
        self._trainer = trainer

    def _log_metrics(self) -> None:
        log_to_trainer(self._trainer, {f"{self.__name__}/{k}": v for k, v in self.last_metrics.items() if k != "score"})

    def __call__(self, prompts: list | None = None, completions: list | None = None, **columns: Any) -> list[float]:
        completions = completions or []
        prompts = prompts if prompts is not None else [""] * len(completions)
        texts = [completion_text(c) for c in completions]
        truths = rows_ground_truth(len(texts), columns)
        groups: dict[str, list[int]] = {}
        for i, prompt in enumerate(prompts):
            groups.setdefault("batch" if self.scope == "batch" else prompt_key(prompt), []).append(i)
        if self.expected_group_size and self.scope == "group":
            sizes = sorted({len(idx) for idx in groups.values()})
            if sizes != [self.expected_group_size]:
                raise ValueError(f"{self.__name__}: got groups of size {sizes}, expected {self.expected_group_size} "
                                 "(num_generations); make the per-process generation batch a multiple of it")
        results: list[dict[str, Any]] = [{} for _ in texts]

        async def run_all() -> None:
            outs = await asyncio.gather(*(self.reward.ascore(prompts[idx[0]], [texts[i] for i in idx],
                                                             [truths[i] for i in idx], **self.weights)
                                          for idx in groups.values()))
            for idx, out in zip(groups.values(), outs):
                for i, r in zip(idx, out):
                    results[i] = r

        run_sync(run_all())
        numeric = [k for k, v in (results[0] if results else {}).items() if isinstance(v, (int, float))]
        self.last_metrics = {k: sum(float(r[k]) for r in results) / len(results) for k in numeric}
        self._log_metrics()
        return [float(r["score"]) for r in results]
