"""Teacher traces (paper §3.1, Appendix B.1): ask R1 to judge each pair with thinking, keep the right ones.

Every pair goes to the teacher once, rendered with a judge template (``judge_strength_v2`` by default),
at temperature 0.0 as in the paper, through the OpenAI-compatible client (:mod:`thinkj.inference.http_client`)
with its result cache, so an interrupted run resumes and a finished one reruns for free. The teacher's
verdict is read with :func:`thinkj.verdict_parser.parse_verdict` (lenient: real teachers vary the wording) from
the reasoning + answer, and the accuracy filter keeps traces whose verdict equals the label.

Output: ``out`` (JSONL; ``pair`` -- the PreferencePair as a dict, with the gold label and strength -- plus the
teacher's ``reasoning``, ``content``, ``verdict`` and ``strength``),
``<out>.summary.json`` (counts in / kept / wrong / unparsable / failed calls, token usage) and the cache
``<out>.cache.sqlite`` unless another is named.

A run is complete only when every call succeeded and at least one trace was kept. The key variable is checked
before the first call; when calls failed (after their retries) or nothing was kept, the successes are still
written (and cached) and :class:`~thinkj.errors.StageIncomplete` is raised, so the command exits non-zero and
the pipeline does not mark the stage done; a rerun asks the teacher only for the failed items.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from thinkj.checks import check_distinct_paths, check_range, check_template_kind
from thinkj.errors import StageIncomplete, ThinkJError
from thinkj.inference.base import SamplingParams
from thinkj.inference.cache import ResultCache
from thinkj.inference.http_client import CONNECT_TIMEOUT, GIVE_UP_AFTER, ChatResult, OpenAIChatBackend
from thinkj.prompts import get_template
from thinkj.records import PreferencePair, RecordError, load_pairs, write_json, write_jsonl
from thinkj.verdict_parser import parse_verdict


def trace_pair(row: Any, path: str | os.PathLike | None = None, line: int | None = None) -> PreferencePair:
    """The PreferencePair of a trace record (``row["pair"]``; the other keys are the teacher's output)."""
    if not isinstance(row, dict) or not isinstance(row.get("pair"), dict):
        raise RecordError("a trace record needs a 'pair' object", path=path, line=line, field="pair")
    return PreferencePair.from_dict(row["pair"], path=path, line=line)


def judge_traces(pairs: list[PreferencePair], results: list[ChatResult], template: str) -> tuple[list[dict], dict[str, Any]]:
    """Apply the accuracy filter; return (kept trace records, counts)."""
    fmt = get_template(template).answer
    kept, counts = [], Counter()
    usage = Counter()
    for pair, result in zip(pairs, results):
        if not result.ok:
            counts["failed_calls"] += 1
            continue
        for name, value in (result.usage or {}).items():
            if isinstance(value, int):
                usage[name] += value
        verdict = parse_verdict(result.full_text(), fmt, strict=False)
        if verdict.choice not in ("a", "b"):
            counts["unparsable"] += 1
            continue
        if verdict.choice != pair.label:
            counts["wrong"] += 1
            continue
        kept.append({"pair": pair.to_dict(), "reasoning": result.reasoning, "content": result.content,
                     "verdict": verdict.choice, "strength": verdict.strength})
    return kept, {**counts, "usage": dict(usage)}


def run_traces(pairs_path: str | os.PathLike, out_path: str | os.PathLike, *, model: str, base_url: str,
               api_key_env: str | None = "OPENAI_API_KEY", template: str = "judge_strength_v2", temperature: float = 0.0,
               max_new_tokens: int = 8192, max_concurrency: int = 16, max_retries: int = 6, timeout: float = 600.0,
               backoff: float = 1.0, max_backoff: float = 60.0, cache_path: str | os.PathLike | None = None,
               progress: bool = True, give_up_after: int = GIVE_UP_AFTER,
               connect_timeout: float = CONNECT_TIMEOUT) -> dict[str, Any]:
    """Collect teacher traces for every non-tie pair, write the ones with the right verdict and a summary."""
    pairs_path, out_path = Path(pairs_path), Path(out_path)
    check_distinct_paths("PAIRS", pairs_path, "OUT", out_path)
    check_range("--temperature", temperature, low=0)
    check_range("--max-new-tokens", max_new_tokens, low=1)
    check_range("--concurrency", max_concurrency, low=1)
    check_range("--timeout", timeout, low=0, low_open=True)
    check_range("--max-retries", max_retries, low=0)
    check_range("--give-up-after", give_up_after, low=0)
    check_range("--connect-timeout", connect_timeout, low=0, low_open=True)
    check_template_kind("--template", template, ("judge",))  # a critic prompt asks no verdict to filter on
    if api_key_env and not os.environ.get(api_key_env):
        raise ThinkJError(f"--api-key-env {api_key_env}: the environment variable {api_key_env} holding the teacher's "
                          "API key is not set (pass --api-key-env '' for a server that needs no key)")
    all_pairs = load_pairs(pairs_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    pairs = [p for p in all_pairs if p.decided]  # a tie has no right side to filter on
    cache = ResultCache(cache_path or out_path.with_suffix(".cache.sqlite"))
    backend = OpenAIChatBackend(model, base_url, api_key_env=api_key_env, max_concurrency=max_concurrency, timeout=timeout,
                                max_retries=max_retries, backoff=backoff, max_backoff=max_backoff, cache=cache, tag=template,
                                progress=progress, give_up_after=give_up_after, connect_timeout=connect_timeout)
    tmpl = get_template(template)
    params = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens)
    results = [row[0] for row in backend.chat_many([tmpl.render(p) for p in pairs], params)]
    kept, counts = judge_traces(pairs, results, template)
    write_jsonl(out_path, kept)
    summary = {
        "stage": "traces", "input": str(pairs_path), "output": str(out_path), "n_in": len(all_pairs),
        "ties_skipped": len(all_pairs) - len(pairs), "n_out": len(kept), "wrong": counts.get("wrong", 0),
        "unparsable": counts.get("unparsable", 0), "failed_calls": counts.get("failed_calls", 0),
        "model": model, "base_url": base_url, "template": template, "sampling": params.to_dict(),
        "calls": {k: backend.stats[k] for k in ("cached", "completed", "failures", "requests", "retries")},
        "usage": counts["usage"], "cache": str(cache.path),
    }
    cache.close()
    write_json(out_path.with_suffix(".summary.json"), summary)
    failed = summary["failed_calls"]
    if failed:
        first = next(r.error for r in results if not r.ok)
        raise StageIncomplete(f"{out_path}: {failed} of {len(pairs)} teacher calls failed after retries (first: "
                              f"{' '.join(str(first).split())[:160]}); the {len(kept)} kept traces are written and every "
                              "answer is cached: rerun the same command to retry only the failed calls")
    if not kept:
        raise StageIncomplete(f"{out_path}: no trace passed the accuracy filter ({len(pairs)} pairs asked, "
                              f"{summary['wrong']} wrong, {summary['unparsable']} unparsable): the output is empty")
    return summary
