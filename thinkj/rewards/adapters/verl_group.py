"""verl reward-loop manager for group-level rewards (XML judge, GRM listwise, Think-J round robin, ...).

verl 0.9.1's reward loop scores one sample per ``run_single`` call (streamed from the agent loop as each
rollout finishes, or chunked by ``RewardLoopManager.compute_rm_score``). This manager parks each sample
under its ``uid`` (verl gives the n rollouts of one prompt the same uid) and scores the group when
``group_size`` samples have arrived, or ``group_wait_s`` (300 s) after the last arrival: then the partial
group is scored and ``group_size`` in the extra info shows how many it had. The wait must outlast the gap
between the first and last rollout of a group; validation groups have ``val_kwargs.n`` members, so set
``actor_rollout_ref.rollout.val_kwargs.n`` to ``rollout.n`` (the configs do) or validation waits the full
timeout. All samples of a group must reach the same manager, so run ONE reward worker (enforced).
Overrides (on top of an ordinary GRPO command)::

    reward.num_workers=1
    reward.reward_manager.source=importlib
    reward.reward_manager.module.path=pkg://thinkj.rewards.adapters.verl_group
    reward.reward_manager.name=GroupRewardManager
    ++reward.custom_reward_function.reward_kwargs.group_preset=xml_judge
    ++reward.custom_reward_function.reward_kwargs.w_fmt=0.2          # any weight of the group preset
    actor_rollout_ref.rollout.val_kwargs.n='${actor_rollout_ref.rollout.n}'
    ++reward.custom_reward_function.reward_kwargs.group_wait_s=300   # optional

``group_size`` defaults to ``actor_rollout_ref.rollout.n``. The returned extra info has the preset's keys
plus ``group_size`` and ``group_skipped`` for every sample, as verl requires. Every reward_kwargs entry is checked
when the manager is built (``thinkj.rewards.adapters.verl.group_settings``): an unknown name, or a NaN, negative or
non-numeric weight, stops verl at start-up with one line naming the group reward, the setting and the known
names; ``preset`` (the per-sample adapter's key, set in configs/verl/base.yaml) is set aside. A bad ground truth
is a data error the reward records (``gold_error``), never an exception.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from thinkj.rewards.adapters.verl import group_settings


@dataclass
class _Pending:
    prompt: Any
    texts: list[str] = field(default_factory=list)
    truths: list[Any] = field(default_factory=list)
    futures: list[asyncio.Future] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


def _plain(value: Any) -> Any:
    """numpy / OmegaConf containers -> plain Python (ground truths arrive as numpy objects)."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, dict) or (hasattr(value, "items") and not isinstance(value, str)):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


async def decode_rollout(tokenizer: Any, data: DataProto) -> tuple[Any, str, Any]:
    """The one rollout a reward loop worker receives: (item, response text without padding, ground truth)."""
    item = data[-1:][0]
    response_ids = item.batch["responses"]
    valid = int(item.batch["attention_mask"][-response_ids.shape[-1]:].sum())
    loop = asyncio.get_running_loop()
    # decoding off the event loop: the other rollouts of the group keep arriving meanwhile
    text = await loop.run_in_executor(None, lambda: tokenizer.decode(response_ids[:valid], skip_special_tokens=True))
    return item, text, _plain(item.non_tensor_batch["reward_model"]["ground_truth"])


class GroupRewardManager(RewardManagerBase):
    def __init__(self, config, tokenizer, compute_score=None, reward_router_address=None, reward_model_tokenizer=None):
        super().__init__(config, tokenizer, compute_score)
        workers = int(config.reward.get("num_workers", 1) or 1)
        if workers != 1:
            # the agent loop sends each sample to a random worker: groups would be split and scored partially
            raise ValueError(f"GroupRewardManager needs reward.num_workers=1 (got {workers}): all samples of a group "
                             "must reach the same manager")
        fn_cfg = config.reward.custom_reward_function
        kwargs = dict(_plain(fn_cfg.get("reward_kwargs", None) or {}))
        # every setting checked here, at start-up: a typo or a NaN weight fails before the first rollout
        self.reward, self.group_size, self.wait_s, self.weights = group_settings(
            kwargs, rollout_n=int(config.actor_rollout_ref.rollout.n))
        self._pending: dict[str, _Pending] = {}

    async def run_single(self, data: DataProto) -> dict:
        item, text, truth = await decode_rollout(self.tokenizer, data)
        loop = asyncio.get_running_loop()
        nt = item.non_tensor_batch
        prompt = _plain(nt["raw_prompt"]) if "raw_prompt" in nt else None
        if prompt is None:
            prompt_ids = item.batch["prompts"]
            prompt_mask = item.batch["attention_mask"][:prompt_ids.shape[-1]].bool()
            prompt = self.tokenizer.decode(prompt_ids[prompt_mask], skip_special_tokens=True)
        uid = str(nt["uid"]) if "uid" in nt else repr(prompt)

        future = loop.create_future()
        group = self._pending.setdefault(uid, _Pending(prompt))
        group.texts.append(text)
        group.truths.append(truth)
        group.futures.append(future)
        if group.timer is not None:
            group.timer.cancel()
        if len(group.texts) >= self.group_size:
            await self._flush(uid)
        else:
            group.timer = loop.call_later(self.wait_s, lambda: asyncio.ensure_future(self._flush(uid)))
        result = await future
        return {"reward_score": float(result["score"]), "reward_extra_info": result}

    async def _flush(self, uid: str) -> None:
        group = self._pending.pop(uid, None)
        if group is None:
            return
        if group.timer is not None:
            group.timer.cancel()
        try:
            results = await self.reward.ascore(group.prompt, group.texts, group.truths, **self.weights)
        except Exception as err:  # a bad ground truth must surface in every waiting sample, not hang them
            for fut in group.futures:
                if not fut.done():
                    fut.set_exception(err)
            return
        for fut, result in zip(group.futures, results):
            if not fut.done():
                fut.set_result(result)
