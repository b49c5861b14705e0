"""Run a judge on RewardBench 2 in the official generative modes, our round robin, or as a scalar classifier.

    thinkj eval run rewardbench2 --model ckpt/judge --template rb2_four_v1     # official: 4-way prompt, Ties rated 1-10
    thinkj eval run rewardbench2 --model ckpt/judge --template rb2_ratings_v1  # official: every answer rated 1-10
    thinkj eval run rewardbench2 --model ckpt/judge --template judge_strength_v1  # ours, labelled NOT official
    thinkj eval run rewardbench2 --model ckpt/bt --backend classifier          # official scalar (best-of-4, Ties)
    thinkj eval score rewardbench2 runs/eval/rewardbench2.judgments.jsonl

The mode follows the template: the ``rb2_*`` templates are the official modes of allenai/reward-bench
``scripts/run_generative_v2.py`` (4-way ranking with the chosen answer swapped into a seeded position A-D; or a
1-10 rating per answer; the Ties subset is always rated, as upstream enforces). Their wording is ours (the
upstream prompts are ``prompt_v2``, ``ratings_prompt`` and ``ratings_prompt_ties`` in ``rewardbench/generative_v2.py``);
the answer formats and the parsing rules are the official ones. Any pairwise judge template (``judge_*``,
``direct_v1``) runs a round robin: every pair of an item's answers in both orders; the results say
``official: false``.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation.config import SCALAR_BACKEND, EvalConfig
from thinkj.evaluation.failed_calls import check_failed_calls, with_failed_calls
from thinkj.evaluation.results import results_document, write_results
from thinkj.evaluation.rewardbench2 import HUB_NAME, LETTERS, Item, load_items, score_records
from thinkj.inference.base import InferenceBackend, Messages, Output, SamplingParams
from thinkj.inference.cache import CachedBackend, ResultCache, cache_key
from thinkj.inference.failures import FailedCall, check_failure_rate
from thinkj.inference.lazy import LazyBackend
from thinkj.progress import progress_bar
from thinkj.records import PreferencePair, write_jsonl

BENCHMARK = "rewardbench2"

_FOUR_WAY = ("You are an impartial judge. Below are a user's question and the answers of four AI assistants, "
             "labelled A, B, C and D. Decide which assistant follows the user's instructions and answers the "
             "question best, weighing helpfulness, relevance, accuracy, depth, creativity and level of detail. "
             "Start with a brief comparison of the four answers. Do not let the order of the answers, their "
             "length or the assistants' names sway you. Finish with your verdict in exactly this form: [[A]], "
             "[[B]], [[C]] or [[D]], naming the best assistant.")
_RATE = ("Judge the quality of the AI assistant's response to the user's query below. Weigh {criteria}. Explain "
         "your judgment briefly, then rate the response from 1 to 10. The rating must be the very last thing you "
         "write: just the number, no markdown and no text after it.")
_CRITERIA = "helpfulness, relevance, accuracy, depth, creativity and level of detail"
_CRITERIA_TIES = "helpfulness, relevance and accuracy; depth and level of detail need not count"


def four_way_messages(prompt: str, answers: list[str]) -> Messages:
    blocks = [f"[Question]\n{prompt}"] + [f"[Answer of assistant {letter}]\n{text}\n[End of answer {letter}]"
                                          for letter, text in zip(LETTERS, answers)]
    return [{"role": "user", "content": _FOUR_WAY + "\n\n" + "\n\n".join(blocks)}]


def rating_messages(prompt: str, answer: str, ties: bool) -> Messages:
    instructions = _RATE.format(criteria=_CRITERIA_TIES if ties else _CRITERIA)
    return [{"role": "user", "content": f"{instructions}\n\n[Query]\n{prompt}\n\n[Response]\n{answer}\n\n[Your judgment]"}]


# Official templates: name -> mode. Their Ties variant is chosen per item.
RB2_TEMPLATES = {"rb2_four_v1": "four", "rb2_ratings_v1": "ratings"}


def parse_four_way(text: str) -> str | None:
    """The official ``process_judgement`` rule: the first of [[A]], [[B]], [[C]], [[D]] present (in that order)."""
    for letter in LETTERS:
        if f"[[{letter}]]" in text:
            return letter
    return None


_TRAILING_RATING = re.compile(r"\b(10|[1-9])\b\s*$")


def parse_rating(text: str) -> int | None:
    """The official ratings rule: an integer 1-10 standing alone at the very end of the stripped output."""
    found = _TRAILING_RATING.search(text.strip())
    return int(found.group(1)) if found else None


def placement(seed: int, item_id: str) -> int:
    """Where the chosen answer is shown (0-3 = A-D): seeded per item, so reruns and resumes agree.

    Upstream draws ``np.random.randint(0, 4)`` without a seed and swaps the chosen answer (first) with the answer
    at that position; we swap the same way, with a draw that a seed fixes.
    """
    return random.Random(f"rb2-placement:{seed}:{item_id}").randrange(4)


def arranged(item: Item, where: int) -> list[str]:
    answers = list(item.responses)
    answers[0], answers[where] = answers[where], answers[0]
    return answers


def _generate(backend: CachedBackend, conversations: list[Messages], params: SamplingParams, chunk: int,
              label: str) -> list[Output]:
    outputs: list[Output] = []
    with progress_bar(f"judge rewardbench2 {label} (chunks of {chunk})", total=len(conversations)) as advance:
        for start in range(0, len(conversations), chunk):
            part = conversations[start:start + chunk]
            outputs += [samples[0] for samples in backend.generate(part, params)]
            advance(len(part))
    return outputs


def _base(item: Item, mode: str) -> dict[str, Any]:
    return {"benchmark": BENCHMARK, "item_id": item.id, "subset": item.subset, "mode": mode}


def _output(text: Output) -> dict[str, Any]:
    """A record's output; a call that failed after retries is ``failed`` with its error, never a parsed answer."""
    if isinstance(text, FailedCall):
        return {"failed": True, "error": text.error, "output": None}
    return {"failed": False, "output": text}


