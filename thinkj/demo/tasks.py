"""The demo's judging tasks behind one interface: the pair generator and the rules the scripted teacher knows.

* ``fruit`` (:mod:`thinkj.demo.tiny_task`): "Name a fruit." -- learnable by a 0.4 M-parameter random-init model.
* ``facts`` (:mod:`thinkj.demo.fact_task`): well-known facts with held-out entities -- for SmolLM2-135M-Instruct.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thinkj.records import PreferencePair
from thinkj.registry import Registry


@dataclass(frozen=True)
class Task:
    name: str
    module: Any

    def make_pairs(self, n: int, seed: int, split: str) -> list[PreferencePair]:
        if self.name == "fruit":  # the tiny task has no entity split: the test seed is offset instead
            return self.module.make_pairs(n, seed=seed + (10_000 if split == "test" else 0), id_prefix=split)
        return self.module.make_pairs(n, seed=seed, split=split)

    def explain(self, pair: PreferencePair) -> str:
        return self.module.explain(pair)

    def argue(self, pair: PreferencePair, side: str) -> str:
        """A rationale that concludes for ``side``; the fruit task's rationale names no side, so it serves both."""
        if self.name == "fruit":
            return self.module.explain(pair)
        return self.module.argue(pair, side)

    def rule_verdict(self, pair: PreferencePair) -> str:
        return self.module.rule_verdict(pair)

    def describe(self, response: str, pair: PreferencePair) -> str:
        if self.name == "fruit":
            return self.module.describe(response, self.module.asked_category(pair.instruction))
        fact = self.module.fact_of(pair.instruction)
        return self.module.describe(response, fact) if fact else "answers something"

    def asks(self, pair: PreferencePair) -> str:
        if self.name == "fruit":
            return f"So they want {self.module.asked_category(pair.instruction) or 'something specific'}."
        fact = self.module.fact_of(pair.instruction)
        return f"So they want one fact: {fact.value}, if I remember right." if fact else "So they want one fact."

    def strength_against(self, worse: str, pair: PreferencePair) -> int:
        if self.name == "fruit":
            kind = self.describe(worse, pair)
            return 3 if kind == "refuses to answer" else 1 if kind == "hedges between two answers" else 2
        return self.module.strength_against(worse, pair)


TASKS: Registry[str] = Registry("demo task", {"fruit": "thinkj.demo.tiny_task", "facts": "thinkj.demo.fact_task"})


def get_task(name: str) -> Task:
    import importlib

    return Task(name, importlib.import_module(TASKS.lookup(name)))
