"""verl reward-loop manager that scores both orders of a comparison together: the Think-J reward plus ``w_con`` x the
consistency term (``thinkj.rewards.designs.twins`` defines it and says how a rollout is paired with its twin's group).

The data has both orders of every comparison (``thinkj.export.verl.write_verl_parquet(twins=True)``): each row's
``extra_info`` holds ``twin`` (the comparison's key, shared by its two orders) and ``order`` (0 / 1). verl 0.9.1's
reward loop hands this manager one rollout at a time (``run_single``, streamed from the agent loop); the manager
scores it with the per-sample preset at once and parks the result under its ``twin`` key until the ``2 n``
rollouts of both orders have arrived (``n`` = ``actor_rollout_ref.rollout.n``), or ``twin_wait_s`` (300 s) after
the last arrival; then it adds the consistency term and answers every waiting rollout. A twin whose other order
never arrives (its row was filtered as overlong, or the batch split the two) earns consistency 0 and
``twin_missing`` = 1 in the logged extra info. configs/verl/grpo_consistent.yaml sets it up::

    reward.num_workers=1                                   # every rollout of a comparison reaches one manager
    reward.reward_manager.source=importlib
    reward.reward_manager.module.path=pkg://thinkj.rewards.adapters.verl_twin
    reward.reward_manager.name=TwinRewardManager
    actor_rollout_ref.rollout.val_kwargs.n=${actor_rollout_ref.rollout.n}
    ++reward.custom_reward_function.reward_kwargs.w_con=1.0

The reward kwargs are the per-sample adapter's (``preset`` and its weights, ``w_con`` included), checked when the
manager is built: a typo, a NaN or a negative weight stops verl at start-up in one line. The extra info per
rollout: the preset's keys plus ``consistency``, ``twin_missing``, ``twin_size``, ``twin`` and ``order``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from thinkj.rewards.adapters.verl import WHERE, preset_settings
from thinkj.rewards.adapters.verl_group import _plain, decode_rollout
from thinkj.rewards.designs.twins import consistency_terms
from thinkj.rewards.weights import RewardWeightError, check_value


@dataclass
class _Twin:
    results: list[dict[str, Any]] = field(default_factory=list)
    golds: list[Any] = field(default_factory=list)
    orders: list[int] = field(default_factory=list)
    futures: list[asyncio.Future] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


def twin_of(extra_info: Any, where: str = "a rollout") -> tuple[str, int]:
    """(twin key, order) from a row's ``extra_info``; one line naming what is missing otherwise."""
    info = _plain(extra_info) if extra_info is not None else {}
    twin = info.get("twin") if isinstance(info, dict) else None
    order = info.get("order") if isinstance(info, dict) else None
    if twin in (None, "") or order not in (0, 1):
        raise ValueError(f"{where}: extra_info has no twin key and order (0/1), got {str(info)[:120]}; write the RL "
                         "data with both orders (thinkj.export.verl.write_verl_parquet(..., twins=True), "
                         "`thinkj data export-verl --twins`)")
    return str(twin), int(order)


class TwinRewardManager(RewardManagerBase):
    def __init__(self, config, tokenizer, compute_score=None, reward_router_address=None, reward_model_tokenizer=None):
        super().__init__(config, tokenizer, compute_score)
        workers = int(config.reward.get("num_workers", 1) or 1)
        if workers != 1:
            raise ValueError(f"TwinRewardManager needs reward.num_workers=1 (got {workers}): both orders of a "
                             "comparison must reach the same manager")
        rollout = config.actor_rollout_ref.rollout
        n, val_n = int(rollout.n), int(rollout.val_kwargs.get("n", 1))
        if val_n != n:
            # validation rollouts arrive with val_kwargs.n per prompt: groups would wait the whole timeout
            raise ValueError(f"TwinRewardManager needs actor_rollout_ref.rollout.val_kwargs.n = rollout.n ({n}), got "
                             f"{val_n}: set actor_rollout_ref.rollout.val_kwargs.n=${{actor_rollout_ref.rollout.n}}")
        kwargs = dict(_plain(config.reward.custom_reward_function.get("reward_kwargs", None) or {}))
        wait, problem = check_value("twin_wait_s", kwargs.get("twin_wait_s", 300.0), 300.0)
        if problem or wait <= 0:
            raise RewardWeightError(f"{WHERE}twin_wait_s {problem or 'must be > 0'}", weight="twin_wait_s",
                                    detail=problem)
        self.preset, self.weights = preset_settings(kwargs, twins=True)
        if "w_con" not in self.preset.defaults:  # the twin scorer reads the verdict ("pred") the Think-J presets return
            raise RewardWeightError(f"{WHERE}preset: TwinRewardManager scores with a Think-J preset (thinkj_qwen, "
                                    f"thinkj_llama, thinkj_subtractive), got {self.preset.name!r}", weight="preset",
                                    detail="not a Think-J preset")
        self.w_con = float(self.weights.get("w_con", 0.0))
        self.size, self.wait_s = 2 * n, float(wait)
        self._pending: dict[str, _Twin] = {}

    async def run_single(self, data: DataProto) -> dict:
        item, text, truth = await decode_rollout(self.tokenizer, data)
        loop = asyncio.get_running_loop()
        nt = item.non_tensor_batch
        twin, order = twin_of(nt.get("extra_info"))
        result = dict(self.preset.fn(text, truth, **self.weights))  # the per-sample terms; w_con is added below

        future = loop.create_future()
        group = self._pending.setdefault(twin, _Twin())
        group.results.append(result)
        group.golds.append(truth.get("label") if isinstance(truth, dict) else truth)
        group.orders.append(order)
        group.futures.append(future)
        if group.timer is not None:
            group.timer.cancel()
        if len(group.results) >= self.size:
            self._flush(twin)
        else:
            group.timer = loop.call_later(self.wait_s, lambda: self._flush(twin))
        final = await future
        return {"reward_score": float(final["score"]), "reward_extra_info": final}

    def _flush(self, twin: str) -> None:
        group = self._pending.pop(twin, None)
        if group is None:
            return
        if group.timer is not None:
            group.timer.cancel()
        terms = consistency_terms([r["pred"] for r in group.results], group.golds, [twin] * len(group.results),
                                  group.orders)
        for future, result, term, order in zip(group.futures, group.results, terms, group.orders):
            result.update(term, twin_size=float(len(group.results)), twin=twin, order=float(order))
            result["score"] = float(result["score"]) + self.w_con * term["consistency"]
            if not future.done():
                future.set_result(result)