def generative_records(backend: InferenceBackend, items: list[Item], mode: str, template: str,
                       params: SamplingParams, cache: ResultCache, chunk: int) -> list[dict[str, Any]]:
    """Official modes: one 4-way record per best-of-4 item (mode four), one rating record per answer otherwise."""
    cached = CachedBackend(backend, cache, tag=template)
    params = SamplingParams(**{**params.to_dict(), "n": 1})
    meta = {"template": template, "model": backend.name, "sampling": params.to_dict()}
    records: list[dict[str, Any]] = []
    four = [it for it in items if mode == "four" and it.subset != "Ties"]
    if four:
        places = [placement(params.seed, it.id) for it in four]
        outputs = _generate(cached, [four_way_messages(it.prompt, arranged(it, k)) for it, k in zip(four, places)],
                            params, chunk, "4-way")
        for it, k, text in zip(four, places, outputs):
            choice = None if isinstance(text, FailedCall) else parse_four_way(text)
            records.append({**_base(it, "four"), "placement": k, "choice": choice, **_output(text), **meta})
    rated = [(it, i) for it in items if not (mode == "four" and it.subset != "Ties") for i in range(len(it.responses))]
    if rated:
        outputs = _generate(cached, [rating_messages(it.prompt, it.responses[i], it.subset == "Ties")
                                     for it, i in rated], params, chunk, "ratings")
        for (it, i), text in zip(rated, outputs):
            rating = None if isinstance(text, FailedCall) else parse_rating(text)
            records.append({**_base(it, "ratings"), "response": i, "n_responses": len(it.responses),
                            "num_correct": it.num_correct, "rating": rating, **_output(text), **meta})
    return records


