"""Scalar-score judges (Bradley-Terry classifiers): score each response alone, then compare the two scores.

Two checkpoint formats load here:

* LlamaFactory ``stage: rm`` (0.9.5): the decoder saved as a causal LM plus ``value_head.safetensors`` (or
  ``value_head.bin``) holding ``v_head.summary.weight`` [1, hidden] and ``v_head.summary.bias`` [1] -- trl's
  value head, applied to the final hidden state. LlamaFactory reads the value at the last non-padding token
  (``llamafactory/train/rm/trainer.py``), and so do we.
* A Hugging Face sequence classifier with one label (``AutoModelForSequenceClassification``, e.g. trl's
  RewardTrainer output): its logit is the score.

The text scored is the conversation plus the response in the model's chat template. Scores are cached per
(model, conversation, response), so a rerun after a kill only scores what is missing.

A text longer than the classifier's context (``--backend-arg max_model_len=N``, else the model config's
``max_position_embeddings``) is never truncated nor scored: its comparison is recorded ``too_long``, as on the
generative path (:mod:`thinkj.inference.context`), and the results count it and say they are incomplete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.inference.base import Messages, SamplingParams
from thinkj.inference.cache import ResultCache, cache_key
from thinkj.inference.context import context_length_of
from thinkj.inference.identity import model_identity
from thinkj.progress import progress_bar
from thinkj.records import PreferencePair

VALUE_HEAD_FILES = ("value_head.safetensors", "value_head.bin")


def is_value_head_checkpoint(path: str | Path) -> bool:
    return any((Path(path) / name).exists() for name in VALUE_HEAD_FILES)


def _load_value_head(path: Path):
    import torch

    for name in VALUE_HEAD_FILES:
        file = path / name
        if not file.exists():
            continue
        if name.endswith(".safetensors"):
            from safetensors.torch import load_file

            state = load_file(str(file))
        else:
            state = torch.load(file, map_location="cpu", weights_only=True)
        weight, bias = state.get("v_head.summary.weight"), state.get("v_head.summary.bias")
        if weight is None or bias is None:
            raise ThinkJError(f"{file}: expected keys v_head.summary.weight and v_head.summary.bias, got {sorted(state)}")
        head = torch.nn.Linear(weight.shape[1], 1)
        head.load_state_dict({"weight": weight.float(), "bias": bias.float()})
        return head.eval()
    raise FileNotFoundError(f"{path}: no {' or '.join(VALUE_HEAD_FILES)}")


class ScalarScorer:
    """Score (conversation + response) texts with a value-head or sequence-classification checkpoint."""

    def __init__(self, model_path: str | Path, *, batch_size: int = 8, device: str | None = None,
                 max_model_len: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

        self.check_settings(batch_size=batch_size, device=device, max_model_len=max_model_len)
        self.path = Path(model_path)
        self.name = str(model_path)
        self.batch_size = batch_size
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.tokenizer.padding_side = "right"  # the score sits at the last real token of each row
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if is_value_head_checkpoint(self.path):
            self.kind = "value_head"
            self.model = AutoModelForCausalLM.from_pretrained(model_path).to(self.device).eval()
            self.head = _load_value_head(self.path).to(self.device)
        else:
            self.kind = "sequence_classifier"
            model, info = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=1,
                                                                             output_loading_info=True)
            if info.get("missing_keys"):
                # A causal LM loads as a classifier with a randomly initialised head: scores would be noise.
                raise ThinkJError(f"{model_path}: no trained score head (would initialise "
                                  f"{', '.join(sorted(info['missing_keys'])[:3])} at random); --backend classifier needs "
                                  "a LlamaFactory 'stage: rm' checkpoint (value_head.safetensors) or a sequence "
                                  "classifier; judge a causal LM with --backend hf or vllm")
            self.model = model.to(self.device).eval()
            if self.model.config.pad_token_id is None:
                self.model.config.pad_token_id = self.tokenizer.pad_token_id
            self.head = None
        # the longest text the model can score whole: given, else its config's position limit
        declared = context_length_of(self.model.config)
        if max_model_len is not None and declared is not None and max_model_len > declared:
            raise ThinkJError(f"--backend-arg max_model_len={max_model_len}: over {model_path}'s context of {declared}")
        self.context_length = max_model_len or declared
        if self.context_length is None:
            raise ThinkJError(f"{model_path}: its config declares no context length; pass --backend-arg "
                              "max_model_len=N")

    @staticmethod
    def check_settings(*, batch_size: int = 8, device: str | None = None, max_model_len: int | None = None,
                       **_: object) -> None:
        """Its settings, checked before a model loads (the constructor and ``--backend-arg`` both call this)."""
        from thinkj.inference.hf import check_torch_device

        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ThinkJError(f"classifier: batch_size must be a whole number >= 1, got {batch_size!r}")
        if max_model_len is not None and (isinstance(max_model_len, bool) or not isinstance(max_model_len, int)
                                          or max_model_len < 1):
            raise ThinkJError(f"--backend-arg max_model_len={max_model_len!r}: must be a whole number >= 1")
        check_torch_device("classifier", device)

    def text(self, messages: Messages, response: str) -> str:
        return self.tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": response}], tokenize=False)

    def n_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text as scored (the chat template already holds the special tokens)."""
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def fits(self, texts: list[str]) -> list[bool]:
        """Which texts the model can score whole (never truncated)."""
        return [n <= self.context_length for n in self.n_tokens(texts)] if texts else []

    def score(self, texts: list[str]) -> list[float]:
        """One score per text; a text longer than the context is refused, never truncated (check ``fits`` first)."""
        import torch

        out: list[float] = [0.0] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with progress_bar(f"score ({self.path.name})", total=len(texts)) as advance:
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self.tokenizer([texts[i] for i in idx], return_tensors="pt", padding=True,
                                       add_special_tokens=False).to(self.device)
                lengths = batch["attention_mask"].sum(dim=-1)
                if int(lengths.max()) > self.context_length:
                    j = int(lengths.argmax())
                    raise ThinkJError(f"{self.name}: a text of {int(lengths[j])} tokens is over the classifier's "
                                      f"context of {self.context_length}; it cannot be scored whole (scalar_records "
                                      "records such comparisons too_long)")
                last = lengths - 1
                with torch.no_grad():
                    if self.head is not None:
                        hidden = self.model(**batch, output_hidden_states=True).hidden_states[-1]
                        values = self.head(hidden.float()).squeeze(-1)
                        scores = values.gather(1, last.unsqueeze(1)).squeeze(1)
                    else:
                        scores = self.model(**batch).logits[:, 0]
                for j, i in enumerate(idx):
                    out[i] = float(scores[j])
                advance(len(idx))
        return out


