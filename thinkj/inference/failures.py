"""A generation call that failed, and the one rule every generating stage applies to failed calls.

A backend's ``generate`` returns, for each (conversation, sample), the completion text or a :class:`FailedCall`:
a call that still failed after the backend's retries (an HTTP server that is down, answers 5xx, 4xx or a body that
is not a chat completion, or times out). A failed call is never text: it is never cached, never parsed as a
verdict or scored, and a rerun asks for it again. Local engines (HF, vLLM) do not fail single calls; an engine
error stops the stage.

The rule (the HTTP judge reward's guard, :mod:`thinkj.rewards.designs.judge_http`, has the same shape): a stage counts
its calls and its failed calls (:class:`CallTally`) and is incomplete when the share of failed calls is above
``max_failure_rate`` (default 0: any failed call) or when every call failed. An incomplete stage writes what it
could, says how many calls failed, and raises :class:`~thinkj.errors.StageIncomplete` (exit status 1); what
failed was not cached, so rerunning the same command asks only for the failed calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from thinkj.errors import StageIncomplete, ThinkJError

FAILURE_RATE_OPTION = "--max-failure-rate"


@dataclass(frozen=True)
class FailedCall:
    """A generation that failed after the backend's retries: a recorded failure, never an answer."""

    error: str
    attempts: int = 0


def is_failed(output: Any) -> bool:
    return isinstance(output, FailedCall)


def check_failure_rate(value: Any, option: str = FAILURE_RATE_OPTION) -> float:
    """``value`` as a share in [0, 1], or a one-line error naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ThinkJError(f"{option} must be a share of calls between 0 and 1, got {value!r}")
    return float(value)


@dataclass
class CallTally:
    """Calls a stage asked for (cached answers included) and how many of them failed."""

    calls: int = 0
    failed: int = 0
    first_error: str = ""

    def record(self, failed: bool, error: Any = "") -> None:
        """Count one call (failed or not; the first failure's error is kept, on one line)."""
        self.calls += 1
        if failed:
            self.failed += 1
            self.first_error = self.first_error or " ".join(str(error or "").split())[:200]

    def add(self, outputs: Iterable[Iterable[Any]]) -> None:
        """Count a ``generate`` result (a list of samples per conversation)."""
        for samples in outputs:
            for output in samples:
                failed = isinstance(output, FailedCall)
                self.record(failed, output.error if failed else "")

    def add_tally(self, other: CallTally) -> None:
        self.calls += other.calls
        self.failed += other.failed
        self.first_error = self.first_error or other.first_error

    @property
    def rate(self) -> float:
        return self.failed / self.calls if self.calls else 0.0

    def exceeds(self, max_failure_rate: float = 0.0) -> bool:
        """The rule: any failed call when every call failed, else a failure share above ``max_failure_rate``."""
        return self.failed > 0 and (self.failed == self.calls or self.rate > max_failure_rate)

    def summary(self) -> dict[str, Any]:
        return {"calls": self.calls, "failed_calls": self.failed, "first_error": self.first_error or None}

    def describe(self) -> str:
        return (f"{self.failed} of {self.calls} generation calls failed after retries "
                f"(first error: {self.first_error or 'unknown'})")

    def check(self, where: str, max_failure_rate: float = 0.0, written: str = "") -> None:
        """Raise :class:`StageIncomplete` when the failed calls break the rule; ``written`` says what was kept."""
        if not self.exceeds(max_failure_rate):
            return
        why = ("every call failed" if self.failed == self.calls
               else f"{self.rate:.1%} of calls > {FAILURE_RATE_OPTION} {max_failure_rate:g}")
        raise StageIncomplete(f"{where}: {self.describe()}; {why}. {written + ' ' if written else ''}Failed calls are "
                              "not cached: rerun the same command once the server answers and only they are asked again")
