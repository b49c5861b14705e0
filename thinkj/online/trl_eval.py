"""Held-out judge metrics during a TRL GRPO run (verl's are in ``thinkj.online.verl_hooks``).

:class:`HeldOutEval` is a transformers ``TrainerCallback``: before the first step and every ``every`` optimizer
steps (and after the last) it has the current policy judge every held-out row greedily -- the row's chat prompt
through the tokenizer's chat template, as TRL renders it for rollouts -- parses each verdict with the reward preset
and appends ``eval_judge/<name>`` (``thinkj.online.heldout``: accuracy per order, pair accuracy, "(a)" share) with
the step to the trainer's ``log_history``, which ``trainer_state.json`` keeps and ``thinkj train curves`` plots. The
verdicts of every evaluation are kept (:attr:`samples`, with their step) for ``eval_samples.jsonl``.

TRL's own ``evaluate`` would compute the GRPO loss on sampled completions of an eval dataset, not a greedy verdict
per row, hence a callback.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from thinkj.online.heldout import judge_stats, order_name
from thinkj.rewards import get_preset

PREFIX = "eval_judge"


class HeldOutEval(TrainerCallback):
    """Greedy verdicts on held-out rows (``{prompt, label, strength, twin, order}``, both orders of each comparison)
    every ``every`` steps; see the module docstring."""

    def __init__(self, rows: list[dict[str, Any]], preset: str, every: int, max_new_tokens: int,
                 batch_size: int = 8, **weights: Any):
        if every < 1:
            raise ValueError(f"HeldOutEval: every must be >= 1, got {every}")
        self.rows, self.every, self.max_new_tokens, self.batch_size = rows, every, max_new_tokens, batch_size
        self.preset, self.weights = get_preset(preset), weights
        self.samples: list[dict[str, Any]] = []
        self._done_at: int | None = None

    def judge(self, model: Any, tokenizer: Any) -> list[str]:
        """The policy's greedy answer to every held-out row, in order."""
        import torch

        side, tokenizer.padding_side = tokenizer.padding_side, "left"  # generation continues after the prompt
        was_training = model.training
        model.eval()
        texts = []
        try:
            for start in range(0, len(self.rows), self.batch_size):
                chunk = self.rows[start:start + self.batch_size]
                prompts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
                           for r in chunk]
                batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                with torch.no_grad():
                    out = model.generate(**batch, do_sample=False, max_new_tokens=self.max_new_tokens,
                                         pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
                texts += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        finally:
            tokenizer.padding_side = side
            model.train(was_training)
        return texts

    def evaluate(self, model: Any, tokenizer: Any, step: int) -> dict[str, float]:
        """``eval_judge/*`` of the policy as it is now (its verdicts are added to :attr:`samples`)."""
        texts = self.judge(model, tokenizer)
        preds = [str(self.preset(t, {"label": r["label"], "strength": r.get("strength")}, **self.weights).get("pred"))
                 for t, r in zip(texts, self.rows)]
        named = [order_name(r) for r in self.rows]
        stats = judge_stats(preds, [r["label"] for r in self.rows], [t for t, _ in named], [o for _, o in named])
        self.samples += [{"step": step, "completion": t, "label": r["label"], "pred": p, "twin": n[0],
                              "order": n[1]} for t, r, p, n in zip(texts, self.rows, preds, named)]
        return {f"{PREFIX}/{name}": value for name, value in stats.items()}

    def _log(self, state: Any, model: Any, tokenizer: Any) -> None:
        if self._done_at == state.global_step or model is None or tokenizer is None:
            return
        self._done_at = state.global_step
        state.log_history.append({**self.evaluate(model, tokenizer, state.global_step), "step": state.global_step})

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, processing_class: Any = None,
                       **kwargs: Any) -> None:
        self._log(state, model, processing_class)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, processing_class: Any = None,
                    **kwargs: Any) -> None:
        if state.global_step % self.every == 0 or state.global_step >= state.max_steps:
            self._log(state, model, processing_class)
