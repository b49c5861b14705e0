"""Build the embedded tiny chat model offline: a small Qwen2 causal LM with a locally trained tokenizer.

Nothing is downloaded. The tokenizer is a byte-level BPE trained on text the project generates
(the prompt templates and the synthetic judging task), wrapped with a ChatML chat template so it
looks to LlamaFactory, verl, TRL and vLLM like a Qwen2.5 checkpoint. Head dimension is 64 so
vLLM can load it. The same seed gives byte-identical files.

    thinkj tiny-model runs/tiny --seed 0
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.records import write_json

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK_TOKENS = ["<think>", "</think>"]  # ordinary added tokens: they survive skip_special_tokens

# Qwen2.5's default system prompt is what LlamaFactory's `qwen` template inserts when a sample has no
# system turn; the tiny model's chat template does the same so training and inference see one format.
DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM + "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


# A fixed list, not every registered template: adding a template elsewhere must not change the tiny
# model's tokenizer (and so its weights) for a given seed.
CORPUS_TEMPLATES = ("judge_strength_v2", "judge_cot_v2", "critic_strength_v2", "critic_cot_v2", "direct_v2",
                    "double_score_v2")


def default_corpus() -> list[str]:
    """Text the tokenizer is trained on: the Think-J templates rendered on synthetic pairs, plus answers."""
    from thinkj.prompts import get_template, judge_output, scores_sentence
    from thinkj.synthetic.fruit_task import explain, make_pairs

    texts = [DEFAULT_SYSTEM]
    for pair in make_pairs(64, seed=12345, asked=("fruit", "animal", "color", "tool", "country", "instrument")):
        for name in CORPUS_TEMPLATES:
            template = get_template(name)
            verdict = pair.label if pair.decided else "a"
            for message in template.render(pair, verdict, pair.strength):
                texts.append(message["content"])
        choice = pair.label if pair.decided else "a"
        texts.append(judge_output(explain(pair), choice, pair.strength))
        texts.append(scores_sentence(30, 70))
    return texts


def train_tokenizer(corpus: Iterable[str], vocab_size: int = 1024):
    """A byte-level BPE tokenizer (deterministic for a fixed corpus) as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(corpus), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                      unk_token=None, bos_token=None, padding_side="left")
    wrapped.add_tokens(THINK_TOKENS)
    wrapped.chat_template = CHAT_TEMPLATE
    wrapped.model_max_length = 4096
    return wrapped


def build_tiny_model(out_dir: str | Path, seed: int = 0, *, hidden_size: int = 128, num_layers: int = 2,
                     num_heads: int = 2, num_kv_heads: int = 1, intermediate_size: int = 256,
                     vocab_size: int = 1024, max_positions: int = 4096,
                     corpus: Iterable[str] | None = None) -> Path:
    """Write a tiny Qwen2 chat model (config, safetensors, tokenizer, generation config) to ``out_dir``."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if hidden_size // num_heads < 64:
        raise ThinkJError(f"head_dim = hidden_size / num_heads must be >= 64 for vLLM, got {hidden_size // num_heads}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(corpus if corpus is not None else default_corpus(), vocab_size)
    eos, pad = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
                         num_hidden_layers=num_layers, num_attention_heads=num_heads,
                         num_key_value_heads=num_kv_heads, max_position_embeddings=max_positions,
                         tie_word_embeddings=True, bos_token_id=pad, eos_token_id=eos, pad_token_id=pad,
                         rope_theta=10000.0, torch_dtype="float32")
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=pad,
                                               do_sample=False, max_new_tokens=256)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json(out / "thinkj_tiny.json", {"seed": seed, "hidden_size": hidden_size, "num_layers": num_layers,
                                          "vocab_size": len(tokenizer),
                                          "parameters": sum(p.numel() for p in model.parameters())})
    return out


def sft_batch(rows: list[tuple[list[int], list[int]]], pad_id: int) -> tuple[Any, Any, Any]:
    """(prompt ids, answer ids) rows -> right-padded ``input_ids``, ``attention_mask`` and ``labels`` (-100 outside
    the answers, so only the answer tokens are learnt)."""
    import torch

    width = max(len(p) + len(a) for p, a in rows)
    ids = torch.full((len(rows), width), pad_id)
    labels = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (p, a) in enumerate(rows):
        ids[i, :len(p) + len(a)] = torch.tensor(p + a)
        labels[i, len(p):len(p) + len(a)] = torch.tensor(a)
        mask[i, :len(p) + len(a)] = 1
    return ids, mask, labels


def sft_step(model: Any, optimizer: Any, rows: list[tuple[list[int], list[int]]], pad_id: int,
             device: str = "cpu") -> float:
    """One optimizer step of the answer-only loss on ``rows`` (:func:`sft_batch`); returns the loss."""
    ids, mask, labels = sft_batch(rows, pad_id)
    loss = model(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def finetune_tiny_judge(base: str | Path, out: str | Path, steps: int = 120, seed: int = 0, lr: float = 3e-3,
                        batch: int = 16, device: str = "cpu") -> Path:
    """A tiny judge: full fine-tuning of the tiny model on Think-J answers to synthetic pairs (prompt masked).

    For tests that need a policy writing parsable verdicts (verl's CPU runs: a reward with variance). 120
    steps of 16 at lr 3e-3 gave about 70 % well-formed sampled answers and 75 % right verdicts on held-out
    pairs; far fewer steps left it unparsable. Not a stage of the method (that is LlamaFactory SFT).
    ``device``: where it trains (``cuda`` in scripts/gpu_smoke.sh); the first and last losses go to
    ``thinkj_finetune.json`` beside the weights.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.prompts import get_template, judge_output
    from thinkj.synthetic.fruit_task import explain, make_pairs

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base).to(device)
    template = get_template("judge_strength_v1")
    examples = []
    for pair in make_pairs(256, seed=seed + 7):
        if not pair.decided:
            continue
        prompt = tokenizer.apply_chat_template(template.render(pair), add_generation_prompt=True, tokenize=True,
                                               return_dict=True)["input_ids"]
        answer = tokenizer(judge_output(explain(pair), pair.label, pair.strength) + tokenizer.eos_token,
                           add_special_tokens=False)["input_ids"]
        examples.append((prompt, answer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        rows = [examples[(step * batch + i) % len(examples)] for i in range(batch)]
        losses.append(sft_step(model, optimizer, rows, tokenizer.pad_token_id, device))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json(Path(out) / "thinkj_finetune.json", {"steps": steps, "device": device, "first_loss": losses[0],
                                                    "last_loss": losses[-1]})
    return Path(out)
