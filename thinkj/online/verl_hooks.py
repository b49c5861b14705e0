"""Two additions to verl 0.9.1's legacy trainer: the twin-union GRPO advantage and per-step position diagnostics.

verl imports this module in every one of its processes through ``actor_rollout_ref.model.external_lib`` (set in
configs/verl/base.yaml; verl's ``HFModelConfig`` imports the named module when it is built, in the trainer's
driver too). Neither addition changes what an ordinary GRPO / PPO / Reinforce++ run computes.

* **Advantage estimator ``grpo_twin``** (J4R's EIS-GRPO; ``thinkj.rewards.designs.twins`` has our reading). verl's GRPO
  groups rollouts by ``uid``, which its trainer draws at random per prompt (``RayPPOTrainer.fit``), and hands a
  registered estimator nothing else of the batch; the group of both orders of a comparison needs the ``twin``
  key the RL data carries in ``extra_info``. So the trainer's ``compute_advantage`` is wrapped: for
  ``algorithm.adv_estimator=grpo_twin`` it calls verl's own ``compute_grpo_outcome_advantage`` with the ``twin``
  keys as the group index (``norm_adv_by_std_in_grpo`` as configured); every other estimator goes to verl's
  function unchanged. The estimator is also registered under its name (verl's registry), where, called without
  the twin keys, it stops the run in one line instead of grouping by ``uid``.
* **Position diagnostics** (``pos/a_share``, ``pos/flip_rate``, ``pos/acc_gold_a``, ``pos/acc_gold_b``,
  ``pos/gold_a_share``: ``thinkj.rewards.designs.twins.position_stats``). verl logs a training step's reward extra info
  nowhere but the rollout dump; the trainer's ``compute_data_metrics`` is wrapped to add these, from the ``pred``
  the Think-J presets return and the gold in ``reward_model``, to the step's metrics (console, file and
  tensorboard loggers, ``thinkj train curves``). Rewards without a ``pred`` key add nothing.
* **Held-out judge metrics** (``val-judge/<data_source>/{acc,acc_original,acc_swapped,pair_acc,a_share}``:
  ``thinkj.online.heldout``), at every validation (before training and every ``trainer.test_freq`` steps). verl
  averages each reward key per data source but knows neither a row's order nor its comparison, so during
  validation ``extract_reward`` is wrapped to add three string keys per row from ``extra_info`` and
  ``reward_model`` -- ``val_twin``, ``val_order`` ("original" / "swapped" / "") and ``val_gold`` -- which verl's
  ``process_validation_metrics`` skips (strings) and its validation dump (``trainer.validation_data_dir``) writes;
  ``RayPPOTrainer._val_metrics_update`` is wrapped to add the metrics computed from them and the reward's ``pred``.

The wraps are installed only where verl's trainer module is already imported (its driver) and only after
checking that ``RayPPOTrainer.fit`` and ``_validate`` still call the functions by these names: after a verl upgrade
that changes them, :class:`StaleHook` names what moved instead of silently not running.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from verl.trainer.ppo import core_algos

from thinkj.online.heldout import judge_stats, order_name
from thinkj.rewards.designs.twins import position_stats

ESTIMATOR = "grpo_twin"
VAL_KEYS = ("val_twin", "val_order", "val_gold")  # added to validation's reward extra info, strings only
VAL_PREFIX = "val-judge"
TRAINER_MODULE = "verl.trainer.ppo.ray_trainer"
_WRAPPED = "__thinkj_wrapped__"


class StaleHook(RuntimeError):
    """verl's trainer no longer calls a function the way these hooks expect."""


