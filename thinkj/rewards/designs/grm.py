"""Generative reward model, listwise (seed 001, Rihal's "GRM and GRPO"): one judge prompt scores every
candidate of a group, several passes are averaged, and the average maps to the policy's reward.

For a group of n completions of one prompt:

1. Build one prompt (template ``grm_listwise_v1``: the conversation, then ``[Response i]`` blocks) asking for
   an analysis and then ``\\boxed{s1, ..., sn}`` with integers 1-10. The replies are listed in content order
   (``group_order.content_order``), and each score is mapped back to its completion. The seed lists them in
   sampling order; under verl that would be the order the rollouts arrive in, which changes from run to run, and
   the judge's position bias would follow it. With ``answer_tag`` set (the seed uses ``answer``) only the text
   inside ``<answer>..</answer>`` is shown, "I do not know" when it is missing, and a group where no completion
   has the tag gets all zeros without calling the judge (the seed's rule).
2. Send it ``n_iter`` times concurrently (temperature ``temperature``; requests bounded by ``concurrency``;
   connection errors, timeouts, 429 and 5xx retried ``retries`` times with backoff).
3. Parse each pass (:func:`parse_listwise_scores`: the first ``\\boxed{..}``, else the last line that
   mentions "score", else the last line). A pass is DROPPED when it has the wrong count or any score
   outside [score_min, score_max] = [1, 10]. (The seed instead zeroes an out-of-range score; dropping keeps
   one broken pass from dragging a candidate towards reward 0.) A failed request is a dropped pass.
4. raw_i = mean of candidate i's score over the valid passes (0 when no pass is valid), and::

       reward(raw) = 0                          if raw == 0     (nothing valid: no signal)
                   = (raw - 5) / 5              if 0 < raw <= 5  -> [-1, 0)  ... (raw 1 -> -0.8, 5 -> 0)
                   = (raw - 5) * 2 / 5          if 5 < raw <= 10 -> (0, 2]

   (raw is clipped to [0, 10] first). Keys: score, raw_score, n_valid_passes, n_passes, answer_found, and the
   group's judge_failure_rate (requests that failed after retries / requests sent) and judge_latency_s.

A request that fails after its retries is a dropped pass, and it is counted: when the judge's recent failure rate
is above ``max_failure_rate`` (default 0.2) the reward raises ``JudgeUnavailableError`` and the run stops
(``thinkj.rewards.designs.judge_http``), so a dead judge never shows up as a reward of 0 for every sample.

Use: ``TRLGroupReward("grm_listwise", base_url=..., model=...)`` in TRL, or the verl group manager with
``group_preset=grm_listwise`` (see configs/rewards/grm_listwise.yaml).
"""

from __future__ import annotations

import re
from typing import Any

from thinkj.rewards.designs.group_order import content_order
from thinkj.rewards.designs.judge_http import CLIENT_KINDS, GUARD_DEFAULTS, judge_batch

GRM_TEMPLATE = "grm_listwise_v1"
GRM_KEYS = ("score", "raw_score", "n_valid_passes", "n_passes", "answer_found", "judge_failure_rate", "judge_latency_s")
GRM_DEFAULTS: dict[str, Any] = {"base_url": "http://127.0.0.1:8000/v1", "model": "judge", "api_key_env": "OPENAI_API_KEY",
                                "n_iter": 8, "temperature": 0.5, "max_tokens": 1024, "concurrency": 8, "retries": 3,
                                "timeout_s": 120.0, "answer_tag": None, "score_min": 1.0, "score_max": 10.0,
                                "backoff_s": 0.5, **GUARD_DEFAULTS}
# api_key_env None: no key; answer_tag None: the whole completion is shown
GRM_KINDS = {"api_key_env": "str?", "answer_tag": "str?", "n_iter": "int+", **CLIENT_KINDS}
NO_ANSWER = "I do not know"

