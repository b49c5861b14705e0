"""The demo's judging tasks behind one interface: the pair generator and the rules the scripted teacher knows.

* ``fruit`` (:mod:`thinkj.synthetic.fruit_task`): "Name a fruit." -- learnable by a 0.4 M-parameter random-init model.
* ``facts`` (:mod:`thinkj.synthetic.fact_task`): well-known facts with held-out entities -- for SmolLM2-135M-Instruct.
* ``constraints`` (:mod:`thinkj.synthetic.constraint_task`): verifiable instruction constraints (RewardBench 2 Precise IF
  shape), thousands of distinct held-out items that need reading, not recall; its rule checker is the oracle.

A task is a module that defines every function of ``TASK_INTERFACE``; registering a new one is one line in
``TASKS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from thinkj.errors import ThinkJError
from thinkj.records import PreferencePair
from thinkj.registry import Registry

# what a task module defines, each in terms of a PreferencePair
TASK_INTERFACE = ("split_pairs", "explain", "argue", "rule_verdict", "describe_response", "asks", "strength_against",
                  "split_capacity")


@dataclass(frozen=True)
class Task:
    name: str
    module: ModuleType

    def make_pairs(self, n: int, seed: int, split: str) -> list[PreferencePair]:
        """``n`` pairs of ``split`` ("train" or "test"), drawn with ``seed``; the test split has no comparison twice
        and refuses more than :meth:`capacity` (a ThinkJError with the numbers)."""
        return self.module.split_pairs(n, seed, split)

    def capacity(self, split: str) -> dict[str, int]:
        """{"questions": ..., "comparisons": ...}: the distinct questions and comparisons ``split`` can make."""
        return self.module.split_capacity(split)

    def explain(self, pair: PreferencePair) -> str:
        """The rule-based rationale a good judge writes (the scripted teacher summarises to it)."""
        return self.module.explain(pair)

    def argue(self, pair: PreferencePair, side: str) -> str:
        """A rationale that concludes for ``side``, right or wrong (the critic's wrong-side examples)."""
        return self.module.argue(pair, side)

    def rule_verdict(self, pair: PreferencePair) -> str:
        return self.module.rule_verdict(pair)

    def describe(self, response: str, pair: PreferencePair) -> str:
        """What ``response`` does with what the pair's question asks, e.g. "says Paris, which is correct"."""
        return self.module.describe_response(response, pair)

    def asks(self, pair: PreferencePair) -> str:
        return self.module.asks(pair)

    def strength_against(self, worse: str, pair: PreferencePair) -> int:
        return self.module.strength_against(worse, pair)


TASKS: Registry[str] = Registry("demo task", {"fruit": "thinkj.synthetic.fruit_task", "facts": "thinkj.synthetic.fact_task",
                                             "constraints": "thinkj.synthetic.constraint_task"})


def get_task(name: str) -> Task:
    import importlib

    path = TASKS.lookup(name)
    module = importlib.import_module(path)
    missing = [f for f in TASK_INTERFACE if not callable(getattr(module, f, None))]
    if missing:
        raise ThinkJError(f"demo task {name!r} ({path}) does not define {', '.join(missing)}; a task module defines "
                          f"{', '.join(TASK_INTERFACE)}")
    return Task(name, module)
