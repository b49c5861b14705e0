"""The ``<think>`` trap, checked before verl starts.

verl decodes each response with ``skip_special_tokens=True`` before the reward sees it
(``verl/experimental/reward_loop/reward_manager/naive.py``: ``decode(valid_response_ids, skip_special_tokens=True)``). If the
model's tokenizer marks ``<think>`` / ``</think>`` as special tokens, they vanish from the text and the
Think-J format term is 0 for every sample. A chat template that already writes ``<think>`` after the
assistant header (DeepSeek-R1-distill, Qwen3 style) puts it in the prompt, not the response, with the same
result. Both are checked here; ``scripts/train_verl.sh`` refuses to launch unless ``ALLOW_THINK_TOKENS=1``.
"""

from __future__ import annotations

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_PROBE_USER = "Which response is better? PROBE-7f3a"


def think_problems(model: str) -> list[str]:
    """What in ``model``'s tokenizer or chat template would hide the thinking block from the reward."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return [f"its tokenizer could not be loaded to check it ({first})"]
    problems = []
    text = f"{THINK_OPEN}\nweighing both\n{THINK_CLOSE}\nResponse (a) is better."
    decoded = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False), skip_special_tokens=True)
    hidden = [tag for tag in (THINK_OPEN, THINK_CLOSE) if tag not in decoded]
    if hidden:
        problems.append(f"the tokenizer marks {' and '.join(hidden)} as special, so verl's decoding "
                        "(skip_special_tokens=True) drops them from every response")
    if getattr(tokenizer, "chat_template", None):
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": _PROBE_USER}], tokenize=False,
                                               add_generation_prompt=True)
        if THINK_OPEN in prompt.rsplit(_PROBE_USER, 1)[-1]:
            problems.append(f"the chat template pre-fills {THINK_OPEN} after the assistant header, so it is in the "
                            "prompt and never in the response the reward scores")
    return problems


def think_trap_message(model: str, problems: list[str]) -> str:
    if problems and problems[0].startswith("its tokenizer could not be loaded"):
        return (f"{model}: {problems[0]}; the <think> check needs it (a local model folder or a cached hub id). "
                "Set ALLOW_THINK_TOKENS=1 (--allow-think-tokens) to launch without the check.")
    return (f"{model}: the Think-J format reward would be 0 for every sample: " + "; ".join(problems)
            + ". Fix the tokenizer (ordinary added tokens) or the chat template, or set ALLOW_THINK_TOKENS=1 "
              "(--allow-think-tokens) to launch anyway.")
