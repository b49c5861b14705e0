"""The inference-backend interface: a batch of conversations in, ``n`` completions per conversation out.

Backends (HF transformers here; vLLM and OpenAI-compatible HTTP alongside) all take chat messages
and :class:`SamplingParams` and return ``list[list[str | FailedCall]]`` aligned with the input: the completion
text, or a :class:`~thinkj.inference.failures.FailedCall` for a call that failed after the backend's retries
(only a server backend fails single calls). Callers batch everything they have in one call; a backend chunks
internally and reports progress.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from thinkj.inference.failures import FailedCall
from thinkj.prompts import Messages  # defined once, with the templates; importers of this module use it too

Output = str | FailedCall  # one sample: its text, or the recorded failure of its call


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    max_new_tokens: int = 512
    n: int = 1
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@runtime_checkable
class InferenceBackend(Protocol):
    name: str  # model identifier recorded in outputs

    def generate(self, conversations: list[Messages], params: SamplingParams) -> list[list[Output]]:
        """Return ``params.n`` completions (or failed calls) for each conversation, in input order."""
        ...
