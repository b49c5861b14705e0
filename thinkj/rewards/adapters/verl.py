"""verl adapter: ``compute_score`` for ``reward.custom_reward_function``.

verl 0.9 calls it once per sample with keyword arguments. Select the preset and weights with
reward_kwargs, e.g.::

    reward.custom_reward_function.path=pkg://thinkj.rewards.adapters.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.preset=thinkj_llama
    +reward.custom_reward_function.reward_kwargs.w_str=0.2

verl merges ``reward_kwargs`` into every call (``verl/trainer/ppo/reward.py``) and its reward-loop managers add
only ``reward_router_address`` and ``reward_model_tokenizer`` (when a reward-model router runs;
``thinkj.rewards.adapters.verl_kwargs``). Every other keyword must be ``preset`` or a weight of that preset with a usable
value (``thinkj.rewards.weights``): a typo such as ``w_strr=0.0`` raises a one-line ``RewardWeightError`` naming
the preset, the setting and the known names, instead of training with the default weight. The check runs at the
first call -- under ``trainer.val_before_train`` (on in configs/verl/base.yaml) that is the validation before
step 1, so no update is made with a bad weight -- and :func:`check_reward_kwargs` runs it on a composed config
before a launch. The group-manager keys (``group_preset``, ``group_size``, ``group_wait_s``) are refused here:
they do nothing without ``thinkj.rewards.adapters.verl_group.GroupRewardManager``.

The returned dict has the same keys for every sample (verl crashes on ragged keys); ``score`` is the
reward and the other keys are logged by verl as ``reward_extra_info``. A bad ground truth never raises: it is
``gold_error`` = 1 in that dict (``thinkj.rewards.gold``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from thinkj.rewards.adapters.verl_kwargs import GROUP_KEYS, VERL_CALL_KWARGS, WHERE
from thinkj.rewards.designs.twins import needs_twins
from thinkj.rewards.presets import Preset, RewardFn
from thinkj.rewards.registry import get_group_reward, get_preset
from thinkj.rewards.weights import RewardWeightError, check_value

DEFAULT_PRESET = "thinkj_qwen"
__all__ = ["DEFAULT_PRESET", "GROUP_KEYS", "VERL_CALL_KWARGS", "WHERE", "check_reward_kwargs", "compute_score",
           "group_settings", "preset_settings"]


def preset_settings(kwargs: Mapping[str, Any], *, twins: bool = False) -> tuple[Preset, dict[str, Any]]:
    """(the preset, its checked weights) from the per-sample adapter's keyword arguments (verl's own set aside).

    ``w_con`` > 0 is refused unless ``twins`` (the twin reward manager, ``thinkj.rewards.adapters.verl_twin``, pays it)."""
    settings = {k: v for k, v in kwargs.items() if k not in VERL_CALL_KWARGS}
    if twins:
        settings.pop("twin_wait_s", None)  # the twin manager's own setting
    name = settings.pop("preset", DEFAULT_PRESET)
    preset = get_preset(name)
    group_keys = sorted(k for k in settings if k in GROUP_KEYS)
    if group_keys:
        raise RewardWeightError(
            f"{WHERE}{group_keys[0]}: read only by the group reward manager, and this run scores with the "
            f"per-sample preset {name!r}; add reward.reward_manager.source=importlib "
            "reward.reward_manager.module.path=pkg://thinkj.rewards.adapters.verl_group "
            "reward.reward_manager.name=GroupRewardManager (docs/reward_presets.md), or drop the key",
            weight=group_keys[0], detail="needs the group reward manager")
    weights = preset.weights(settings, where=WHERE, also_known=("preset", *GROUP_KEYS))
    problem = "" if twins else needs_twins(weights, "the per-sample reward (reward.custom_reward_function)")
    if problem:
        raise RewardWeightError(f"{WHERE}{problem}", weight="w_con", detail="needs twins")
    return preset, weights


def check_reward_kwargs(reward_kwargs: Mapping[str, Any] | None, *, group_manager: bool = False,
                        twin_manager: bool = False) -> None:
    """Run the adapters' checks on a composed config's ``reward.custom_reward_function.reward_kwargs`` (before a
    launch): the per-sample preset and weights, with ``group_manager`` the group reward and its settings, with
    ``twin_manager`` the preset and weights the twin reward manager reads."""
    kwargs = dict(reward_kwargs or {})
    if twin_manager:
        preset_settings(kwargs, twins=True)
    elif group_manager:
        group_settings(kwargs, rollout_n=1)
    else:
        preset_settings(kwargs)


def group_settings(kwargs: Mapping[str, Any], *, rollout_n: int) -> tuple[Any, int, float, dict[str, Any]]:
    """(group reward, group size, wait in seconds, checked weights) from the group manager's reward_kwargs.

    ``preset`` (the per-sample adapter's key, set by configs/verl/base.yaml) is set aside."""
    from thinkj.rewards.presets import GroupReward

    settings = {k: v for k, v in kwargs.items() if k != "preset"}
    name = settings.pop("group_preset", "xml_judge")
    reward: GroupReward = get_group_reward(str(name))
    size = settings.pop("group_size", None)
    size, problem = check_value("group_size", rollout_n if size is None else size, 1)
    if problem or size < 1:
        raise RewardWeightError(f"{WHERE}group_size {problem or 'must be >= 1'} (group reward {name!r})",
                                weight="group_size", detail=problem)
    wait, problem = check_value("group_wait_s", settings.pop("group_wait_s", 300.0), 300.0)
    if problem or wait <= 0:
        raise RewardWeightError(f"{WHERE}group_wait_s {problem or 'must be > 0'} (group reward {name!r})",
                                weight="group_wait_s", detail=problem)
    weights = reward.weights(settings, where=WHERE, also_known=("preset", *GROUP_KEYS))
    weights = {k: v for k, v in weights.items() if k in settings}  # only the overrides go on to ascore
    return reward, int(size), float(wait), weights


@functools.lru_cache(maxsize=64)
def _bound(items: tuple[tuple[str, Any], ...]) -> RewardFn:
    preset, weights = preset_settings(dict(items))
    return functools.partial(preset.fn, **weights)


def _scorer(kwargs: dict[str, Any]) -> RewardFn:
    """The checked, bound preset for these keyword arguments (checked once per distinct set)."""
    key = tuple(sorted((k, v) for k, v in kwargs.items() if k not in VERL_CALL_KWARGS))
    try:
        hash(key)
    except TypeError:  # an unhashable value (a list): check it on every call
        preset, weights = preset_settings(kwargs)
        return functools.partial(preset.fn, **weights)
    return _bound(key)


def compute_score(data_source: str | None = None, solution_str: str = "", ground_truth: Any = None,
                  extra_info: dict | None = None, **kwargs: Any) -> dict[str, Any]:
    return _scorer(kwargs)(solution_str, ground_truth)
