"""A trained Think-J judge as the reward model of a policy, over HTTP (``vllm serve JUDGE --served-model-name judge``).

The judge sees two candidates with ``judge_strength_v2`` (``thinkj.prompts``) and its answer is read by
``thinkj.verdict_parser.parse_verdict`` (lenient mode: the judge is a model under test here, not a policy under
training). Every comparison is made in BOTH orders, so a judge's position bias cancels.

One judgment of candidate X against Y gives X the signed preference::

    p = +s/3  if the judge prefers X,   -s/3  if it prefers Y,   0  if unparsed, a tie, or the request failed
    (s = the stated strength 1-3; a missing or out-of-range strength counts as 1)

Round robin (group preset ``thinkj_round_robin``): every pair (i, j) of the group is judged as (i, j) and (j, i);
reward_i = mean of p over i's 2(n-1) judgments, in [-1, 1]. Reference (per sample, :func:`reference_score`; verl's
async ``compute_score``: ``thinkj.rewards.adapters.verl_reference``): the candidate against
``ground_truth["reference"]`` in both orders; reward = mean of the two p, in [-1, 1]. Keys: score, win_rate (share of
judgments the candidate won), n_judgments, n_parsed, consistency (share of its pairs whose two orders agreed on the
winner), judge_failure_rate and judge_latency_s (the group's requests); reference mode adds ``gold_error``
(``REFERENCE_KEYS``: a ground truth without a usable reference scores 0 and sends nothing). A failed request (after
retries) gives p = 0 but is counted: above ``max_failure_rate`` the reward raises ``JudgeUnavailableError`` and the
run stops (``thinkj.rewards.designs.judge_http``). For the schemes with swap-averaged verdicts, knockout, anchors and
Bradley-Terry see ``thinkj.rewards.designs.pairwise_group``.

A group of one gets score 0 (nothing to compare). Cost: round robin sends n(n-1) requests per group,
reference 2 per sample.
"""

from __future__ import annotations

import itertools
from typing import Any

from thinkj.prompts import get_template
from thinkj.records import PreferencePair
from thinkj.rewards.designs.judge_http import CLIENT_KINDS, GUARD_DEFAULTS, JudgeBatch, guard_settings, judge_batch
from thinkj.rewards.gold import mapping, shown
from thinkj.verdict_parser import STRENGTH_RANGE, parse_verdict

PAIRWISE_KEYS = ("score", "win_rate", "n_judgments", "n_parsed", "consistency", "judge_failure_rate", "judge_latency_s")
REFERENCE_KEYS = (*PAIRWISE_KEYS, "gold_error")  # reference mode reads a ground truth; round robin reads none
PAIRWISE_DEFAULTS: dict[str, Any] = {"base_url": "http://127.0.0.1:8000/v1", "model": "judge",
                                     "api_key_env": "OPENAI_API_KEY", "temperature": 0.0, "max_tokens": 1024,
                                     "concurrency": 16, "retries": 3, "timeout_s": 120.0, "backoff_s": 0.5,
                                     "template": "judge_strength_v2", **GUARD_DEFAULTS}
PAIRWISE_KINDS = {"api_key_env": "str?", **CLIENT_KINDS}  # None: no key


