"""Trace clipping (paper §3.1, Table 6): keep the teacher's summarising explanation, drop its long reasoning.

R1's output has two parts: a long reasoning process (``reasoning``) and an explanation that summarises it,
followed by the verdict (``content``). Clipping keeps only the explanation -- the content before the verdict
sentence -- as the ``<think>`` block, then writes the verdict sentence in the template's exact form
(:func:`thinkj.prompts.judge_output`). Items whose explanation is empty are dropped and counted. The
summary reports token lengths of the full teacher output and of the clipped target (a HF tokenizer when
given, else whitespace words).

Output: ``out`` (JSONL: ``pair``, ``explanation``, ``target``, ``verdict``, ``strength``) and
``<out>.summary.json``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from thinkj.checks import check_distinct_paths
from thinkj.data.traces import trace_pair
from thinkj.errors import ThinkJError
from thinkj.prompts import judge_output
from thinkj.records import RecordError, read_jsonl, write_json, write_jsonl

# Where the final verdict sentence starts: the last "Therefore, Response (x)" (any case, optional bold), else
# the last line. This only splits text; the verdict itself was parsed by thinkj.verdict_parser in the traces stage.
_VERDICT_START = re.compile(r"(?:\*\*)?\s*therefore,?\s+(?:\*\*)?response\s*\(?[ab]\)?", re.IGNORECASE)
_HEADING = re.compile(r"^\s*(?:#+\s*|\*\*)?(?:explanation|summary)\s*:?\s*(?:\*\*)?\s*:?\s*$", re.IGNORECASE | re.MULTILINE)


def explanation_of(content: str) -> str:
    """The part of the teacher's answer before its verdict sentence, without a bare 'Explanation:' heading."""
    text = content.strip()
    starts = list(_VERDICT_START.finditer(text))
    if starts:
        head = text[:starts[-1].start()]
    else:
        cut = text.rfind("\n")
        head = text[:cut] if cut >= 0 else ""
    return _HEADING.sub("", head).strip()


def make_counter(tokenizer: str | None) -> tuple[Callable[[list[str]], list[int]], str]:
    """(count tokens of each text, description). Falls back to whitespace words without a tokenizer."""
    if not tokenizer:
        return (lambda texts: [len(t.split()) for t in texts]), "whitespace words"
    from transformers import AutoTokenizer

    from thinkj.inference.identity import check_model_source

    check_model_source(tokenizer, what="--tokenizer")
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError) as error:  # a folder without tokenizer files, a hub id that does not exist
        raise ThinkJError(f"--tokenizer {tokenizer}: cannot load a tokenizer from it ({error})") from None
    return (lambda texts: [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]] if texts else []), tokenizer


def length_stats(lengths: list[int]) -> dict[str, float]:
    if not lengths:
        return {"n": 0}
    arr = np.asarray(lengths, dtype=np.float64)
    return {"n": int(arr.size), "mean": round(float(arr.mean()), 1), "median": float(np.median(arr)),
            "p90": float(np.percentile(arr, 90)), "max": int(arr.max()), "total": int(arr.sum())}


def run_clip(traces_path: str | os.PathLike, out_path: str | os.PathLike, *, tokenizer: str | None = None) -> dict[str, Any]:
    """Clip every trace; write the kept ones and a summary with token-length statistics before and after."""
    traces_path, out_path = Path(traces_path), Path(out_path)
    check_distinct_paths("TRACES", traces_path, "OUT", out_path)
    count, unit = make_counter(tokenizer)
    kept, full_texts, targets = [], [], []
    n_in = empty = no_strength = 0
    for line, row in read_jsonl(traces_path):
        n_in += 1
        for name in ("reasoning", "content", "verdict"):
            if not isinstance(row.get(name), str):
                raise RecordError(f"trace needs a string {name!r}", path=traces_path, line=line, field=name)
        pair = trace_pair(row, traces_path, line)
        if row["verdict"] not in ("a", "b"):
            raise RecordError(f"verdict must be 'a' or 'b', got {row['verdict']!r}", path=traces_path, line=line, field="verdict")
        full_texts.append(f"<think>\n{row['reasoning']}\n</think>\n{row['content']}" if row["reasoning"] else row["content"])
        explanation = explanation_of(row["content"])
        if not explanation:
            empty += 1
            continue
        # The teacher's strength when it gave one, else the dataset's.
        strength = row.get("strength") if row.get("strength") in (1, 2, 3) else pair.strength
        if strength is None:
            no_strength += 1
            continue
        target = judge_output(explanation, row["verdict"], strength)
        targets.append(target)
        kept.append({"pair": pair.to_dict(), "explanation": explanation, "target": target, "verdict": row["verdict"],
                     "strength": strength})
    if n_in == 0:
        raise ThinkJError(f"{traces_path}: no traces to clip (the file is empty)")
    if not kept:
        raise ThinkJError(f"{traces_path}: none of the {n_in} traces has an explanation and a strength to keep "
                          f"({empty} empty explanations, {no_strength} without strength): nothing to write")
    write_jsonl(out_path, kept)
    summary = {"stage": "clip", "input": str(traces_path), "output": str(out_path), "n_in": n_in, "n_out": len(kept),
               "dropped_empty_explanation": empty, "dropped_no_strength": no_strength, "length_unit": unit,
               "length_before": length_stats(count(full_texts)), "length_after": length_stats(count(targets))}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_json(out_path.with_suffix(".summary.json"), summary)
    return summary