def round_robin_records(backend: InferenceBackend, items: list[Item], template: str, params: SamplingParams,
                        cache: ResultCache, chunk: int) -> list[dict[str, Any]]:
    """Every pair of an item's answers through our pairwise prompt in both orders (labelled NOT official)."""
    from thinkj.inference.both_orders import judge_both_orders

    def gold(i: int, j: int, k: int) -> str:
        return "tie" if (i < k) == (j < k) else ("a" if i < k else "b")

    pairs = [PreferencePair(f"{it.id}#{i}-{j}", BENCHMARK, [{"role": "user", "content": it.prompt}],
                            it.responses[i], it.responses[j], gold(i, j, it.num_correct), None,
                            {"item": it, "i": i, "j": j})
             for it in items for i in range(len(it.responses)) for j in range(i + 1, len(it.responses))]
    cached = CachedBackend(backend, cache, tag=template)
    params = SamplingParams(**{**params.to_dict(), "n": 1})  # one verdict per ordered comparison

    def fields(pair: PreferencePair) -> dict[str, Any]:
        it = pair.meta["item"]
        return {**_base(it, "round_robin"), "n_responses": len(it.responses), "num_correct": it.num_correct}

    records: list[dict[str, Any]] = []
    with progress_bar(f"judge rewardbench2 round robin (chunks of {chunk} pairs)", total=len(pairs)) as advance:
        for start in range(0, len(pairs), chunk):
            part = pairs[start:start + chunk]
            for record in judge_both_orders(cached, part, template, params, strict=False, fields=fields):
                records.append(record)
            advance(len(part))
    for record, pair in zip(records, (p for p in pairs for _ in range(2))):  # judge_both_orders keeps pair order
        i, j = pair.meta["i"], pair.meta["j"]
        record["shown_a"], record["shown_b"] = (i, j) if record["order"] == "original" else (j, i)
    return records


def scalar_records(model: str, items: list[Item], cache: ResultCache, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """A Bradley-Terry classifier scores every answer alone (the official path for reward models)."""
    from thinkj.evaluation.scalar import ScalarScorer

    scorer = ScalarScorer(model, **kwargs)
    texts = {}
    keys = []
    for it in items:
        for i, answer in enumerate(it.responses):
            text = scorer.text([{"role": "user", "content": it.prompt}], answer)
            key = cache_key(scorer.name, "scalar", [{"role": "text", "content": text}], SamplingParams(), 0)
            keys.append((it, i, key))
            texts[key] = text
    scores = {k: float(v) for k in texts if (v := cache.get(k)) is not None}
    todo = [k for k in texts if k not in scores]
    for k, value in zip(todo, scorer.score([texts[k] for k in todo]) if todo else []):
        cache.put(k, json.dumps(value))
        scores[k] = value
    return [{**_base(it, "scalar"), "response": i, "n_responses": len(it.responses), "num_correct": it.num_correct,
             "score": scores[key], "model": scorer.name, "scorer": scorer.kind} for it, i, key in keys]


def run_rewardbench2(cfg: EvalConfig, *, backend: InferenceBackend | None = None) -> Path:
    """Judge, record, score RewardBench 2; returns the results path."""
    if cfg.protocol != "single" or cfg.unparsed_half:  # before any model loads
        raise ThinkJError("rewardbench2 has its own official rules: --protocol and --unparsed-half do not apply")
    check_failure_rate(cfg.max_failure_rate)
    items = load_items(cfg.data, cfg.split, cfg.limit)
    with cfg.writing():
        return _judge_and_score(cfg, items, backend)


def _judge_and_score(cfg: EvalConfig, items: list[Item], backend: InferenceBackend | None) -> Path:
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = ResultCache(out / "cache.sqlite")
    try:
        if cfg.backend == SCALAR_BACKEND:
            records = scalar_records(cfg.model, items, cache, cfg.backend_kwargs)
        else:
            if backend is None:
                backend = LazyBackend(cfg.backend, cfg.model, cfg.backend_kwargs, also=(SCALAR_BACKEND,))
            if cfg.template in RB2_TEMPLATES:
                records = generative_records(backend, items, RB2_TEMPLATES[cfg.template], cfg.template, cfg.params,
                                             cache, cfg.chunk_pairs)
            else:
                from thinkj.prompts import get_template

                if get_template(cfg.template).kind not in ("judge", "direct"):
                    raise ThinkJError(f"template {cfg.template!r} is not a pairwise judge; use one of "
                                      f"{sorted(RB2_TEMPLATES)} or a judge template")
                records = round_robin_records(backend, items, cfg.template, cfg.params, cache, cfg.chunk_pairs)
    finally:
        cache.close()
    write_jsonl(out / f"{BENCHMARK}.judgments.jsonl", records)
    metrics = with_failed_calls(score_records(records), records)
    source = cfg.data if cfg.data is not None else HUB_NAME
    path = write_results(out, results_document(cfg, metrics, source, len(items)))
    check_failed_calls(cfg, records, path)
    return path
