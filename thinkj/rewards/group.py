"""Group-level rewards: presets that must see all completions of one prompt at once.

A group reward is ``fn(prompt, texts, ground_truths, **weights) -> list[dict]`` (or a coroutine returning
it), one dict per completion with the preset's fixed keys plus ``group_size`` and ``group_skipped``. It is
used by two adapters:

* TRL: ``TRLGroupReward("xml_judge")`` in ``GRPOTrainer(reward_funcs=[...])``. TRL hands the reward function
  every completion of the generation batch, each prompt repeated ``num_generations`` times; the adapter
  groups completions by identical prompt (``scope="group"``) or scores the whole call as one set
  (``scope="batch"``, the seed-000 reading of "batch accuracy").
* verl: ``thinkj.rewards.verl_group.GroupRewardManager``, a reward-loop manager that gathers the samples
  of one ``uid`` before scoring them (see that module for the overrides).

The diversity guard (seed 004): a group whose share of distinct completions is below ``min_unique_ratio``
carries no comparison signal, so every member gets the group's mean score (``group_skipped`` = 1). Under
GRPO's per-group normalisation equal rewards give zero advantage in both verl and TRL -- the group is skipped
without touching the trainer.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thinkj.registry import Registry
from thinkj.rewards import get_preset

GROUP_EXTRA_KEYS = ("group_size", "group_skipped")
GroupFn = Callable[..., Any]


@dataclass(frozen=True)
class GroupReward:
    name: str
    fn: GroupFn
    defaults: dict[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    description: str = ""
    min_unique_ratio: float = 0.0  # diversity guard; 0 switches it off

    def _weights(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = set(overrides) - set(self.defaults) - {"min_unique_ratio"}
        if unknown:
            raise TypeError(f"group reward {self.name!r} has no weight(s) {sorted(unknown)}; known: {sorted(self.defaults)}")
        return {**self.defaults, **overrides}

    async def ascore(self, prompt: Any, texts: list[str], ground_truths: list[Any], **overrides: Any) -> list[dict[str, Any]]:
        weights = self._weights(overrides)
        min_unique = float(weights.pop("min_unique_ratio", self.min_unique_ratio))
        texts = [t if isinstance(t, str) else "" for t in texts]
        if not texts:
            return []
        out = self.fn(prompt, texts, ground_truths, **weights)
        if inspect.isawaitable(out):
            out = await out
        results = [dict(r) for r in out]
        if len(results) != len(texts):
            raise RuntimeError(f"group reward {self.name!r} returned {len(results)} results for {len(texts)} completions")
        skipped = min_unique > 0 and len(set(texts)) / len(texts) < min_unique
        if skipped:
            mean = sum(r["score"] for r in results) / len(results)
            for r in results:
                r["score"] = mean
        for r in results:
            r["group_size"] = len(texts)
            r["group_skipped"] = float(skipped)
        return results

    def score(self, prompt: Any, texts: list[str], ground_truths: list[Any], **overrides: Any) -> list[dict[str, Any]]:
        return run_sync(self.ascore(prompt, texts, ground_truths, **overrides))


def run_sync(coro: Any) -> Any:
    """asyncio.run, also from inside a running event loop (then in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as err:  # handed back to the caller's thread
            box["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


GROUP_REWARDS: Registry[GroupReward] = Registry("group reward")


def register_group_reward(reward: GroupReward) -> GroupReward:
    return GROUP_REWARDS.add(reward.name, reward)


def get_group_reward(name: str) -> GroupReward:
    return GROUP_REWARDS.lookup(name)


def per_sample_group(preset_name: str) -> GroupFn:
    """A group function that scores each completion with a per-sample preset (for the diversity guard)."""
    def fn(prompt: Any, texts: list[str], ground_truths: list[Any], **weights: Any) -> list[dict[str, Any]]:
        preset = get_preset(preset_name)
        return [preset(t, gt, **weights) for t, gt in zip(texts, ground_truths)]

    fn.__name__ = f"{preset_name}_per_sample"
    return fn


def prompt_key(prompt: Any) -> str:
    """A stable key for grouping identical prompts (strings or chat message lists)."""
    try:
        return json.dumps(prompt, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(prompt)


def completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") or "" for m in completion if isinstance(m, dict))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return ""


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
        self.reward._weights(dict(weights))  # fail early on a typo
        self.scope = scope
        self.expected_group_size = expected_group_size
        self.weights = weights
        self.__name__ = f"{name}_group_reward"
        self.last_metrics: dict[str, float] = {}
        self._trainer: Any = None

    def bind_trainer(self, trainer: Any) -> None:
        self._trainer = trainer

    def _log_metrics(self) -> None:
        metrics = getattr(self._trainer, "_metrics", None)  # GRPOTrainer averages these into each log line
        if metrics is None:
            return
        mode = "train" if self._trainer.model.training else "eval"
        for key, value in self.last_metrics.items():
            if key != "score":
                metrics[mode][f"{self.__name__}/{key}"].append(value)

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