def as_messages(prompt: Any) -> list[dict[str, str]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages = [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
                for m in (prompt or []) if isinstance(m, dict) and m.get("role") != "system"]
    return messages or [{"role": "user", "content": ""}]


def signed_preference(text: str | None, template: str) -> tuple[float, float, bool]:
    """(p for the candidate shown as (a), win for (a) as 0/1, parsed) from one judge answer."""
    if text is None:
        return 0.0, 0.0, False
    verdict = parse_verdict(text, get_template(template).answer, strict=False)
    if verdict.choice not in ("a", "b"):
        return 0.0, 0.0, verdict.choice == "tie"
    strength = verdict.strength
    if strength is None or not STRENGTH_RANGE[0] <= strength <= STRENGTH_RANGE[1]:
        strength = 1
    p = strength / STRENGTH_RANGE[1]
    return (p, 1.0, True) if verdict.choice == "a" else (-p, 0.0, True)


def _agree(p_first: float, p_second: float) -> bool:
    """Both orders named a winner, and the same one (both p are from the same candidate's side)."""
    return p_first != 0 and p_second != 0 and (p_first > 0) == (p_second > 0)


async def _judge_all(messages: list[dict[str, str]], pairs: list[tuple[str, str]],
                     kw: dict[str, Any]) -> tuple[list[tuple[float, float, bool]], JudgeBatch]:
    """Signed preferences for the candidate shown first, one per (first, second) pair, all requests at once."""
    template = get_template(kw["template"])
    conversations = [template.render(PreferencePair("rm", "policy", messages, x, y, "tie")) for x, y in pairs]
    batch = await judge_batch(conversations, n=1, base_url=kw["base_url"], model=kw["model"],
                              api_key_env=kw["api_key_env"], temperature=kw["temperature"], max_tokens=kw["max_tokens"],
                              concurrency=kw["concurrency"], retries=kw["retries"], timeout_s=kw["timeout_s"],
                              backoff_s=kw["backoff_s"], **guard_settings(kw))
    return [signed_preference(row[0], kw["template"]) for row in batch.texts], batch


async def round_robin_group(prompt: Any, texts: list[str], ground_truths: list[Any], **kw: Any) -> list[dict[str, Any]]:
    n = len(texts)
    messages = as_messages(prompt)
    pairs = list(itertools.permutations(range(n), 2))  # (i, j) and (j, i): both orders
    judged, batch = await _judge_all(messages, [(texts[i], texts[j]) for i, j in pairs], kw) if pairs else ([], None)
    prefs: dict[int, list[float]] = {i: [] for i in range(n)}
    wins: dict[int, list[float]] = {i: [] for i in range(n)}
    parsed: dict[int, int] = dict.fromkeys(range(n), 0)
    by_pair: dict[tuple[int, int], float] = {}
    for (i, j), (p, win_a, ok) in zip(pairs, judged):
        prefs[i].append(p)
        prefs[j].append(-p)
        wins[i].append(win_a if ok else 0.0)
        wins[j].append((1.0 - win_a) if ok and p != 0 else 0.0)
        parsed[i] += ok
        parsed[j] += ok
        by_pair[(i, j)] = p
    results = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        agree = [_agree(by_pair[(i, j)], -by_pair[(j, i)]) for j in others]
        results.append({"score": sum(prefs[i]) / len(prefs[i]) if prefs[i] else 0.0,
                        "win_rate": sum(wins[i]) / len(wins[i]) if wins[i] else 0.0,
                        "n_judgments": len(prefs[i]), "n_parsed": parsed[i],
                        "consistency": sum(agree) / len(agree) if agree else 0.0,
                        "judge_failure_rate": batch.failure_rate if batch else 0.0,
                        "judge_latency_s": batch.latency_s if batch else 0.0})
    return results


def read_reference(ground_truth: Any) -> tuple[str | None, str]:
    """(the reference answer, "") or (None, what is wrong): a non-blank string, or ``{"reference": str}``."""
    fields = mapping(ground_truth)
    ref = fields.get("reference") if fields is not None else ground_truth
    if not isinstance(ref, str):
        where = "ground_truth.reference" if fields is not None else "ground_truth"
        return None, f"{where}: expected the reference answer as text, got {shown(ref)}"
    if not ref.strip():
        return None, "ground_truth.reference: blank"
    return ref, ""


def reference_problem(ground_truth: Any) -> str:
    return read_reference(ground_truth)[1]


async def reference_score(prompt: Any, text: str, ground_truth: Any, **kw: Any) -> dict[str, Any]:
    """The candidate against the reference answer, both orders (see module docstring). A ground truth without a
    usable reference is a data error: score 0, no request sent, ``gold_error`` = 1."""
    weights = {**PAIRWISE_DEFAULTS, **kw}
    reference, _ = read_reference(ground_truth)
    if reference is None:
        return {"score": 0.0, "win_rate": 0.0, "n_judgments": 0, "n_parsed": 0, "consistency": 0.0,
                "judge_failure_rate": 0.0, "judge_latency_s": 0.0, "gold_error": 1.0}
    messages = as_messages(prompt)
    text = text if isinstance(text, str) else ""
    (first, second), batch = await _judge_all(messages, [(text, reference), (reference, text)], weights)
    p = (first[0] - second[0]) / 2
    wins = first[1] * first[2] + ((1.0 - second[1]) if second[2] and second[0] != 0 else 0.0)
    agree = _agree(first[0], -second[0])
    return {"score": p, "win_rate": wins / 2, "n_judgments": 2, "n_parsed": int(first[2]) + int(second[2]),
            "consistency": float(agree), "judge_failure_rate": batch.failure_rate, "judge_latency_s": batch.latency_s,
            "gold_error": 0.0}
