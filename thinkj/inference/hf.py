"""Hugging Face transformers backend: batched, left-padded ``generate`` on CPU or one GPU.

Judge prompts share a long instruction (~200 of ~265 tokens for SmolLM2 and ``judge_strength_v2``). With
``prefix_cache`` (default) each batch runs that common token prefix through the model once and reuses its KV cache
for every row; rows are laid out as ``prefix + padding + own suffix`` with the padding masked, so positions and
attention match a left-padded batch. Greedy outputs can differ from the uncached path only by float rounding.
"""

from __future__ import annotations

from pathlib import Path

from thinkj.checks import check_range
from thinkj.errors import ThinkJError
from thinkj.inference.base import Messages, SamplingParams
from thinkj.inference.precision import DTYPES, precision_key
from thinkj.progress import progress_bar

MIN_SHARED_PREFIX = 16  # tokens; below this, one extra forward pass costs more than it saves


def shared_prefix_length(rows: list[list[int]]) -> int:
    """Tokens every row starts with, leaving at least one token of each row to feed ``generate``."""
    if not rows:
        return 0
    first, limit = rows[0], min(len(r) for r in rows) - 1
    n = 0
    while n < limit and all(r[n] == first[n] for r in rows):
        n += 1
    return n


def check_torch_device(owner: str, device: str | None) -> None:
    """``device`` (None: CUDA when there is a GPU, else the CPU) must be one torch knows and this machine has."""
    if device is None:
        return
    import torch

    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError, TypeError):
        raise ThinkJError(f"{owner}: device {device!r} is not a torch device (cpu, cuda, cuda:N, mps)") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ThinkJError(f"{owner}: device {device!r}, but torch sees no CUDA GPU here")


class HFBackend:
    # sampled answers draw from the whole distribution (top_k 0); a cached sampled answer carries this in its key, so
    # the top-50 draws made before (transformers 5's default for an unset top_k) are never served as these
    sampler = "full"

    def __init__(self, model_path: str | Path, *, batch_size: int = 16, device: str | None = None,
                 dtype: str = "auto", prefix_cache: bool = True):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.check_settings(batch_size=batch_size, device=device, dtype=dtype)
        self.name = str(model_path)
        self.batch_size = batch_size
        self.prefix_cache = prefix_cache
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.tokenizer.padding_side = "left"  # decoder-only batching: prompts must end at the same column
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype).to(self.device).eval()
        # Part of the generation cache key (CachedBackend): the dtype that loaded ("auto" is the checkpoint's).
        self.precision = precision_key(self.model.dtype)

    @staticmethod
    def check_settings(*, batch_size: int = 16, device: str | None = None, dtype: str = "auto", **_: object) -> None:
        """The settings this backend owns, checked before a model loads (the constructor and ``--backend-arg`` both
        call this): one line naming the setting, not a torch error from deep in a load or a batch loop."""
        check_range("hf backend: batch_size", batch_size, low=1)
        if dtype not in DTYPES:
            raise ThinkJError(f"hf backend: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        check_torch_device("hf backend", device)

    def _batch_inputs(self, texts: list[str]) -> dict:
        """``generate`` kwargs for one batch: left-padded ids, or a shared prefix's KV cache plus padded suffixes."""
        import torch

        rows = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts] if self.prefix_cache else []
        k = shared_prefix_length(rows)
        if k < MIN_SHARED_PREFIX:  # also the uncached path (no rows)
            return dict(self.tokenizer(texts, return_tensors="pt", padding=True,
                                       add_special_tokens=False).to(self.device))
        width = max(len(r) for r in rows) - k
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([r[:k] + [pad] * (width - len(r) + k) + r[k:] for r in rows], device=self.device)
        mask = torch.tensor([[1] * k + [0] * (width - len(r) + k) + [1] * (len(r) - k) for r in rows],
                            device=self.device)
        with torch.no_grad():
            cache = self.model(input_ids=ids[:1, :k], use_cache=True).past_key_values
        cache.batch_repeat_interleave(len(rows))
        return {"input_ids": ids, "attention_mask": mask, "past_key_values": cache}

    def generate(self, conversations: list[Messages], params: SamplingParams) -> list[list[str]]:
        import torch

        prompts = [self.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True)
                   for c in conversations]
        # Long prompts first keeps padding low inside each batch; results go back to input order.
        order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
        results: list[list[str]] = [[] for _ in prompts]
        sample = params.temperature > 0
        # With a prefix cache the rows are repeated here (generate does not expand a cache for
        # num_return_sequences); each batch holds whole prompts, batch_size rows in all.
        per_batch = max(1, self.batch_size // params.n) if self.prefix_cache else self.batch_size
        with progress_bar(f"generate ({Path(self.name).name})", total=len(prompts)) as advance:
            for start in range(0, len(order), per_batch):
                idx = order[start:start + per_batch]
                texts = [prompts[i] for i in idx]
                repeat = params.n if self.prefix_cache else 1
                batch = self._batch_inputs([t for t in texts for _ in range(repeat)])
                torch.manual_seed(params.seed + start)
                # use_cache: checkpoints saved by trainers (LlamaFactory) carry use_cache=false, which makes every
                # new token recompute the whole prefix -- 10x slower generation.
                kwargs = dict(max_new_tokens=params.max_new_tokens, do_sample=sample, use_cache=True,
                              num_return_sequences=params.n // repeat, pad_token_id=self.tokenizer.pad_token_id)
                if sample:
                    # top_k 0: the whole distribution, as the vLLM and HTTP backends sample (transformers 5
                    # would fill an unset top_k with 50)
                    kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
                else:
                    kwargs.update(temperature=None, top_p=None, top_k=None)
                with torch.no_grad():
                    out = self.model.generate(**batch, **kwargs)
                texts = self.tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
                for j, i in enumerate(idx):
                    results[i] = texts[j * params.n:(j + 1) * params.n]
                advance(len(idx))
        return results