_BOXED = re.compile(r"\*{0,2}\\?boxed\*{0,2}\s*[:\-\u2013]?\s*\{([^}]*)\}", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_listwise_scores(text: Any) -> list[float]:
    """Scores from a judge's answer (never raises): boxed list, else a 'score' line, else the last line."""
    if not isinstance(text, str):
        return []
    m = _BOXED.search(text)
    if m:
        found = _NUMBER.findall(m.group(1))
        if found:
            return [float(x) for x in found]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if "score" in line.lower() and _NUMBER.search(line):
            return [float(x) for x in _NUMBER.findall(line)]
    return [float(x) for x in _NUMBER.findall(lines[-1])] if lines else []


def map_score(raw: float) -> float:
    """The seed's piecewise-linear map from a 0-10 average to the policy reward (see module docstring)."""
    raw = min(max(float(raw), 0.0), 10.0)
    if raw == 0.0:
        return 0.0
    if raw <= 5.0:
        return (raw - 5.0) / 5.0
    return (raw - 5.0) * 2.0 / 5.0


def _conversation(prompt: Any) -> str:
    if isinstance(prompt, str):
        return f"user: {prompt}"
    lines = []
    for msg in prompt or []:
        if isinstance(msg, dict) and msg.get("role") != "system":
            lines.append(f"{msg.get('role', 'user')}: {msg.get('content', '')}")
    return "\n".join(lines)


def listwise_messages(prompt: Any, responses: list[str]) -> list[dict[str, str]]:
    """The ``grm_listwise_v1`` judge prompt (our wording of the seed's rubric)."""
    n = len(responses)
    blocks = "\n".join(f"[Response {i + 1}]\n{r}\n[End of Response {i + 1}]" for i, r in enumerate(responses))
    text = (
        "You grade several candidate replies to the same conversation. Judge each on how well it follows the "
        "user's instructions, how useful and correct it is, how complete its details are, and how relevant it "
        "stays; name any criteria specific to this request and how much they weigh. Be strict.\n"
        "Score every reply with an integer from 1 (fails completely) to 10 (meets every criterion); 6 means it "
        "meets only some parts.\n\n"
        f"#### Conversation ####\n{_conversation(prompt)}\n\n#### Replies ####\n{blocks}\n\n"
        "#### Answer format ####\nFirst compare the replies step by step. Then end with one line: "
        f"Scores: \\boxed{{...}} holding exactly {n} comma-separated integers, one per reply in order"
        f" (e.g. \\boxed{{{', '.join(['7'] * min(n, 3))}{', ...' if n > 3 else ''}}}).")
    return [{"role": "user", "content": text}]


def _extract(text: str, tag: str | None) -> tuple[str, bool]:
    if not tag:
        return text, bool(text.strip())
    m = re.search(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, re.DOTALL)
    return (m.group(1).strip(), True) if m else (NO_ANSWER, False)


def valid_pass(scores: list[float], n: int, low: float, high: float) -> bool:
    return len(scores) == n and all(low <= s <= high for s in scores)


async def grm_listwise_group(prompt: Any, texts: list[str], ground_truths: list[Any], *, base_url: str, model: str,
                             api_key_env: str | None, n_iter: int, temperature: float, max_tokens: int, concurrency: int,
                             retries: int, timeout_s: float, answer_tag: str | None, score_min: float, score_max: float,
                             backoff_s: float, max_failure_rate: float, min_calls: int,
                             failure_window: int) -> list[dict[str, Any]]:
    n = len(texts)
    shown, found = zip(*(_extract(t, answer_tag) for t in texts)) if n else ((), ())
    n_iter = max(int(n_iter), 1)
    if answer_tag and not any(found):
        return [{"score": 0.0, "raw_score": 0.0, "n_valid_passes": 0, "n_passes": 0, "answer_found": 0.0,
                 "judge_failure_rate": 0.0, "judge_latency_s": 0.0}] * n
    order = content_order(texts)  # reply k of the prompt is completion order[k]
    place = {i: k for k, i in enumerate(order)}
    messages = listwise_messages(prompt, [shown[i] for i in order])
    batch = await judge_batch([messages], n=n_iter, base_url=base_url, model=model, api_key_env=api_key_env,
                              temperature=temperature, max_tokens=max_tokens, concurrency=concurrency, retries=retries,
                              timeout_s=timeout_s, backoff_s=backoff_s, with_reasoning=False,
                              max_failure_rate=max_failure_rate, min_calls=min_calls, failure_window=failure_window)
    outputs = batch.texts[0]
    passes = [parse_listwise_scores(o) for o in outputs if o is not None]
    valid = [p for p in passes if valid_pass(p, n, score_min, score_max)]
    results = []
    for i in range(n):
        raw = sum(p[place[i]] for p in valid) / len(valid) if valid else 0.0
        results.append({"score": map_score(raw), "raw_score": float(raw), "n_valid_passes": len(valid),
                        "n_passes": n_iter, "answer_found": float(found[i]),
                        "judge_failure_rate": batch.failure_rate, "judge_latency_s": batch.latency_s})
    return results
