"""The keyword arguments verl 0.9.1 hands a ``custom_reward_function`` besides the user's ``reward_kwargs``.

``verl/trainer/ppo/reward.py`` merges ``reward.custom_reward_function.reward_kwargs`` into every call; the
reward-loop managers (naive, limited, dapo, gdpo, remote in ``verl/experimental/reward_loop/reward_manager``)
call ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)`` and add
:data:`VERL_CALL_KWARGS` only when a reward-model router runs. Everything else in a call came from the user's
``reward_kwargs`` and must be a setting the reward knows (``thinkj.rewards.weights``).
"""

from __future__ import annotations

VERL_CALL_KWARGS = ("reward_router_address", "reward_model_tokenizer")
WHERE = "reward.custom_reward_function.reward_kwargs."  # how a setting is named in messages
GROUP_KEYS = ("group_preset", "group_size", "group_wait_s")  # read by thinkj.rewards.adapters.verl_group only
