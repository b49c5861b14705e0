"""Reward presets by name: one registry behind the verl and TRL adapters.

``Preset`` (and ``GroupReward``) live in ``thinkj.rewards.presets``, the rule every adapter applies to their
weights in ``thinkj.rewards.weights``; every reward is registered in ``thinkj.rewards.registry``. The rewards
themselves are ``thinkj.rewards.designs``; ``thinkj.rewards.adapters`` hands them to verl and TRL.
"""

from __future__ import annotations

from thinkj.rewards.designs.judge import REWARD_KEYS
from thinkj.rewards.presets import Preset, RewardFn
from thinkj.rewards.registry import PRESETS, get_preset, register_preset

__all__ = ["PRESETS", "REWARD_KEYS", "Preset", "RewardFn", "get_preset", "register_preset"]
