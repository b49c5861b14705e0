"""RL canaries: a judging task RL must learn, an init judge that has not learnt it, and a paired before/after test.

The task is the fruit task (:mod:`thinkj.synthetic.fruit_task`): the better response names one fruit, which is
visible in the two responses. The init judge is the tiny model fine-tuned to the Think-J answer FORMAT: its
thinking is the rule-based rationale (``explain``: what each response does), but the verdict after ``</think>``
is a fair coin drawn independently of the pair (or, with ``informative`` = q, the gold label with probability q).
So it writes parsable answers whose verdict carries no information about the rule (held-out accuracy 50 %).

Status: no RL setting tried so far (TRL GRPO, 20-40 steps, lr 1e-4 .. 1e-3; experiments/LOG.md, "RL canaries")
raised this init judge's held-out accuracy: every init and every trained policy put its greedy verdict on one
side whatever the content, and RL only moved that side. So no canary test asserts a rise yet; this module holds
the parts that worked (init judge, held-out judging, the paired test fixed in advance).

    from thinkj.online.canary import format_only_judge, held_out_correct, paired_test
    init = format_only_judge(tiny_model_dir, "runs/canary/init")
    before = held_out_correct(init)            # list[bool], one per (pair, order), greedy
    after = held_out_correct("runs/canary/rl/model")
    paired_test(before, after)                 # one-sided exact McNemar on the same judgments
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

from thinkj.records import PreferencePair, write_json, write_jsonl
from thinkj.stats import mcnemar_exact
from thinkj.synthetic.fruit_task import explain, make_pairs

TEMPLATE = "judge_strength_v2"  # what `thinkj train rl` renders RL prompts with
EVAL_SEED = 90_001  # held-out pairs: a seed no training set here uses
ALPHA = 0.05  # the one-sided McNemar level, fixed before any run


def canary_rl_pairs(n: int, seed: int, *, shuffle_gold: bool = False) -> list[PreferencePair]:
    """``n`` RL pairs; with ``shuffle_gold`` each pair's gold label is a fair coin of its own (the negative control:
    the responses keep their places, so the label no longer follows the rule). Labels stay balanced: TRL's run
    refuses data whose golds all sit on one side."""
    pairs = make_pairs(n, seed=seed, id_prefix="canary-rl")
    if not shuffle_gold:
        return pairs
    labels = (["a", "b"] * (n // 2 + 1))[:n]
    random.Random(seed + 1).shuffle(labels)
    return [replace(p, label=label) for p, label in zip(pairs, labels)]


def write_rl_pairs(path: str | Path, pairs: list[PreferencePair]) -> Path:
    write_jsonl(path, [p.to_dict() for p in pairs])
    return Path(path)


def format_only_judge(base: str | Path, out: str | Path, *, steps: int = 120, batch: int = 16, lr: float = 3e-3,
                      seed: int = 0, informative: float = 0.0) -> Path:
    """The tiny model fine-tuned on Think-J answers whose rationale follows the pair and whose verdict is a coin
    (the gold label instead with probability ``informative``).

    Each step draws fresh pairs, so no example's coin is seen twice (no verdict to memorise). Prompts are rendered
    with :data:`TEMPLATE`, as the RL runs render theirs; the prompt is masked out of the loss. Losses and the
    share of 'a' verdicts trained on go to ``thinkj_canary_init.json`` beside the weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.models.tiny import sft_batch
    from thinkj.prompts import get_template, judge_output

    torch.manual_seed(seed)
    coin = random.Random(seed + 31)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype="float32")
    template = get_template(TEMPLATE)
    pairs = make_pairs(steps * batch, seed=seed + 50_000, id_prefix="canary-sft")
    verdicts = [p.label if informative and coin.random() < informative else coin.choice("ab") for p in pairs]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        rows = []
        for pair, verdict in zip(pairs[step * batch:(step + 1) * batch], verdicts[step * batch:(step + 1) * batch]):
            prompt = tokenizer.apply_chat_template(template.render(pair), add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"]
            answer = tokenizer(judge_output(explain(pair), verdict, pair.strength) + tokenizer.eos_token,
                               add_special_tokens=False)["input_ids"]
            rows.append((prompt, answer))
        ids, mask, labels = sft_batch(rows, tokenizer.pad_token_id)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        losses.append(loss.item())
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json(Path(out) / "thinkj_canary_init.json", {"steps": steps, "first_loss": losses[0],
                                                       "last_loss": losses[-1],
                                                       "a_share": verdicts.count("a") / len(verdicts)})
    return Path(out)


def held_out_correct(model_dir: str | Path, n_pairs: int = 64, *, max_new_tokens: int = 96) -> list[bool]:
    """Greedy verdicts of ``model_dir`` on ``n_pairs`` held-out pairs in both orders: right or not, in a fixed order
    (pair, then original / swapped), so two models' lists pair up judgment by judgment."""
    from thinkj.inference.base import SamplingParams
    from thinkj.inference.both_orders import judge_both_orders
    from thinkj.inference.hf import HFBackend

    pairs = make_pairs(n_pairs, seed=EVAL_SEED, id_prefix="canary-eval")
    backend = HFBackend(model_dir, batch_size=64, device="cpu", dtype="float32")
    records = judge_both_orders(backend, pairs, TEMPLATE, SamplingParams(temperature=0.0,
                                                                          max_new_tokens=max_new_tokens), strict=True)
    return [bool(r["correct"]) for r in records]


def paired_test(before: list[bool], after: list[bool]) -> dict[str, Any]:
    """Accuracies and the one-sided exact McNemar p-value for "after is better than before" on the same judgments:
    P(X >= gained) for X ~ Binomial(gained + lost, 1/2) over the judgments that changed (a drop gives p near 1). The
    two-sided value (``thinkj.stats.mcnemar_exact``) is reported beside it."""
    if len(before) != len(after) or not before:
        raise ValueError(f"paired test needs two equally long, non-empty lists (got {len(before)} and {len(after)})")
    gained = sum(1 for b, a in zip(before, after) if a and not b)
    lost = sum(1 for b, a in zip(before, after) if b and not a)
    changed = gained + lost
    one_sided = sum(math.comb(changed, i) for i in range(gained, changed + 1)) / 2.0**changed
    return {"n": len(before), "before": sum(before) / len(before), "after": sum(after) / len(after),
            "gained": gained, "lost": lost, "p_one_sided": one_sided, "p_two_sided": mcnemar_exact(gained, lost)}


def improved(before: list[bool], after: list[bool], alpha: float = ALPHA) -> bool:
    """Whether ``after`` beats ``before`` by the one-sided McNemar test at ``alpha`` (fixed in advance)."""
    return paired_test(before, after)["p_one_sided"] < alpha