def _plain(value: Any) -> Any:
    if hasattr(value, "items") and not isinstance(value, str):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def twin_keys(non_tensor_batch: dict[str, Any]) -> list[str]:
    """Each row's comparison key (``extra_info.twin``); one line naming the first row without one."""
    infos = non_tensor_batch.get("extra_info")
    if infos is None:
        raise ValueError(f"{ESTIMATOR}: the batch has no extra_info column; write the RL data with both orders "
                         "(write_verl_parquet(..., twins=True), `thinkj data verl-parquet --twins`)")
    keys = []
    for row, info in enumerate(infos):
        info = _plain(info) if info is not None else {}
        twin = info.get("twin") if isinstance(info, dict) else None
        if twin in (None, ""):
            raise ValueError(f"{ESTIMATOR}: batch row {row} has no extra_info.twin (got {str(info)[:120]}); write the "
                             "RL data with both orders (write_verl_parquet(..., twins=True))")
        keys.append(str(twin))
    return keys


@core_algos.register_adv_est(ESTIMATOR)
def twin_grpo_advantage(token_level_rewards: Any, response_mask: Any, index: Any = None, config: Any = None,
                        twin_index: list[str] | None = None, **_: Any) -> tuple[Any, Any]:
    """GRPO over the union of both orders' rollouts (``twin_index``: each rollout's comparison key)."""
    if twin_index is None:
        raise RuntimeError(f"algorithm.adv_estimator={ESTIMATOR} needs the twin keys, which only the wrapped "
                           "compute_advantage passes: set actor_rollout_ref.model.external_lib=thinkj.online.verl_hooks "
                           "(configs/verl/base.yaml does) and run verl's legacy trainer (trainer.use_v1=false)")
    norm = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
    return core_algos.compute_grpo_outcome_advantage(token_level_rewards=token_level_rewards,
                                                     response_mask=response_mask,
                                                     index=np.array(twin_index, dtype=object),
                                                     norm_adv_by_std_in_grpo=norm)


def batch_position_stats(non_tensor_batch: dict[str, Any]) -> dict[str, float]:
    """:func:`thinkj.rewards.designs.twins.position_stats` of a verl batch ({} when the reward returns no ``pred``)."""
    preds = non_tensor_batch.get("pred")
    truths = non_tensor_batch.get("reward_model")
    if preds is None or truths is None:
        return {}
    golds = []
    for truth in truths:
        gt = _plain(truth).get("ground_truth") if truth is not None else None
        golds.append(gt.get("label") if isinstance(gt, dict) else gt)
    preds = [str(p) for p in preds]
    twins = orders = None
    infos = non_tensor_batch.get("extra_info")
    if infos is not None:
        plain = [_plain(i) if i is not None else {} for i in infos]
        if all(isinstance(i, dict) and i.get("twin") not in (None, "") and i.get("order") in (0, 1) for i in plain):
            twins, orders = [i["twin"] for i in plain], [i["order"] for i in plain]
    return position_stats(preds, golds, twins, orders)


def _gold_label(truth: Any) -> str:
    gt = _plain(truth).get("ground_truth") if isinstance(_plain(truth), dict) else None
    label = gt.get("label") if isinstance(gt, dict) else gt
    return label if isinstance(label, str) else ""


def validation_keys(non_tensor_batch: dict[str, Any]) -> dict[str, np.ndarray]:
    """:data:`VAL_KEYS` for every row of a validation batch (empty strings where a row names no twin or gold)."""
    truths = non_tensor_batch.get("reward_model")
    n = len(truths) if truths is not None else 0
    infos = non_tensor_batch.get("extra_info")
    infos = [None] * n if infos is None else infos
    named = [order_name(_plain(info) if info is not None else None) for info in infos]
    golds = [_gold_label(t) for t in truths] if truths is not None else []
    return {"val_twin": np.array([t for t, _ in named], dtype=object),
            "val_order": np.array([o for _, o in named], dtype=object),
            "val_gold": np.array(golds, dtype=object)}


