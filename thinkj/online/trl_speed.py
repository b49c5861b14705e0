"""Cheaper TRL rollouts on CPU, the GRPO algorithm unchanged (measured by ``scripts/speed/rl_step.py``).

TRL 0.24 generates with the policy itself: under ``bf16=True`` every decoding step runs through accelerate's
per-forward autocast, which casts all weights to bf16 again for each new token, and every rollout runs its whole
prompt through the model although the judge prompts share ~200 of their ~265 tokens. Two changes, both to how the
rollouts are computed, not to what is sampled from or how they are scored:

* shared prefix: the token prefix common to every prompt of the generation batch runs through the model once; its
  KV cache is repeated for every row, whose own tokens follow after masked padding (the layout of
  :mod:`thinkj.inference.hf`, positions from the attention mask as in a left-padded batch);
* bf16 rollout weights, only where the loss itself runs in bf16 autocast (``bf16=True``, which the CPU path sets
  only on CPUs with native bf16): a bf16 copy of the policy, refreshed from the fp32 master weights once per
  optimizer step, samples the completions -- the rounding the policy's forward under autocast applies anyway, done
  once per step instead of once per token (as verl's vLLM rollouts sample from bf16 weights of an fp32 actor).

Both are CPU-only (``build_trainer`` turns them on for a CPU run); TRL's vLLM rollouts (``use_vllm``, a GPU only:
:mod:`thinkj.online.trl_batching`) pass through untouched, and with gradient checkpointing the loss's log-probs
take TRL's own path.
"""

from __future__ import annotations

from typing import Any

from thinkj.inference.hf import MIN_SHARED_PREFIX, shared_prefix_length


def shared_prefix_generate(model: Any, input_ids: Any, attention_mask: Any, pad_id: int,
                           generate: Any = None, **kwargs: Any) -> Any:
    """``model.generate`` (or ``generate``) of a left-padded batch, its common prefix computed once; returns ids of
    the same width as ``input_ids`` followed by the new tokens, like ``generate`` on the padded batch."""
    import torch

    generate = generate or model.generate

    rows = [ids[mask.bool()].tolist() for ids, mask in zip(input_ids, attention_mask)]
    k = shared_prefix_length(rows)
    if k < MIN_SHARED_PREFIX:
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    width = input_ids.size(1)  # TRL pads to the longest prompt, so width - k holds every row's own tokens
    ids = torch.tensor([r[:k] + [pad_id] * (width - len(r)) + r[k:] for r in rows], device=input_ids.device)
    mask = torch.tensor([[1] * k + [0] * (width - len(r)) + [1] * (len(r) - k) for r in rows],
                        device=input_ids.device)
    with torch.no_grad():
        cache = model(input_ids=ids[:1, :k], use_cache=True).past_key_values
    cache.batch_repeat_interleave(len(rows))
    return generate(input_ids=ids, attention_mask=mask, past_key_values=cache, **kwargs)


def shared_prefix_logps(trainer: Any, model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                        batch_size: int | None = None, compute_entropy: bool = False) -> tuple[Any, Any] | None:
    """TRL's ``_get_per_token_logps_and_entropies`` (text only) with the prompts' common prefix run once per chunk;
    None where no prefix is worth sharing. Rows are TRL's ``[left pads][prompt][completion][right pads]``; the
    prompt part is laid out as ``[prefix][pads][rest]`` and positions come from the mask, so every token sees the
    same relative positions as in TRL's layout. The prefix's KV cache is repeated per row inside the autograd
    graph: the loss's gradient reaches the prefix through every row, as before."""
    import torch
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    width = input_ids.size(1)
    start = width - logits_to_keep  # the completions' first column (prompts are left-padded to this width)
    prompts = [ids[:start][mask[:start].bool()].tolist() for ids, mask in zip(input_ids, attention_mask)]
    k = shared_prefix_length(prompts)
    if k < MIN_SHARED_PREFIX:
        return None
    pad = trainer.processing_class.pad_token_id  # padded columns are masked
    ids = torch.tensor([r[:k] + [pad] * (start - len(r)) + r[k:] for r in prompts], device=input_ids.device)
    mask = torch.tensor([[1] * k + [0] * (start - len(r)) + [1] * (len(r) - k) for r in prompts],
                        device=input_ids.device)
    ids = torch.cat([ids, input_ids[:, start:]], dim=1)
    mask = torch.cat([mask, attention_mask[:, start:]], dim=1)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    batch_size = batch_size or ids.size(0)
    all_logps, all_entropies = [], []
    for first in range(0, ids.size(0), batch_size):
        chunk = slice(first, first + batch_size)
        rows = ids[chunk].size(0)
        cache = model(input_ids=ids[:1, :k], use_cache=True).past_key_values
        cache.batch_repeat_interleave(rows)
        logits = model(input_ids=ids[chunk, k:], attention_mask=mask[chunk], position_ids=positions[chunk, k:],
                       past_key_values=cache, use_cache=True, logits_to_keep=logits_to_keep + 1).logits
        logits = logits[:, :-1, :][:, -logits_to_keep:, :] / trainer.temperature
        all_logps.append(selective_log_softmax(logits, ids[chunk, -logits_to_keep:]))
        if compute_entropy:
            with torch.no_grad():
                all_entropies.append(entropy_from_logits(logits))
    return torch.cat(all_logps, dim=0), torch.cat(all_entropies, dim=0) if compute_entropy else None