def scalar_records(scorer: ScalarScorer, pairs: list[PreferencePair], cache: ResultCache, *,
                   chunk: int = 256, fields=None) -> list[dict[str, Any]]:
    """Judgment records for both orders from per-response scores (so the same metrics apply).

    A scalar judge sees each response alone, so both orders carry the same two scores and are always
    consistent; the swapped record exists so that every protocol reads the same record layout. A pair with a
    response whose text exceeds the classifier's context is not scored: its records say ``too_long`` (no
    scores, no verdict), as the generative path records a prompt over its budget.
    """
    texts: dict[str, str] = {}
    keys: dict[tuple[str, str], str] = {}
    identity = model_identity(scorer.name)  # a retrained classifier at the same path is scored again
    for pair in pairs:
        for side, response in (("a", pair.response_a), ("b", pair.response_b)):
            text = scorer.text(pair.messages, response)
            key = cache_key(identity, "scalar", [{"role": "text", "content": text}], SamplingParams(), 0)
            keys[(pair.id, side)] = key
            texts[key] = text
    # checked before the cache: a score made of a truncated or over-long text is never reused
    fitting = {key for key, ok in zip(texts, scorer.fits(list(texts.values()))) if ok}
    too_long = {pair.id for pair in pairs if not {keys[(pair.id, "a")], keys[(pair.id, "b")]} <= fitting}
    wanted = {keys[(pair.id, side)] for pair in pairs if pair.id not in too_long for side in ("a", "b")}
    scores: dict[str, float] = {}
    todo = []
    for key in (k for k in texts if k in wanted):
        hit = cache.get(key)
        if hit is None:
            todo.append(key)
        else:
            scores[key] = float(hit)
    for start in range(0, len(todo), chunk):
        part = todo[start:start + chunk]
        for key, value in zip(part, scorer.score([texts[k] for k in part])):
            cache.put(key, json.dumps(value))
            scores[key] = value
    records = []
    for pair in pairs:
        long = pair.id in too_long
        score_a, score_b = (None, None) if long else (scores[keys[(pair.id, "a")]], scores[keys[(pair.id, "b")]])
        for order, (first, second, gold) in (("original", (score_a, score_b, pair.label)),
                                             ("swapped", (score_b, score_a, {"a": "b", "b": "a"}.get(pair.label, "tie")))):
            verdict = None if long else "a" if first > second else "b" if second > first else "tie"
            record = {"item_id": pair.id, "order": order, "sample": 0, "gold": gold, "verdict": verdict,
                      "score_a": first, "score_b": second, "correct": verdict == gold, "too_long": long,
                      "template": None, "model": scorer.name, "scorer": scorer.kind, "sampling": None}
            if pair.decided and not long:
                record["score_chosen"], record["score_rejected"] = (score_a, score_b) if pair.label == "a" else (score_b, score_a)
            if fields is not None:
                record.update(fields(pair))
            records.append(record)
    return records
