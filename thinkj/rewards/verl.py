"""verl adapter: ``compute_score`` for ``reward.custom_reward_function``.

verl 0.9 calls it once per sample with keyword arguments. Select the preset and weights with
reward_kwargs, e.g.::

    reward.custom_reward_function.path=pkg://thinkj.rewards.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.preset=thinkj_llama
    +reward.custom_reward_function.reward_kwargs.w_str=0.2

The returned dict has the same keys for every sample (verl crashes on ragged keys); ``score`` is the
reward and the other keys are logged by verl as ``reward_extra_info``.
"""

from __future__ import annotations

from typing import Any

from thinkj.rewards.registry import get_preset

DEFAULT_PRESET = "thinkj_qwen"


def compute_score(data_source: str | None = None, solution_str: str = "", ground_truth: Any = None,
                  extra_info: dict | None = None, preset: str = DEFAULT_PRESET, **kwargs: Any) -> dict[str, Any]:
    # verl also passes bookkeeping keywords (e.g. reward_router_address, tokenizer); only weights go on.
    reward = get_preset(preset)
    weights = {k: v for k, v in kwargs.items() if k in reward.defaults}
    return reward(solution_str, ground_truth, **weights)
