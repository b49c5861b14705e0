"""Group rewards from a pairwise judge: the G completions of one prompt compared by a trained Think-J judge.

A Think-J judge says which of two responses is better (and how strongly, 1-3); GRPO needs one number per
completion. This module turns the judge's verdicts inside a group into those numbers. The group preset
``thinkj_pairwise`` (TRL: ``TRLGroupReward("thinkj_pairwise", ...)``; verl: ``GroupRewardManager`` with
``group_preset=thinkj_pairwise``) runs it against a judge served over HTTP (``vllm serve``), see
docs/judge_as_reward.md.

**One comparison, both orders (swap-averaged).** X vs Y is judged twice, X shown as Response (a) and then as
Response (b), with the registered judge template (``judge_strength_v1`` by default, ``thinkj.prompts``) and read
by the one verdict parser (``thinkj.verdict_parser.parse_verdict``, lenient: the judge is a model, not a policy under
training). Each order gives X a value: 1 for a win, 0 for a loss, 0.5 for a tie or an answer with no verdict.
With ``weight_strength`` a win is worth 0.5 + 0.5·s/3 and a loss 0.5 - 0.5·s/3 (s = the stated strength; a
missing or out-of-range strength counts as 1). The comparison's value v(X, Y) is the mean of the two orders,
except that **a verdict that flips with position (each order names the shown-first, or each the shown-second,
response) is a tie, 0.5**, whatever the strengths. v(Y, X) = 1 - v(X, Y). Two identical texts are a tie
without asking the judge.

**Schemes** (``scheme``), with the number of judge requests per group of G (the cost of a step is the sum over
its groups; identical texts and cache hits only lower it; it is logged as ``judge_calls``):

=====================  ===========================================================  =======================
scheme                 reward of completion i                                       judge requests
=====================  ===========================================================  =======================
round_robin            mean of v(i, j) over all j != i (its win rate)               G(G-1)
anchor, reference      v(i, reference) (the data's reference answer)               2G
anchor, first          v(i, f) for i != f; f gets mean of v(f, j) (f: see below)   2(G-1)
knockout               (sum of v over its matches + byes) / ceil(log2 G)            2(G-1), in log2 G rounds
=====================  ===========================================================  =======================

**Content order.** Knockout's bracket and ``anchor=first``'s anchor f come from the members sorted by the SHA-256 of
their texts (``group_order.content_order``; f is the first of them): a draw as good as random with respect to
quality, but fixed by the texts alone. So a group's rewards do not depend on the order in which its members arrive.
That order is not fixed under verl, whose concurrent reward loop hands rollouts to the manager
(``adapters/verl_group.py``) as they finish, and TRL and verl score the same group alike. Only identical texts can
trade rewards with arrival (position breaks equal hashes), which leaves the group's update unchanged. Knockout pairs
neighbours each round and gives an odd one out a bye (worth a win). The higher v advances; a tie or a failed match
advances the earlier-seeded one and is worth 0.5 to both.

**Bradley-Terry** (``bradley_terry=True``): instead of the plain averages, fit one strength per completion (and
the reference) to all the group's comparisons (v wins for X and 1-v for Y, so ties are half wins; Hunter's MM
algorithm with one virtual tied game against a fixed opponent per item, which keeps every strength finite) and
reward each completion with its predicted win rate against the other members, mean of p_i / (p_i + p_j).
It uses every comparison at once, so a win against a strong completion counts for more.

All rewards lie in [0, 1]; 0.5 is "no evidence either way" (also a completion left without any comparison).
With ``anchor=reference`` a group whose ground truth has no usable reference (``{"reference": str}``) is a data
error: every member gets 0.5, no request is sent, and ``gold_error`` = 1 (0 otherwise, and in the other schemes,
which read no ground truth).

**Failures** are never scores. A request that fails after its retries leaves its comparison out (in knockout:
the match is a tie); the endpoint's failure meter stops the run with ``JudgeUnavailableError`` above
``max_failure_rate`` (``thinkj.rewards.designs.judge_http``). Logged per group, on every sample (verl's reward extra
info, TRL's ``judge/*`` metrics): judge_calls, cache_hits, judge_failure_rate, flip_rate (comparisons whose
two orders named different winners / comparisons judged), unparsed_rate (answers without a verdict),
judge_latency_s (mean request time, retries included).

**Cache** (``cache_path``): every answer is stored under (judge model, template, messages = prompt + the pair in
that order, sampling settings), i.e. per (prompt, pair, order), in the project's SQLite ``ResultCache``; a
comparison seen before (e.g. an unchanged completion across steps) is not sent again. The judge is known only by
its served name: use one cache file per judge checkpoint (a retrained judge served under the same name with the
same ``cache_path`` would get the old judge's answers).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from thinkj.prompts import get_template
from thinkj.records import PreferencePair
from thinkj.rewards.designs.group_order import content_order
from thinkj.rewards.designs.judge_http import CLIENT_KINDS, GUARD_DEFAULTS, guard_settings, judge_batch
from thinkj.verdict_parser import STRENGTH_RANGE, parse_verdict

SCHEMES = ("round_robin", "anchor", "knockout")
ANCHORS = ("reference", "first")
PAIRWISE_GROUP_KEYS = ("score", "win_rate", "n_compared", "judge_calls", "cache_hits", "judge_failure_rate",
                       "flip_rate", "unparsed_rate", "judge_latency_s", "gold_error")
PAIRWISE_GROUP_DEFAULTS: dict[str, Any] = {
    "scheme": "round_robin", "anchor": "first", "weight_strength": False, "bradley_terry": False,
    "template": "judge_strength_v1", "base_url": "http://127.0.0.1:8000/v1", "model": "judge",
    "api_key_env": "OPENAI_API_KEY", "temperature": 0.0, "max_tokens": 1024, "concurrency": 16, "retries": 3,
    "timeout_s": 120.0, "backoff_s": 0.5, "cache_path": None, **GUARD_DEFAULTS}
PAIRWISE_GROUP_KINDS = {"cache_path": "str?", "api_key_env": "str?", **CLIENT_KINDS}
PAIRWISE_GROUP_CHOICES = {"scheme": SCHEMES, "anchor": ANCHORS}
REF = -1  # index of the reference answer in comparisons


def judge_calls(group_size: int, scheme: str, anchor: str = "first") -> int:
    """Judge requests for one group of ``group_size`` (an upper bound: identical texts and cache hits are free)."""
    g = int(group_size)
    if scheme == "round_robin":
        return g * (g - 1)
    if scheme == "anchor":
        return 2 * g if anchor == "reference" else 2 * max(g - 1, 0)
    if scheme == "knockout":
        return 2 * max(g - 1, 0)
    raise ValueError(f"unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}")


@dataclass(frozen=True)
class OrderVerdict:
    """One judge answer for an ordered pair: ``choice`` of the response shown as (a) or (b)."""

    choice: str  # "a" | "b" | "tie" | "none" (no verdict) | "failed" (the request failed)
    strength: int | None = None


def read_answer(text: str | None, template: str = "judge_strength_v1") -> OrderVerdict:
    if text is None:
        return OrderVerdict("failed")
    verdict = parse_verdict(text, get_template(template).answer, strict=False)
    return OrderVerdict(verdict.choice, verdict.strength)


def _order_value(verdict: OrderVerdict, x_first: bool, weight_strength: bool) -> tuple[float, str | None]:
    """(X's value in this order, the winner "x"/"y" or None)."""
    if verdict.choice not in ("a", "b"):
        return 0.5, None
    winner = "x" if (verdict.choice == "a") == x_first else "y"
    s = verdict.strength
    if s is None or not STRENGTH_RANGE[0] <= s <= STRENGTH_RANGE[1]:
        s = STRENGTH_RANGE[0]
    margin = 0.5 * s / STRENGTH_RANGE[1] if weight_strength else 0.5
    return (0.5 + margin if winner == "x" else 0.5 - margin), winner


@dataclass(frozen=True)
class Comparison:
    x: int
    y: int
    value: float  # v(x, y) in [0, 1]
    failed: bool = False
    flipped: bool = False
    unparsed: int = 0  # orders answered without a verdict (0-2)
    judged: bool = True  # False for identical texts (no request)


def swap_average(xy: OrderVerdict, yx: OrderVerdict, *, weight_strength: bool = False, x: int = 0, y: int = 1) -> Comparison:
    """Combine X-first and Y-first answers into v(X, Y) (see the module docstring)."""
    if "failed" in (xy.choice, yx.choice):
        return Comparison(x, y, 0.5, failed=True)
    v1, w1 = _order_value(xy, True, weight_strength)
    v2, w2 = _order_value(yx, False, weight_strength)
    unparsed = (xy.choice == "none") + (yx.choice == "none")
    if w1 is not None and w2 is not None and w1 != w2:
        return Comparison(x, y, 0.5, flipped=True, unparsed=unparsed)
    return Comparison(x, y, (v1 + v2) / 2, unparsed=unparsed)


PairJudge = Callable[[list[tuple[str, str]]], Awaitable[list[OrderVerdict]]]


@dataclass
class GroupStats:
    calls: int = 0
    failures: int = 0
    cache_hits: int = 0
    latencies: list[float] = field(default_factory=list)


class HttpPairJudge:
    """Ordered pairs of texts -> judge answers from an OpenAI-compatible server, with request statistics."""

    def __init__(self, prompt: Any, **kw: Any):
        from thinkj.rewards.designs.pairwise_rm import as_messages

        self.messages = as_messages(prompt)
        self.kw = kw
        self.template = get_template(kw["template"])
        self.stats = GroupStats()

    async def __call__(self, pairs: list[tuple[str, str]]) -> list[OrderVerdict]:
        unique = list(dict.fromkeys(pairs))  # identical texts at different indices: ask once
        conversations = [self.template.render(PreferencePair("rm", "policy", self.messages, a, b, "tie"))
                         for a, b in unique]
        kw = self.kw
        batch = await judge_batch(conversations, base_url=kw["base_url"], model=kw["model"], api_key_env=kw["api_key_env"],
                                  temperature=kw["temperature"], max_tokens=kw["max_tokens"], concurrency=kw["concurrency"],
                                  retries=kw["retries"], timeout_s=kw["timeout_s"], backoff_s=kw["backoff_s"],
                                  cache_path=kw.get("cache_path"), tag=self.template.name, **guard_settings(kw))
        self.stats.calls += batch.calls
        self.stats.failures += batch.failures
        self.stats.cache_hits += batch.cache_hits
        self.stats.latencies += batch.latencies
        answers = {pair: read_answer(row[0], self.template.name) for pair, row in zip(unique, batch.texts)}
        return [answers[p] for p in pairs]


async def compare(judge: PairJudge, texts: dict[int, str], pairs: list[tuple[int, int]],
                  weight_strength: bool) -> list[Comparison]:
    """Judge each (x, y) in both orders, all requests at once; identical texts are ties without a request."""
    asked = [(x, y) for x, y in pairs if texts[x] != texts[y]]
    ordered = [o for x, y in asked for o in ((texts[x], texts[y]), (texts[y], texts[x]))]
    verdicts = await judge(ordered) if ordered else []
    by_pair = {p: swap_average(verdicts[2 * k], verdicts[2 * k + 1], weight_strength=weight_strength, x=p[0], y=p[1])
               for k, p in enumerate(asked)}
    return [by_pair.get((x, y)) or Comparison(x, y, 0.5, judged=False) for x, y in pairs]


def bradley_terry(items: list[int], comparisons: list[Comparison], *, prior: float = 1.0, iters: int = 500,
                  tol: float = 1e-10) -> dict[int, float]:
    """Bradley-Terry strengths by Hunter's MM updates; v(x, y) counts as v wins for x and 1-v for y.

    Each item also plays ``prior`` tied games against a virtual opponent of strength 1, so no strength runs off
    to 0 or infinity when an item won or lost everything.
    """
    strength = dict.fromkeys(items, 1.0)
    used = [c for c in comparisons if not c.failed and c.x in strength and c.y in strength]
    wins = {i: prior / 2 for i in items}
    for c in used:
        wins[c.x] += c.value
        wins[c.y] += 1 - c.value
    for _ in range(iters):
        denom = {i: prior / (strength[i] + 1.0) for i in items}
        for c in used:
            d = 1.0 / (strength[c.x] + strength[c.y])
            denom[c.x] += d
            denom[c.y] += d
        new = {i: wins[i] / denom[i] for i in items}
        change = max(abs(math.log(new[i] / strength[i])) for i in items)
        strength = new
        if change < tol:
            break
    return strength


def _mean(values: list[float], empty: float = 0.5) -> float:
    return sum(values) / len(values) if values else empty


def _plain_scores(n: int, comparisons: list[Comparison]) -> list[float]:
    """Mean v of each completion over its (non-failed) comparisons with group members or the reference."""
    values: dict[int, list[float]] = {i: [] for i in range(n)}
    for c in comparisons:
        if c.failed:
            continue
        values[c.x].append(c.value)
        if c.y != REF:
            values[c.y].append(1 - c.value)
    return [_mean(values[i]) for i in range(n)]


async def _knockout(judge: PairJudge, texts: dict[int, str], n: int,
                    weight_strength: bool) -> tuple[list[float], list[Comparison]]:
    rounds = math.ceil(math.log2(n)) if n > 1 else 0
    credit = [0.0] * n
    alive = content_order([texts[i] for i in range(n)])
    played: list[Comparison] = []
    while len(alive) > 1:
        matches = [(alive[k], alive[k + 1]) for k in range(0, len(alive) - 1, 2)]
        results = await compare(judge, texts, matches, weight_strength)
        played += results
        nxt = []
        for c in results:
            value = 0.5 if c.failed else c.value
            credit[c.x] += value
            credit[c.y] += 1 - value
            nxt.append(c.y if value < 0.5 else c.x)  # a tie advances the earlier seed (x)
        if len(alive) % 2:
            credit[alive[-1]] += 1.0  # bye
            nxt.append(alive[-1])
        alive = nxt
    return [c / rounds if rounds else 0.5 for c in credit], played


async def group_rewards(texts: list[str], judge: PairJudge, *, scheme: str = "round_robin", anchor: str = "first",
                        reference: str | None = None, weight_strength: bool = False,
                        bradley_terry_fit: bool = False) -> tuple[list[float], list[float], list[Comparison]]:
    """(rewards, plain win rates, comparisons) for one group; see the module docstring for the rules."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    if scheme == "anchor" and anchor not in ANCHORS:
        raise ValueError(f"unknown anchor {anchor!r}; known: {', '.join(ANCHORS)}")
    n = len(texts)
    pool: dict[int, str] = dict(enumerate(texts))
    if scheme == "knockout":
        scores, comparisons = await _knockout(judge, pool, n, weight_strength)
    else:
        if scheme == "round_robin":
            pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        elif anchor == "reference":
            if reference is None:
                raise ValueError("anchor=reference needs a reference answer in the ground truth ({'reference': ...})")
            pool[REF] = reference
            pairs = [(i, REF) for i in range(n)]
        else:
            first = content_order(texts)[0] if n else 0
            pairs = [(i, first) for i in range(n) if i != first]
        comparisons = await compare(judge, pool, pairs, weight_strength)
        scores = _plain_scores(n, comparisons)
    win_rates = list(scores)
    if bradley_terry_fit and n:
        p = bradley_terry(list(pool), comparisons)
        if n > 1:
            scores = [_mean([p[i] / (p[i] + p[j]) for j in range(n) if j != i]) for i in range(n)]
        elif REF in p:
            scores = [p[0] / (p[0] + p[REF])]  # one completion: its predicted win rate against the reference
    return scores, win_rates, comparisons


async def pairwise_group(prompt: Any, texts: list[str], ground_truths: list[Any], **kw: Any) -> list[dict[str, Any]]:
    """The ``thinkj_pairwise`` group preset: the schemes above against a judge over HTTP."""
    from thinkj.rewards.designs.pairwise_rm import read_reference

    scheme, anchor = str(kw["scheme"]), str(kw["anchor"])
    reference = None
    if scheme == "anchor" and anchor == "reference":
        reference, _ = read_reference(ground_truths[0] if ground_truths else None)
        if reference is None:  # a data error: nothing to compare with, so no request and no evidence (0.5)
            return [{"score": 0.5, "win_rate": 0.5, "n_compared": 0, "judge_calls": 0, "cache_hits": 0,
                     "judge_failure_rate": 0.0, "flip_rate": 0.0, "unparsed_rate": 0.0, "judge_latency_s": 0.0,
                     "gold_error": 1.0} for _ in texts]
    judge = HttpPairJudge(prompt, **kw)
    scores, win_rates, comparisons = await group_rewards(
        texts, judge, scheme=scheme, anchor=anchor, reference=reference, weight_strength=bool(kw["weight_strength"]),
        bradley_terry_fit=bool(kw["bradley_terry"]))
    judged = [c for c in comparisons if c.judged and not c.failed]
    stats = judge.stats
    group = {"judge_calls": stats.calls, "cache_hits": stats.cache_hits,
             "judge_failure_rate": stats.failures / stats.calls if stats.calls else 0.0,
             "flip_rate": _mean([float(c.flipped) for c in judged], 0.0),
             "unparsed_rate": sum(c.unparsed for c in judged) / (2 * len(judged)) if judged else 0.0,
             "judge_latency_s": _mean(stats.latencies, 0.0)}
    compared = {i: 0 for i in range(len(texts))}
    for c in comparisons:
        if not c.failed:
            for k in (c.x, c.y):
                if k in compared:
                    compared[k] += 1
    return [{"score": float(s), "win_rate": float(w), "n_compared": compared[i], **group, "gold_error": 0.0}
            for i, (s, w) in enumerate(zip(scores, win_rates))]
