"""Rebuild a Hugging Face tokenizer from a GGUF file's own tokenizer metadata.

transformers 5.5.4 turns SmolLM2's GGUF into a broken tokenizer (spaces become ``<|endoftext|>``, eos becomes
``<|im_start|>``; see ../shared/ENVIRONMENT.md). The GGUF carries everything needed to build the right one:
``tokenizer.ggml.tokens`` (id order), ``.merges``, ``.token_type`` (3 = control/special), ``.pre`` (the
pre-tokenizer's name) and ``tokenizer.chat_template``. Only ``model = gpt2`` (byte-level BPE) is handled: that is
what SmolLM2 ships, and another tokenizer family needs its own rebuild.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError

CONTROL = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL


def read_tokenizer_fields(gguf_path: str | Path) -> dict[str, Any]:
    """The tokenizer.* metadata of a GGUF file as plain Python values."""
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf_path))
    return {key: field.contents() for key, field in reader.fields.items() if key.startswith("tokenizer.")}


def _pre_tokenizer(name: str):
    from tokenizers import Regex, pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if name in ("smollm", "starcoder"):
        # llama.cpp's SMOLLM/STARCODER pre-tokenizer: every digit on its own, then GPT-2's split.
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"), byte_level])
    if name in ("gpt-2", "default"):
        return byte_level
    raise ThinkJError(f"GGUF pre-tokenizer {name!r} is not supported (known: smollm, starcoder, gpt-2)")


def build_tokenizer(fields: dict[str, Any], eos_token: str | None = None, pad_token: str | None = None):
    """A ``PreTrainedTokenizerFast`` equal to the GGUF's tokenizer; eos/pad default to the GGUF's ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    if fields.get("tokenizer.ggml.model") != "gpt2":
        raise ThinkJError(f"GGUF tokenizer model {fields.get('tokenizer.ggml.model')!r} is not byte-level BPE (gpt2)")
    tokens: list[str] = list(fields["tokenizer.ggml.tokens"])
    types: list[int] = list(fields["tokenizer.ggml.token_type"])
    merges = [tuple(m.split(" ", 1)) for m in fields["tokenizer.ggml.merges"]]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ThinkJError("GGUF vocabulary has duplicate tokens")
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = _pre_tokenizer(str(fields.get("tokenizer.ggml.pre", "gpt-2")))
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    special = [tokens[i] for i, t in enumerate(types) if t == CONTROL]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in special])

    def name(key: str, override: str | None) -> str | None:
        if override is not None:
            return override
        idx = fields.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[int(idx)] if idx is not None else None

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=name("bos", None), eos_token=name("eos", eos_token),
        unk_token=name("unknown", None), pad_token=name("padding", pad_token),
        additional_special_tokens=[s for s in special if s not in {name("bos", None), name("eos", eos_token)}],
        clean_up_tokenization_spaces=False, model_max_length=8192)
    template = fields.get("tokenizer.chat_template")
    if template:
        wrapped.chat_template = str(template)
    return wrapped