def validation_metrics(data_sources: Any, extras: dict[str, list[Any]]) -> dict[str, float]:
    """``val-judge/<data_source>/<metric>`` from one validation's reward extra info ({} without ``pred``)."""
    preds = extras.get("pred")
    if preds is None or any(k not in extras for k in VAL_KEYS):
        return {}
    rows: dict[str, list[int]] = {}
    for i, source in enumerate(data_sources):
        rows.setdefault(str(source), []).append(i)
    metrics = {}
    for source, idx in rows.items():
        stats = judge_stats([str(preds[i]) for i in idx], [extras["val_gold"][i] for i in idx],
                            [extras["val_twin"][i] for i in idx], [extras["val_order"][i] for i in idx])
        metrics.update({f"{VAL_PREFIX}/{source}/{name}": value for name, value in stats.items()})
    return metrics


def _require_call(function: Callable, needle: str) -> None:
    name = getattr(function, "__qualname__", repr(function))
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError) as err:
        raise StaleHook(f"cannot read {name}'s source: {err}") from None
    if needle not in source:
        raise StaleHook(f"{name} no longer contains {needle!r}: the thinkj hook on it would not run "
                        "(thinkj/online/verl_hooks.py)")


def install(trainer_module: Any) -> None:
    """Wrap ``compute_advantage``, ``compute_data_metrics``, ``extract_reward`` and
    ``RayPPOTrainer._val_metrics_update`` of verl's trainer module (once)."""
    original_advantage = trainer_module.compute_advantage
    original_metrics = trainer_module.compute_data_metrics
    original_extract = trainer_module.extract_reward
    trainer_cls = trainer_module.RayPPOTrainer
    original_val_update = trainer_cls._val_metrics_update
    if getattr(original_advantage, _WRAPPED, False):
        return
    _require_call(trainer_cls.fit, "batch = compute_advantage(")
    _require_call(trainer_cls.fit, "compute_data_metrics(batch=batch")
    _require_call(trainer_cls._validate, "extract_reward(test_batch)")
    _require_call(trainer_cls._validate, "self._val_metrics_update(")

    def compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(adv_estimator, "value", adv_estimator)
        if name != ESTIMATOR:
            return original_advantage(data, adv_estimator, *args, **kwargs)
        if "response_mask" not in data.batch.keys():
            data.batch["response_mask"] = trainer_module.compute_response_mask(data)
        norm = bool(kwargs.get("norm_adv_by_std_in_grpo", True))
        advantages, returns = twin_grpo_advantage(data.batch["token_level_rewards"], data.batch["response_mask"],
                                                  config={"norm_adv_by_std_in_grpo": norm},
                                                  twin_index=twin_keys(data.non_tensor_batch))
        data.batch["advantages"] = advantages
        data.batch["returns"] = returns
        return data

    def compute_data_metrics(*args: Any, **kwargs: Any) -> dict[str, Any]:
        metrics = original_metrics(*args, **kwargs)
        batch = kwargs.get("batch", args[0] if args else None)
        if batch is not None:
            metrics.update(batch_position_stats(batch.non_tensor_batch))
        return metrics

    def extract_reward(batch: Any) -> Any:
        reward_tensor, extra = original_extract(batch)
        if batch.meta_info.get("validate"):  # training steps are left as verl computes them
            extra = {**extra, **validation_keys(batch.non_tensor_batch)}
        return reward_tensor, extra

    def _val_metrics_update(self: Any, data_sources: Any, sample_uids: Any, reward_extra_infos_dict: dict,
                            sample_turns: Any) -> dict[str, Any]:
        extras = dict(reward_extra_infos_dict)
        ours = {key: extras.pop(key) for key in VAL_KEYS if key in extras}
        metrics = original_val_update(self, data_sources, sample_uids, extras, sample_turns)
        metrics.update(validation_metrics(data_sources, {**extras, **ours}))
        return metrics

    setattr(compute_advantage, _WRAPPED, True)
    trainer_module.compute_advantage = compute_advantage
    trainer_module.compute_data_metrics = compute_data_metrics
    trainer_module.extract_reward = extract_reward
    trainer_cls._val_metrics_update = _val_metrics_update


if TRAINER_MODULE in sys.modules:  # the trainer's driver; verl's workers never call these two functions
    install(sys.modules[TRAINER_MODULE])
