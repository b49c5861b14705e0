"""What one evaluation run is: benchmark, model, backend, prompt, data slice, sampling and scoring options."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkj.inference.base import SamplingParams
from thinkj.locks import exclusive, output_lock
from thinkj.models.profiles import generation_budget

SCALAR_BACKEND = "classifier"  # a Bradley-Terry classifier scores each response; no generation


@dataclass
class EvalConfig:
    benchmark: str
    model: str
    backend: str = "hf"
    template: str = "judge_strength_v2"
    data: str | None = None  # local path, hub name or URL; None = the benchmark's default source
    split: str | None = None
    limit: int | None = None  # items (RM-Bench: prompts, each 9 comparisons), spread over groups
    out_dir: Path = Path("runs/eval")
    # The budget defaults to the model profile's max_new_tokens (configs/models/*.yaml: 4,096).
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0,
                                                                          max_new_tokens=generation_budget()))
    tags: dict[str, str] = field(default_factory=dict)
    protocol: str = "single"
    unparsed_half: bool = False
    chunk_pairs: int = 256  # pairs per generate call: each finished chunk is cached before the next starts
    backend_kwargs: dict[str, Any] = field(default_factory=dict)
    context_length: int | None = None  # prompt + budget must fit; default: max_model_len or the model's config
    tokenizer: str | None = None  # to count prompt tokens when the model is a name only a server knows
    max_failure_rate: float = 0.0  # share of failed generation calls a run may have and still exit 0 (never complete)
    # worker processes, each on its own tensor_parallel_size GPUs over a shard (thinkj.inference.data_parallel)
    data_parallel: int = 1

    def writing(self) -> AbstractContextManager[bool]:
        """Held while a run judges this benchmark into ``out_dir`` (``<out_dir>/.locks/<benchmark>.lock``, taken once
        the inputs are read, so that bad input leaves no folder): a second run of the same benchmark into the same
        folder waits, then finds every answer in the cache, rather than loading a second judge onto the same GPUs."""
        return exclusive(output_lock(Path(self.out_dir) / self.benchmark),  # <out_dir>/.locks/<benchmark>.lock
                         f"eval {self.benchmark} into {self.out_dir}", lambda line: print(line, file=sys.stderr, flush=True))
