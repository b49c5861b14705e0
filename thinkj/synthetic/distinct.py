"""Held-out sets of distinct comparisons: draw without repeats, count what a split can make, refuse more.

A *comparison* is a question and its two responses, whichever side shows which (the key the RL canary's held-out set
uses). A task's held-out split draws its items from the same seeded stream as a plain draw and skips any comparison
already drawn (:func:`draw_distinct`), so a draw that had no repeat is unchanged item for item. :func:`capacity`
counts the distinct questions and comparisons a draw can make by walking every outcome of the task's own draw
function (:func:`every_outcome`), so the count cannot drift from the generator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from thinkj.errors import ThinkJError

T = TypeVar("T")
Key = tuple[str, frozenset[str]]


def comparison_key(question: str, first: str, second: str) -> Key:
    """The comparison's identity: the question and the unordered pair of responses."""
    return question, frozenset((first, second))


class _Script:
    """A stand-in for :class:`random.Random` whose picks follow a script (index 0 past its end), recording how many
    options each pick had, so :func:`every_outcome` can branch on every one of them."""

    def __init__(self, script: list[int]):
        self.script, self.picks, self.sizes = script, [], []

    def _pick(self, n: int) -> int:
        k = len(self.picks)
        index = self.script[k] if k < len(self.script) else 0
        self.picks.append(index)
        self.sizes.append(n)
        return index

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self._pick(len(seq))]

    def choices(self, population: Sequence[T], weights: Sequence[float] | None = None, k: int = 1) -> list[T]:
        if k != 1 or (weights is not None and min(weights) <= 0):
            raise ThinkJError("every_outcome walks single weighted picks with positive weights only")
        return [population[self._pick(len(population))]]

    def random(self) -> float:
        # the generators compare random() with 0.5 only: one value each side stands for every outcome
        return (0.25, 0.75)[self._pick(2)]


def every_outcome(draw: Callable[[Any], T]) -> Iterator[T]:
    """Each result ``draw(rng)`` can give, once per path of picks (depth first), for a draw that uses only
    ``choice``, single ``choices`` and ``random() < 0.5`` of its rng."""
    stack: list[list[int]] = [[]]
    while stack:
        script = stack.pop()
        rng = _Script(script)
        yield draw(rng)
        for k in range(len(script), len(rng.sizes)):
            stack.extend(rng.picks[:k] + [alt] for alt in range(1, rng.sizes[k]))


def capacity(draw: Callable[[Any], T], key: Callable[[T], Key]) -> dict[str, int]:
    """{"questions": distinct questions, "comparisons": distinct comparisons} over every outcome of ``draw``."""
    keys = {key(item) for item in every_outcome(draw)}
    return {"questions": len({question for question, _ in keys}), "comparisons": len(keys)}


def check_capacity(n: int, counts: dict[str, int], what: str) -> None:
    """Refuse ``n`` distinct comparisons where ``what`` (e.g. "the facts task's test split") makes fewer."""
    if n > counts["comparisons"]:
        raise ThinkJError(f"{what} can make {counts['comparisons']} distinct comparisons over {counts['questions']} "
                          f"questions; {n} were asked for. Ask for at most {counts['comparisons']}, or grow the "
                          f"held-out pool (more entities or families on the held-out side) rather than repeat items")


def draw_distinct(n: int, rng: Any, draw: Callable[[Any], T], key: Callable[[T], Key]) -> list[T]:
    """``n`` items of ``draw(rng)`` with no comparison twice: a repeat is skipped and the stream drawn on. The caller
    checks ``n`` against the split's capacity first (a smaller pool would never end)."""
    seen: set[Key] = set()
    out: list[T] = []
    while len(out) < n:
        item = draw(rng)
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out
