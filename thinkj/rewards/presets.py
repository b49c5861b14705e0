"""What a reward is: the per-sample :class:`Preset` and the group-level :class:`GroupReward`.

A preset is a pure function ``fn(text, ground_truth, **weights) -> dict`` plus its default weights. Changing a
weight is an override (``w_str=0.0``), never a new function. Every preset returns the same keys for every input,
so a verl batch can be stacked.

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

RewardFn = Callable[..., dict[str, Any]]
GroupFn = Callable[..., Any]
GROUP_EXTRA_KEYS = ("group_size", "group_skipped")


@dataclass(frozen=True)
class Preset:
    name: str
    fn: RewardFn
    defaults: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    template: str = "judge_strength_v2"  # the prompt whose answer format this reward expects

    def __call__(self, text: str, ground_truth: Any, **overrides: Any) -> dict[str, Any]:
        unknown = set(overrides) - set(self.defaults)
        if unknown:
            raise TypeError(f"reward preset {self.name!r} has no weight(s) {sorted(unknown)}; "
                            f"known: {sorted(self.defaults)}")
        return self.fn(text, ground_truth, **{**self.defaults, **overrides})


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


def per_sample_group(preset: Preset) -> GroupFn:
    """A group function that scores each completion with a per-sample preset (for the diversity guard)."""
    def fn(prompt: Any, texts: list[str], ground_truths: list[Any], **weights: Any) -> list[dict[str, Any]]:
        return [preset(t, gt, **weights) for t, gt in zip(texts, ground_truths)]

    fn.__name__ = f"{preset.name}_per_sample"
    return fn
