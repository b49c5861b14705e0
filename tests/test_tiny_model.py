from __future__ import annotations

import hashlib

from thinkj.inference import SamplingParams, make_backend
from thinkj.inference.both_orders import accuracy_summary, judge_both_orders
from thinkj.inference.hf import MIN_SHARED_PREFIX, shared_prefix_length
from thinkj.models.tiny import build_tiny_model
from thinkj.prompts import get_template, list_templates
from thinkj.synthetic.fruit_task import make_pairs


def test_round_trip_chat_template_and_generate(tiny_model_dir):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = AutoConfig.from_pretrained(tiny_model_dir)
    assert config.model_type == "qwen2" and config.hidden_size // config.num_attention_heads >= 64
    text = tok.apply_chat_template([{"role": "user", "content": "Name a fruit."}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.decode(tok("<think>x</think>")["input_ids"], skip_special_tokens=True) == "<think>x</think>"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1]


def test_same_seed_same_bytes(tmp_path, tiny_model_dir):
    again = build_tiny_model(tmp_path / "again", seed=0)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert hashlib.sha256((again / name).read_bytes()).digest() == \
            hashlib.sha256((tiny_model_dir / name).read_bytes()).digest(), name
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert (other / "model.safetensors").read_bytes() != (again / "model.safetensors").read_bytes()


def test_hf_backend_batches_both_orders(tiny_model_dir):
    backend = make_backend("hf", str(tiny_model_dir), batch_size=3)
    pairs = make_pairs(4, seed=0)
    records = judge_both_orders(backend, pairs, "judge_strength_v2", SamplingParams(max_new_tokens=8, n=2,
                                                                                    temperature=1.0))
    assert len(records) == 4 * 2 * 2
    assert {r["order"] for r in records} == {"original", "swapped"}
    for r in records:
        pair = next(p for p in pairs if p.id == r["item_id"])
        assert r["gold"] == (pair.label if r["order"] == "original" else pair.swapped().label)
    summary = accuracy_summary(records)
    assert 0 <= summary["accuracy"] <= 1 and summary["n"] == 16
    greedy = backend.generate([get_template("direct_v2").render(pairs[0])] * 2, SamplingParams(max_new_tokens=6))
    assert greedy[0] == greedy[1]


def test_every_template_renders():
    pair = make_pairs(1, seed=0)[0]
    for name in list_templates():
        msgs = get_template(name).render(pair, "a", 2)
        assert msgs[-1]["role"] == "user" and pair.response_a in msgs[-1]["content"]


def test_shared_prefix_length_leaves_each_row_a_token():
    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 7]]) == 2
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2  # identical rows: the last token is still fed
    assert shared_prefix_length([[5], [5, 6]]) == 0 and shared_prefix_length([]) == 0


def test_prefix_cache_gives_the_uncached_outputs(tiny_model_dir):
    pairs = make_pairs(5, seed=3)
    template = get_template("judge_strength_v2")
    prompts = [template.render(p) for p in pairs] + [template.render(p.swapped()) for p in pairs]
    cached = make_backend("hf", str(tiny_model_dir), batch_size=4)
    plain = make_backend("hf", str(tiny_model_dir), batch_size=4, prefix_cache=False)
    texts = [cached.tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in prompts]
    rows = [cached.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert shared_prefix_length(rows) >= MIN_SHARED_PREFIX  # the cached path is the one exercised
    greedy = SamplingParams(max_new_tokens=12)
    assert cached.generate(prompts, greedy) == plain.generate(prompts, greedy)
    sampled = cached.generate(prompts[:3], SamplingParams(max_new_tokens=6, n=3, temperature=1.0, seed=1))
    assert [len(s) for s in sampled] == [3, 3, 3]
    assert sampled == cached.generate(prompts[:3], SamplingParams(max_new_tokens=6, n=3, temperature=1.0, seed=1))


def test_sampled_generation_draws_from_the_whole_distribution(tiny_model_dir, tmp_path):
    """transformers 5 fills an unset top_k with 50; a sampled judge must draw from every token, as the vLLM and
    HTTP backends do. A final norm scaled by 1e-3 makes every next token about equally likely, with no two logits
    tied (a tie at the cut keeps every token): 200 one-token draws then show ~176 distinct tokens of the 826, and 50
    under a top-50 cut (measured)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.model.norm.weight.data.mul_(1e-3)
    model.save_pretrained(tmp_path / "flat")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "flat")
    backend = make_backend("hf", str(tmp_path / "flat"), batch_size=200)
    outs = backend.generate([[{"role": "user", "content": "Name a fruit."}]],
                            SamplingParams(temperature=1.0, n=200, max_new_tokens=1))[0]
    assert len(set(outs)) > 100, f"{len(set(outs))} distinct tokens in 200 draws"


def test_sampled_answers_cached_before_the_full_distribution_are_not_served(tiny_model_dir, tmp_path):
    """A sampled answer stored under the HF backend's old key (its draws came from transformers' top-50 cut) is
    generated again; a greedy one, which the cut never touched, is still served."""
    from thinkj.inference.cache import CachedBackend, ResultCache, cache_key

    cache = ResultCache(tmp_path / "c.sqlite")
    backend = CachedBackend(make_backend("hf", str(tiny_model_dir), batch_size=4), cache, tag="t")
    conv = [{"role": "user", "content": "Name a fruit."}]
    sampled, greedy = SamplingParams(temperature=1.0, max_new_tokens=4), SamplingParams(max_new_tokens=4)
    for params in (sampled, greedy):
        cache.put(cache_key(backend.identity, "t", conv, params, 0), "OLD")  # the key before the sampler was in it
    assert backend.generate([conv], sampled)[0][0] != "OLD"
    assert backend.generate([conv], greedy)[0][0] == "OLD"
    assert backend.generate([conv], sampled)[0][0] == backend.generate([conv], sampled)[0][0]  # now cached
