"""What a reward is: the per-sample :class:`Preset` and the group-level :class:`GroupReward`.

A preset is a pure function ``fn(text, ground_truth, **weights) -> dict`` plus its default weights. Changing a
weight is an override (``w_str=0.0``), never a new function; every override is checked by
``thinkj.rewards.weights.check_weights`` (unknown names, non-finite, negative or non-numeric values fail with one
line naming the reward, the weight and the known names). Every preset returns the same keys for every input,
so a verl batch can be stacked, and never raises on a ground truth: a bad one is a data error the reward records
(``gold_error`` = 1, see ``thinkj.rewards.gold``); ``gold_problem(gt)`` says what is wrong with one ("" when
nothing is).

A group reward is ``fn(prompt, texts, ground_truths, **weights) -> list[dict]`` (or a coroutine returning it), one
dict per completion with the reward's fixed keys plus ``group_size`` and ``group_skipped``. The diversity guard
(seed 004): a group whose share of distinct completions is below ``min_unique_ratio`` carries no comparison signal,
so every member gets the group's mean score (``group_skipped`` = 1). Under GRPO's per-group normalisation equal
rewards give zero advantage in both verl and TRL -- the group is skipped without touching the trainer.

This module imports nothing from ``thinkj.rewards``: reward modules build their presets from it, and
``thinkj.rewards.registry`` registers them by name.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thinkj.rewards.weights import RewardWeightError, check_weights

RewardFn = Callable[..., dict[str, Any]]
GroupFn = Callable[..., Any]
GROUP_EXTRA_KEYS = ("group_size", "group_skipped")
GoldCheck = Callable[[Any], str]


def _no_gold(gt: Any) -> str:
    return ""


@dataclass(frozen=True)
class Preset:
    name: str
    fn: RewardFn
    defaults: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    template: str = "judge_strength_v2"  # the prompt whose answer format this reward expects
    kinds: dict[str, str] = field(default_factory=dict)  # kind of a setting whose default does not show it
    choices: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    gold_problem: GoldCheck = _no_gold  # what is wrong with a ground truth ("" when nothing is)

    def weights(self, overrides: dict[str, Any] | None = None, *, where: str = "",
                also_known: tuple[str, ...] = ()) -> dict[str, Any]:
        """The defaults with ``overrides`` checked and applied; :class:`RewardWeightError` on a bad one."""
        checked = check_weights(f"reward preset {self.name!r}", self.defaults, overrides or {}, kinds=self.kinds,
                                choices=self.choices, where=where, also_known=also_known)
        return {**self.defaults, **checked}

    def bind(self, overrides: dict[str, Any] | None = None, *, where: str = "") -> RewardFn:
        """``fn(text, ground_truth)`` with the overrides checked once, for adapters that score many samples."""
        weights = self.weights(overrides, where=where)

        def score(text: str, ground_truth: Any) -> dict[str, Any]:
            return self.fn(text, ground_truth, **weights)

        return score

    def __call__(self, text: str, ground_truth: Any, **overrides: Any) -> dict[str, Any]:
        return self.fn(text, ground_truth, **self.weights(overrides))


@dataclass(frozen=True)
class GroupReward:
    name: str
    fn: GroupFn
    defaults: dict[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    description: str = ""
    min_unique_ratio: float = 0.0  # diversity guard; 0 switches it off
    kinds: dict[str, str] = field(default_factory=dict)
    choices: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    gold_problem: GoldCheck = _no_gold

    def weights(self, overrides: dict[str, Any] | None = None, *, where: str = "",
                also_known: tuple[str, ...] = ()) -> dict[str, Any]:
        """The defaults (and ``min_unique_ratio``) with ``overrides`` checked and applied."""
        defaults = {**self.defaults, "min_unique_ratio": self.min_unique_ratio}
        checked = check_weights(f"group reward {self.name!r}", defaults, overrides or {}, kinds=self.kinds,
                                choices=self.choices, where=where, also_known=also_known)
        ratio = checked.get("min_unique_ratio", self.min_unique_ratio)
        if ratio > 1:  # above 1 every group would be skipped: no signal at all
            raise RewardWeightError(f"{where or 'weight '}min_unique_ratio must be <= 1, got {ratio} "
                                    f"(group reward {self.name!r})", weight="min_unique_ratio", detail="must be <= 1")
        return {**defaults, **checked}

    async def ascore(self, prompt: Any, texts: list[str], ground_truths: list[Any], **overrides: Any) -> list[dict[str, Any]]:
        weights = self.weights(overrides)
        min_unique = float(weights.pop("min_unique_ratio"))
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


def per_sample_group(preset: Preset) -> GroupFn:
    """A group function that scores each completion with a per-sample preset (for the diversity guard)."""
    def fn(prompt: Any, texts: list[str], ground_truths: list[Any], **weights: Any) -> list[dict[str, Any]]:
        return [preset(t, gt, **weights) for t, gt in zip(texts, ground_truths)]

    fn.__name__ = f"{preset.name}_per_sample"
    return fn
