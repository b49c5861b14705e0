"""The adapters that hand the registered rewards to an RL engine: verl's ``custom_reward_function`` (``verl``) and
reward-loop managers (``verl_group``, ``verl_twin``; the keywords verl adds to a call: ``verl_kwargs``), TRL's
``reward_funcs`` callables (``trl`` per sample, ``trl_group`` per group).

verl imports them by module path (``pkg://thinkj.rewards.adapters.verl`` in ``configs/verl/base.yaml``).
"""
