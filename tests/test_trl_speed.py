"""The CPU speed paths of TRL GRPO (thinkj/online/trl_speed.py) compute what TRL's own code computes.

Each check compares against TRL's or transformers' own path on the tiny model, with prompts that share a long prefix
and differ in length (so the left padding differs per row). Broken on purpose once: without the position ids from the
mask, the shared-prefix log-probs differed from TRL's by up to 7e-3 and the first test failed.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.timeout(300)

PROMPTS = ["Judge which response is better and say why. Question: which fruit is red? Response (a): apple",
           "Judge which response is better and say why. Question: which fruit is yellow and long? Response (a): a",
           "Judge which response is better and say why. Question: name a fruit. Response (a): pear or plum, not sure"]


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype="float32")
    return model, tokenizer


def _batch(tokenizer, completions: list[list[int]]):
    """TRL's loss inputs: left-padded prompts, then right-padded completions."""
    import torch

    enc = tokenizer(PROMPTS, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    width = max(len(c) for c in completions)
    pad = tokenizer.pad_token_id
    comp = torch.tensor([c + [pad] * (width - len(c)) for c in completions])
    comp_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions])
    return torch.cat([enc.input_ids, comp], 1), torch.cat([enc.attention_mask, comp_mask], 1), width


def test_shared_prefix_logps_match_trl(tiny):
    """Log-probs, entropies and the gradient of their masked sum equal TRL's own computation (fp32)."""
    import torch

    from thinkj.online.trl_compat import fix_trl_availability_flags
    from thinkj.online.trl_speed import shared_prefix_logps

    fix_trl_availability_flags()
    from trl import GRPOTrainer

    model, tokenizer = tiny
    ids, mask, keep = _batch(tokenizer, [[5, 6, 7, 8], [9, 10], [11, 12, 13]])
    fake = SimpleNamespace(temperature=0.7, processing_class=tokenizer, model_kwarg_keys={"logits_to_keep"},
                           args=SimpleNamespace(report_to=[]))
    results = []
    for fast in (False, True):
        model.zero_grad()
        if fast:
            logps, ent = shared_prefix_logps(fake, model, ids, mask, keep, batch_size=2, compute_entropy=True)
        else:
            logps, ent = GRPOTrainer._get_per_token_logps_and_entropies(fake, model, ids, mask, keep, batch_size=2,
                                                                        compute_entropy=True)
        (logps * mask[:, -keep:]).sum().backward()
        results.append((logps.detach(), ent, [p.grad.clone() for p in model.parameters()]))
    (ref, ref_ent, ref_grad), (got, got_ent, got_grad) = results
    valid = mask[:, -keep:].bool()
    assert torch.allclose(got[valid], ref[valid], atol=1e-4), (got - ref).abs().max()
    assert torch.allclose(got_ent[valid], ref_ent[valid], atol=1e-4)
    for a, b in zip(got_grad, ref_grad):
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-3), (a - b).abs().max()


def test_shared_prefix_needs_a_prefix(tiny):
    """Prompts without a common prefix take TRL's own path (None)."""
    from thinkj.online.trl_speed import shared_prefix_logps

    model, tokenizer = tiny
    ids, mask, keep = _batch(tokenizer, [[5], [6], [7]])
    ids[0, :] = 3  # row 0 shares no token with the others
    mask[0, :] = 1
    fake = SimpleNamespace(temperature=1.0, processing_class=tokenizer)
    assert shared_prefix_logps(fake, model, ids, mask, keep) is None


def test_shared_prefix_generate_matches_generate(tiny):
    """Greedy completions with the prefix cache equal transformers' own generate on the left-padded batch."""
    from thinkj.online.trl_speed import shared_prefix_generate

    model, tokenizer = tiny
    enc = tokenizer(PROMPTS, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    kwargs = dict(max_new_tokens=12, do_sample=False, use_cache=True, pad_token_id=tokenizer.pad_token_id)
    plain = model.generate(**enc, **kwargs)
    fast = shared_prefix_generate(model, enc.input_ids, enc.attention_mask, tokenizer.pad_token_id, **kwargs)
    width = enc.input_ids.size(1)
    assert fast.shape == plain.shape
    assert fast[:, width:].tolist() == plain[:, width:].tolist()
