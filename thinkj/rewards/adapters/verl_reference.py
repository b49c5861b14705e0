"""verl adapter of the reference-mode Think-J judge reward (:func:`thinkj.rewards.designs.pairwise_rm.reference_score`):
the candidate against ``ground_truth["reference"]`` in both orders, per sample.

verl, reference mode (ground truth ``{"reference": "..."}``, the conversation in ``extra_info["prompt"]``)::

    reward.custom_reward_function.path=pkg://thinkj.rewards.adapters.verl_reference
    reward.custom_reward_function.name=compute_score
    ++reward.custom_reward_function.reward_kwargs.base_url=http://JUDGE_HOST:8000/v1
"""

from __future__ import annotations

from typing import Any

from thinkj.rewards.adapters.verl_kwargs import VERL_CALL_KWARGS, WHERE
from thinkj.rewards.designs.pairwise_rm import PAIRWISE_DEFAULTS, PAIRWISE_KINDS, reference_score
from thinkj.rewards.weights import check_weights


async def compute_score(data_source: str | None = None, solution_str: str = "", ground_truth: Any = None,
                        extra_info: dict | None = None, **kwargs: Any) -> dict[str, Any]:
    """verl ``custom_reward_function`` (async; verl 0.9.1's reward managers await coroutine functions).

    Every reward_kwargs entry must be a setting of :data:`PAIRWISE_DEFAULTS` with a usable value (checked as the
    per-sample adapter checks its weights, ``thinkj.rewards.weights``); verl's own keywords and the base config's
    ``preset`` (read by ``thinkj.rewards.adapters.verl``, not here) are set aside."""
    settings = {k: v for k, v in kwargs.items() if k not in VERL_CALL_KWARGS and k != "preset"}
    weights = check_weights("thinkj.rewards.adapters.verl_reference.compute_score", PAIRWISE_DEFAULTS, settings,
                            kinds=PAIRWISE_KINDS, where=WHERE)
    prompt = (extra_info or {}).get("prompt") or (extra_info or {}).get("question") or ""
    return await reference_score(prompt, solution_str, ground_truth, **weights)
