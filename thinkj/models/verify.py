"""Checks a converted model must pass before ``thinkj models fetch`` declares it ready.

Tokenizer: ``"Hello world"`` -> ids -> the same text, no unknown or special ids inside plain text, eos/pad as the
catalog says, and the chat template renders ChatML with the generation prompt. Model: a fixed greedy completion
(exact text) and the perplexity of a fixed sentence within a relative tolerance -- both were measured once on a
conversion that gave coherent answers, so a broken dequantisation or tokenizer shows up as a mismatch.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.models.catalog import ModelSpec

ROUND_TRIP_TEXT = "Hello world"


class VerificationError(ThinkJError):
    """The converted model does not behave like the model it was converted from."""


def check_tokenizer(tokenizer, spec: ModelSpec) -> dict[str, Any]:
    ids = tokenizer(ROUND_TRIP_TEXT, add_special_tokens=True)["input_ids"]
    text = tokenizer.decode(ids)
    if text != ROUND_TRIP_TEXT:
        raise VerificationError(f"tokenizer round trip: {ROUND_TRIP_TEXT!r} -> {ids} -> {text!r}")
    if set(ids) & set(tokenizer.all_special_ids):
        raise VerificationError(f"tokenizer: special ids inside plain text {ROUND_TRIP_TEXT!r}: {ids}")
    if tokenizer.eos_token != spec.eos_token or tokenizer.pad_token != spec.pad_token:
        raise VerificationError(f"tokenizer: eos {tokenizer.eos_token!r} / pad {tokenizer.pad_token!r}, "
                                f"expected {spec.eos_token!r} / {spec.pad_token!r}")
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
                                             add_generation_prompt=True)
    if not (rendered.startswith("<|im_start|>system\n") and rendered.endswith("<|im_start|>user\nHi<|im_end|>\n"
                                                                                "<|im_start|>assistant\n")):
        raise VerificationError(f"chat template renders {rendered!r}, not ChatML with a generation prompt")
    return {"round_trip_ids": ids, "chat_template": "chatml"}


def greedy_completion(model, tokenizer, prompt: str, new_tokens: int) -> str:
    import torch

    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=True)
    batch = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True).strip()


def perplexity(model, tokenizer, sentence: str) -> float:
    import torch

    ids = tokenizer(sentence, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        loss = model(input_ids=ids, labels=ids).loss
    return float(math.exp(loss.item()))


def verify_model(spec: ModelSpec, folder: Path) -> dict[str, Any]:
    """Run every check on ``folder``; raises :class:`VerificationError` on the first failure."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    checks = check_tokenizer(tokenizer, spec)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    completion = greedy_completion(model, tokenizer, spec.check_prompt, spec.check_new_tokens)
    if completion != spec.check_completion:
        raise VerificationError(f"greedy completion of {spec.check_prompt!r} is {completion!r}, "
                                f"expected {spec.check_completion!r}")
    ppl = perplexity(model, tokenizer, spec.check_sentence)
    if not math.isfinite(ppl) or abs(ppl - spec.check_perplexity) > spec.perplexity_tolerance * spec.check_perplexity:
        raise VerificationError(f"perplexity {ppl:.3f} on the check sentence, expected {spec.check_perplexity:.3f} "
                                f"± {spec.perplexity_tolerance:.0%}")
    return {**checks, "completion": completion, "perplexity": round(ppl, 4)}
