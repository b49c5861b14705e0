"""The XML judge's task (seed 000): original text vs a subtly corrupted copy, in a seeded random A/B order.

Build RL data from any plain-text corpus (one document per line, or a list of strings)::

    from thinkj.data.xml_judge_task import build_xml_judge_pairs
    pairs, counts = build_xml_judge_pairs(texts, seed=0)          # PreferencePair list; label = the original
    from thinkj.export.verl import write_verl_parquet
    write_verl_parquet("xml_judge.parquet", pairs, template="xml_judge_v1")

The seed corrupts with a 14B "corruption model"; here a corruption is any ``fn(text, rng) -> str | None``
(None: does not apply to this text). Four deterministic ones are provided, tried in a seeded order until
one changes the text: ``swap_numbers`` (two different numbers exchange places, or one number shifts),
``negate`` (a polarity word flips: is -> is not, always -> never ...), ``drop_sentence`` (one inner
sentence disappears), ``swap_sentences`` (two adjacent sentences exchange places). A model can be plugged in
the same way (``corruptions=[my_llm_rewrite]``). Texts that no corruption changes are skipped and counted.
The judge's prompt is the ``xml_judge_v1`` template of :mod:`thinkj.prompts`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from thinkj.records import PreferencePair

Corruption = Callable[[str, random.Random], "str | None"]

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_POLARITY = [("is not", "is"), ("are not", "are"), ("was not", "was"), ("cannot", "can"), ("never", "always"),
             ("always", "never"), ("increase", "decrease"), ("decrease", "increase"), ("more", "less"),
             ("is", "is not"), ("are", "are not"), ("was", "was not"), ("can", "cannot")]


def swap_numbers(text: str, rng: random.Random) -> str | None:
    matches = list(_NUMBER.finditer(text))
    values = {m.group() for m in matches}
    if len(values) >= 2:
        first, second = rng.sample(matches, 2)
        while first.group() == second.group():
            first, second = rng.sample(matches, 2)
        a, b = sorted((first, second), key=lambda m: m.start())
        return text[:a.start()] + b.group() + text[a.end():b.start()] + a.group() + text[b.end():]
    if matches:
        m = rng.choice(matches)
        number = m.group()
        shifted = str(int(number) + rng.choice((1, 2, 10))) if number.isdigit() else f"{float(number) * 2:g}"
        return text[:m.start()] + shifted + text[m.end():]
    return None


def negate(text: str, rng: random.Random) -> str | None:
    options = []
    for source, target in _POLARITY:
        # "is" inside "is not" must not become "is not not"
        for m in re.finditer(rf"\b{re.escape(source)}\b(?! not\b)", text):
            options.append((m.start(), m.end(), target))
    if not options:
        return None
    start, end, target = rng.choice(sorted(options))
    return text[:start] + target + text[end:]


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s]


def drop_sentence(text: str, rng: random.Random) -> str | None:
    sentences = _sentences(text)
    if len(sentences) < 3:
        return None
    del sentences[rng.randrange(1, len(sentences))]
    return " ".join(sentences)


def swap_sentences(text: str, rng: random.Random) -> str | None:
    sentences = _sentences(text)
    if len(sentences) < 3:
        return None
    i = rng.randrange(0, len(sentences) - 1)
    sentences[i], sentences[i + 1] = sentences[i + 1], sentences[i]
    return " ".join(sentences)


MODEL_INSTRUCTION = ("Rewrite the text below with exactly one small, plausible change that makes it worse or wrong: "
                     "alter one fact or number, flip one claim, or garble one phrase. Keep everything else word for "
                     "word and reply with the rewritten text only.\n\n")


def model_corruption(backend: Any, params: Any = None, instruction: str = MODEL_INSTRUCTION) -> Corruption:
    """A corruption that asks a model (any ``thinkj.inference`` backend, e.g. ``make_backend("vllm", ...)``) for a
    subtly altered copy, like the seed's 14B corruption model. Wrap the backend in ``CachedBackend`` to resume."""
    from thinkj.inference import SamplingParams

    sampling = params or SamplingParams(temperature=0.7, max_new_tokens=1024)

    def model_rewrite(text: str, rng: random.Random) -> str | None:
        from thinkj.errors import StageIncomplete
        from thinkj.inference.failures import FailedCall

        outs = backend.generate([[{"role": "user", "content": instruction + text}]],
                                dataclasses.replace(sampling, seed=rng.randrange(2 ** 31)))
        out = outs[0][0] if outs and outs[0] else ""
        if isinstance(out, FailedCall):  # a failed call is not "no corruption": the task set would silently change
            raise StageIncomplete(f"corruption model {getattr(backend, 'name', backend)!r}: call failed after "
                                  f"retries ({' '.join(out.error.split())[:200]}); rerun once it answers")
        return out.strip() or None

    return model_rewrite


CORRUPTIONS: dict[str, Corruption] = {"swap_numbers": swap_numbers, "negate": negate,
                                      "drop_sentence": drop_sentence, "swap_sentences": swap_sentences}


def corrupt(text: str, rng: random.Random, corruptions: Sequence[Corruption] | None = None) -> tuple[str, str] | None:
    """Try the corruptions in a random order; return (corrupted text, corruption name) or None."""
    chosen = list(corruptions) if corruptions is not None else list(CORRUPTIONS.values())
    rng.shuffle(chosen)
    for fn in chosen:
        out = fn(text, rng)
        if out is not None and out.strip() and out.strip() != text.strip():
            return out, getattr(fn, "__name__", "corruption")
    return None


TASK_INSTRUCTION = ("One of the two samples below is an original text; the other is a copy that was quietly "
                    "altered (a number, a negation, a missing or moved sentence). Decide which sample is the "
                    "better, unaltered one.")


def build_xml_judge_pairs(texts: Iterable[str], *, seed: int = 0, corruptions: Sequence[Corruption] | None = None,
                          min_chars: int = 40, source: str = "xml_judge") -> tuple[list[PreferencePair], dict[str, int]]:
    """One PreferencePair per usable text: label = the position of the original ("a" or "b").

    Deterministic for a given seed and text order; the original lands in position (a) for half the pairs.
    """
    pairs: list[PreferencePair] = []
    counts = {"texts": 0, "too_short": 0, "uncorruptible": 0}
    for index, raw in enumerate(texts):
        counts["texts"] += 1
        text = (raw or "").strip()
        if len(text) < min_chars:
            counts["too_short"] += 1
            continue
        digest = hashlib.sha256(f"{seed}:{index}:{text}".encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        result = corrupt(text, rng, corruptions)
        if result is None:
            counts["uncorruptible"] += 1
            continue
        corrupted, how = result
        pair = PreferencePair(f"{source}-{index}-{digest[:8]}", source, [{"role": "user", "content": TASK_INSTRUCTION}],
                              text, corrupted, "a", None, {"corruption": how})
        pairs.append(pair)
    flip = random.Random(seed).sample(range(len(pairs)), len(pairs) // 2)
    for i in flip:
        pairs[i] = pairs[i].swapped()
    return pairs, counts