def fast_rollout_trainer(base: Any, *, prefix_cache: bool, bf16_weights: bool) -> Any:
    """``base`` (a GRPOTrainer class) whose transformers rollouts use the shared prefix and/or bf16 weights."""
    if not (prefix_cache or bf16_weights):
        return base

    class FastRolloutGRPOTrainer(base):
        def _rollout_model(self, policy: Any) -> Any:
            """The model that samples: the policy, or its bf16 copy refreshed once per optimizer step."""
            import torch
            from transformers import AutoModelForCausalLM

            if not bf16_weights:
                return policy
            if getattr(self, "_bf16_rollout", None) is None:
                # eager attention: decoding one token against a masked cache, sdpa's CPU kernel took 1.6 ms a layer
                # in bf16, and a step 105 instead of 89 ms (8 rows, SmolLM2); the same attention up to rounding
                self._bf16_rollout = AutoModelForCausalLM.from_config(policy.config, dtype=torch.bfloat16,
                                                                      attn_implementation="eager").eval()
                self._bf16_rollout.generation_config = policy.generation_config
                self._bf16_rollout_step = None
            if self._bf16_rollout_step != self.state.global_step:
                with torch.no_grad():
                    self._bf16_rollout.load_state_dict(policy.state_dict())  # copies, rounding fp32 to bf16
                self._bf16_rollout_step = self.state.global_step
            return self._bf16_rollout

        def _generate_single_turn(self, prompts: list, images: Any) -> Any:
            if self.use_vllm or images is not None:
                return super()._generate_single_turn(prompts, images)
            policy = self.accelerator.unwrap_model(self.model_wrapped)
            rollout = self._rollout_model(policy)
            pad = self.processing_class.pad_token_id
            original = rollout.generate  # the class's method: bound before the policy's is replaced below

            def generate(input_ids: Any, attention_mask: Any, **kwargs: Any) -> Any:
                if prefix_cache:
                    return shared_prefix_generate(rollout, input_ids, attention_mask, pad, original, **kwargs)
                return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

            # TRL calls unwrapped_model.generate(...), and on one process that is the policy module itself
            policy.generate = generate
            try:
                return super()._generate_single_turn(prompts, images)
            finally:
                del policy.generate

        def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                               logits_to_keep: int, batch_size: int | None = None,
                                               compute_entropy: bool = False, **kwargs: Any) -> Any:
            plain = prefix_cache and not any(v is not None for v in kwargs.values())  # text only: no images
            if plain and not getattr(self.accelerator.unwrap_model(model), "is_gradient_checkpointing", False):
                out = shared_prefix_logps(self, model, input_ids, attention_mask, logits_to_keep, batch_size,
                                          compute_entropy)
                if out is not None:
                    return out
            return super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                              batch_size, compute_entropy, **kwargs)

    FastRolloutGRPOTrainer.__name__ = f"FastRollout{base.__name__}"
    return FastRolloutGRPOTrainer
