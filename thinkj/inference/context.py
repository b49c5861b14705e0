"""Which prompts fit the model's context: count prompt tokens before generating, never truncate.

The rule, the same for every backend (HF, vLLM, an OpenAI-compatible server) and for the difficulty filter:
a prompt fits when its tokens (chat template applied, generation prompt added) plus the generation budget
(``max_new_tokens``) are at most the model's context length. A prompt that does not fit is never sent (vLLM
would reject the whole batch, HF would run past its position embeddings, a server would answer 400); the
caller records it as ``too_long`` and counts it, so the result says it is incomplete.

The context length is, in order: the one given (``--backend-arg max_model_len=...``, vLLM's own name for it),
else the model config's ``max_position_embeddings`` (``max_seq_len`` / ``n_positions`` for other families).
The tokenizer is the model's own, or ``tokenizer`` when the model is a name only a server knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.inference.base import Messages

_CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "n_positions", "seq_length")


def context_length_of(config: Any) -> int | None:
    """The context length a Hugging Face config declares, or None."""
    for key in _CONTEXT_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    text = getattr(config, "text_config", None)  # multimodal configs nest the language model's
    return context_length_of(text) if text is not None else None


class PromptBudget:
    """Counts prompt tokens with a tokenizer and its chat template; ``fits`` says which prompts can be generated."""

    def __init__(self, tokenizer: Any, context_length: int, *, chat_template: str | None = None):
        if context_length <= 0:
            raise ThinkJError(f"context length must be positive, got {context_length}")
        self.tokenizer, self.context_length, self.chat_template = tokenizer, int(context_length), chat_template

    @classmethod
    def for_model(cls, model: str, *, context_length: int | None = None, tokenizer: str | None = None,
                  chat_template: str | None = None, local_only: bool = False) -> PromptBudget:
        from transformers import AutoConfig, AutoTokenizer

        source = tokenizer or model
        tok = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
        if context_length is None:
            context_length = context_length_of(AutoConfig.from_pretrained(source, local_files_only=local_only))
        if context_length is None:
            raise ThinkJError(f"{source}: its config declares no context length; pass --backend-arg max_model_len=N")
        return cls(tok, context_length, chat_template=chat_template)

    def prompt_tokens(self, conversation: Messages) -> int:
        ids = self.tokenizer.apply_chat_template(list(conversation), tokenize=True, add_generation_prompt=True,
                                                 chat_template=self.chat_template)
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # a BatchEncoding in some transformers versions
            ids = ids["input_ids"]
        return len(ids)

    def fits(self, conversations: Sequence[Messages], max_new_tokens: int) -> list[bool]:
        return [self.prompt_tokens(c) + max_new_tokens <= self.context_length for c in conversations]


def budget_for_backend(backend: str, model: str, kwargs: dict[str, Any], *, context_length: int | None = None,
                       tokenizer: str | None = None) -> PromptBudget | None:
    """The budget for a named backend: context length as given, else the backend's ``max_model_len`` argument,
    else the model config's. None for a server model without a local tokenizer (then the server's own check
    applies and its refusals are recorded as failed calls); a ``tokenizer`` named but not loadable is an error.
    A served model's name is looked up on disk only (a folder, or a hub id in the local cache): the name a server
    answers to is often no hub id, and asking the hub for it cost an offline node half a minute of retries."""
    from thinkj.inference import LOCAL_ENGINES

    if backend in LOCAL_ENGINES:  # a catalog name (smollm2) is its converted folder, as in make_backend
        from thinkj.models import resolve_model

        model = resolve_model(model)
    try:
        return PromptBudget.for_model(model, context_length=context_length or kwargs.get("max_model_len"),
                                      tokenizer=tokenizer, chat_template=kwargs.get("chat_template"),
                                      local_only=backend not in LOCAL_ENGINES and not tokenizer)
    except (OSError, ValueError) as err:
        if tokenizer:  # asked for by name: never dropped in silence
            raise ThinkJError(f"--tokenizer {tokenizer}: cannot read its tokenizer/config to count prompt tokens "
                              f"({err})") from None
        if backend in LOCAL_ENGINES:
            raise ThinkJError(f"{model}: cannot read its tokenizer/config to count prompt tokens ({err})") from None
        return None
