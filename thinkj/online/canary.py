"""RL canaries: a judging task RL must learn, an init judge that has not learnt it, and a paired before/after test.

The task is the fruit task (:mod:`thinkj.synthetic.fruit_task`): the better response names one fruit, which is
visible in the two responses. The init judge is the tiny model fine-tuned to the Think-J answer FORMAT: its
thinking is the rule-based rationale (``explain``: what each response does), but the verdict after ``</think>``
is a fair coin drawn independently of the pair (or, with ``informative`` = q, the gold label with probability q).
So it writes parsable answers whose verdict carries no information about the rule (held-out accuracy 50 %).

Greedy verdicts of the 0.4 M model sit on one side whatever the content (experiments/LOG.md, "RL canaries"), so
the canary reads no generation: :func:`verdict_probabilities` is the teacher-forced probability of the right verdict
letter after the rule-based rationale, per held-out judgment, made free of the position preference per pair
(:func:`position_free`), and :func:`sign_test` (one-sided exact sign test AND a
least mean rise, both fixed in advance) compares before and after. :func:`canary_arm` runs one arm: TRL GRPO
(``run_trl_grpo``, the code path of ``thinkj train rl --engine trl``) from the init judge on right or flipped golds.

    init = format_only_judge(tiny_model_dir, "runs/canary/init", informative=INFORMATIVE)
    canary_arm(init, "runs/canary", seed=0)                      # must learn: result["learned"] is True
    canary_arm(init, "runs/canary", seed=0, control="flipped")   # negative control: must not

verl's algorithms run the same arms through ``scripts/train_verl.sh`` (:mod:`thinkj.online.canary_verl`).

Greedy helpers kept from the first attempt: :func:`held_out_correct` and :func:`paired_test` (exact McNemar).
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
ALPHA = 0.05  # the one-sided level (McNemar, sign test), fixed before any run
INFORMATIVE = 0.65  # the init judge's verdict is the gold w.p. 0.65, else a coin: content-bound, far from certain
# TRL GRPO settings of a canary arm (experiments/LOG.md, "RL canaries, session 9"): fixed before the seeds were run
# 200 SFT steps, not 120: at 120 the inits of seeds 1 and 2 had not bound the verdict to the content yet (mean right
# -verdict probability 0.51-0.54 against 0.76 for seed 0; experiments/LOG.md, "RL canaries, session 9")
INIT_STEPS = 200
# 60 steps, not 30: at 30 the CI arm rose +0.017 on a CPU without bf16 (failed); at 60 three seeds held there
# (+0.054, +0.109, +0.193; experiments/LOG.md, "session 15", rule fixed before the runs)
RL_SETTINGS: dict[str, Any] = {"steps": 60, "learning_rate": 3e-4, "beta": 0.0, "num_generations": 8,
                               "prompts_per_step": 4, "max_completion_length": 96}
RL_PAIRS = 256
MIN_RISE = 0.05  # the least mean rise of the right verdict's probability that counts as learning, fixed in advance
# the right arm's own greedy answers on the 128 held-out judgments (experiments/LOG.md, "session 15", fixed before
# its runs): accuracy may fall by at most 0.05 (6 judgments) and so may the share of answers carrying a verdict
MAX_GEN_FALL = 0.05
MAX_PARSE_FALL = 0.05


CONTROLS = ("flipped", "shuffled")  # negative controls: golds on the wrong side / golds a coin of their own
CONTROL = "flipped"  # the canary's control (experiments/LOG.md, "RL canaries, session 10": why not "shuffled")


def _balanced(pairs: list[PreferencePair], n: int, where: str, *, distinct: bool = False) -> list[PreferencePair]:
    """The first ``n // 2`` pairs of ``pairs`` with gold 'a' and the first ``n - n // 2`` with gold 'b', in their
    order; ``distinct``: no comparison (question and the two responses) twice."""
    seen, sides = set(), {"a": [], "b": []}
    for pair in pairs:
        key = (str(pair.messages), frozenset((pair.response_a, pair.response_b)))
        if not (distinct and key in seen):
            seen.add(key)
            sides[pair.label].append(pair)
    if len(sides["a"]) < n // 2 or len(sides["b"]) < n - n // 2:
        raise ValueError(f"{where}: {len(sides['a'])} 'a' and {len(sides['b'])} 'b' fruit pairs fit of {len(pairs)} "
                         f"drawn, {n} wanted; ask for fewer")
    chosen = {id(p) for p in sides["a"][:n // 2] + sides["b"][:n - n // 2]}
    return [p for p in pairs if id(p) in chosen]


def eval_pairs(n: int = 64) -> list[PreferencePair]:
    """The canary's held-out pairs (seed :data:`EVAL_SEED`): ``n`` distinct comparisons, half with gold 'a' (the
    fruit task's space is small: a plain draw of 64 repeats some, and verl's validation dump is matched to its rows
    by prompt text)."""
    return _balanced(make_pairs(4 * n, seed=EVAL_SEED, id_prefix="canary-eval"), n, "held-out pairs", distinct=True)


def canary_rl_pairs(n: int, seed: int, *, control: str | None = None) -> list[PreferencePair]:
    """``n`` RL pairs, none with the two responses of a held-out pair (:func:`eval_pairs`; the fruit task's space is
    small: 13 of 64 held-out pairs recurred verbatim among 256 drawn pairs), half with gold 'a'. ``control`` makes a
    negative control, the responses keeping their places:

    - ``"flipped"``: every gold label on the other side, so the accuracy term pays the wrong verdict (the reward's
      accuracy term negated, up to a constant; format and strength terms unchanged). It must lower the metric.
    - ``"shuffled"``: each gold a fair coin of its own, so the label no longer follows the rule. Not a must-not-rise
      control where the init already leans right: GRPO on coin golds sharpens the init's own leaning (verl: +0.073 on
      seed 0, experiments/LOG.md, "RL canaries, session 10"). Kept for the record.

    Gold sides alternate (a, b, a, ...), so every step of an even number of prompts, read in file order (the arms
    turn the engines' shuffling off), holds as many of each: a GRPO step whose golds all sit on one side pushes
    every verdict toward that side, and verl's shuffled steps drifted so (experiments/LOG.md, "RL canaries: why
    verl GRPO drifts"). TRL's run also refuses data whose golds all sit on one side."""
    held = {frozenset((p.response_a, p.response_b)) for p in eval_pairs()}
    chosen = _balanced([p for p in make_pairs(4 * n, seed=seed, id_prefix="canary-rl")
                        if frozenset((p.response_a, p.response_b)) not in held], n, "RL pairs unlike the held-out ones")
    sides = [[p for p in chosen if p.label == side] for side in "ab"]
    pairs = [p for both in zip(*sides) for p in both] + sides[0][len(sides[1]):] + sides[1][len(sides[0]):]
    if control is None:
        return pairs
    if control == "flipped":
        return [replace(p, label=p.wrong_side) for p in pairs]
    if control != "shuffled":
        raise ValueError(f"control {control!r}: choose one of {', '.join(CONTROLS)} (or None for the right golds)")
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

    from thinkj.models.tiny import sft_step
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
        losses.append(sft_step(model, optimizer, rows, tokenizer.pad_token_id))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_json(Path(out) / "thinkj_canary_init.json", {"steps": steps, "first_loss": losses[0],
                                                       "last_loss": losses[-1],
                                                       "a_share": verdicts.count("a") / len(verdicts)})
    return Path(out)


def held_out_judgments(model_dir: str | Path, n_pairs: int = 64, *, max_new_tokens: int = 96) -> list[dict[str, Any]]:
    """Greedy judgment records of ``model_dir`` on ``n_pairs`` held-out pairs in both orders, in a fixed order (pair,
    then original / swapped), so two models' lists pair up judgment by judgment."""
    from thinkj.inference.base import SamplingParams
    from thinkj.inference.both_orders import judge_both_orders
    from thinkj.inference.hf import HFBackend

    backend = HFBackend(model_dir, batch_size=64, device="cpu", dtype="float32")
    return judge_both_orders(backend, eval_pairs(n_pairs), TEMPLATE,
                             SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens), strict=True)


def held_out_correct(model_dir: str | Path, n_pairs: int = 64, *, max_new_tokens: int = 96) -> list[bool]:
    """Greedy verdicts of ``model_dir`` on the held-out judgments (:func:`held_out_judgments`): right or not."""
    return [bool(r["correct"]) for r in held_out_judgments(model_dir, n_pairs, max_new_tokens=max_new_tokens)]


def own_generations(model_dir: str | Path, n_pairs: int = 64, *, max_new_tokens: int = 96) -> dict[str, Any]:
    """What ``model_dir`` itself writes on the held-out pairs, both orders, greedy (:func:`held_out_judgments`):
    accuracy over every judgment (an unparsable answer counts wrong), the parse rate (a verdict was read) and the
    share of verdicts on '(a)'. The teacher-forced metric feeds the right rationale, so it cannot see RL that breaks
    the model's own answers; this can."""
    records = held_out_judgments(model_dir, n_pairs, max_new_tokens=max_new_tokens)
    parsed = [r for r in records if r["verdict"] is not None]
    return {"n": len(records), "accuracy": sum(bool(r["correct"]) for r in records) / len(records),
            "parse_rate": len(parsed) / len(records),
            "a_share": sum(r["verdict"] == "a" for r in parsed) / len(parsed) if parsed else None,
            "correct": [bool(r["correct"]) for r in records]}


def generation_held(before: dict[str, Any], after: dict[str, Any], *, max_fall: float = MAX_GEN_FALL,
                    max_parse_fall: float = MAX_PARSE_FALL) -> dict[str, Any]:
    """The canary's generation criterion, fixed in advance (experiments/LOG.md, "session 15"): the arm's own greedy
    accuracy on the held-out judgments (:func:`own_generations`) falls by at most ``max_fall``, and the share of its
    answers that carry a verdict by at most ``max_parse_fall``. A collapse of generation (empty, looping or
    verdict-less answers) fails it; an unparsable answer already counts wrong in the accuracy."""
    fall = before["accuracy"] - after["accuracy"]
    parse_fall = before["parse_rate"] - after["parse_rate"]
    paired = paired_test(before["correct"], after["correct"])
    return {"before": before["accuracy"], "after": after["accuracy"], "fall": fall,
            "parse_before": before["parse_rate"], "parse_after": after["parse_rate"],
            "a_share_before": before["a_share"], "a_share_after": after["a_share"],
            "gained": paired["gained"], "lost": paired["lost"], "p_one_sided": paired["p_one_sided"],
            "held": fall <= max_fall + 1e-12 and parse_fall <= max_parse_fall + 1e-12}


def verdict_probabilities(model_dir: str | Path, n_pairs: int = 64) -> list[float]:
    """Teacher-forced: for each held-out pair in both orders (the order of :func:`held_out_correct`), the probability
    ``model_dir`` gives the CORRECT verdict letter, read at the letter's position after the prompt, the rule-based
    rationale (:func:`explain`) and the verdict sentence up to the letter, normalised over the two letters.

    No generation: greedy verdicts of the 0.4 M model sit on one side whatever the content (experiments/LOG.md, "RL
    canaries"), so a greedy accuracy cannot see a policy that moved its odds toward the right side."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.prompts import get_template, judge_output

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32").eval()
    template = get_template(TEMPLATE)
    items = []  # (ids up to the letter, id of the right letter, id of the wrong letter)
    for pair in eval_pairs(n_pairs):
        for shown in (pair, pair.swapped()):
            prompt = tokenizer.apply_chat_template(template.render(shown), add_generation_prompt=True,
                                                   tokenize=True, return_dict=True)["input_ids"]
            answers = {c: tokenizer(judge_output(explain(shown), c, shown.strength), add_special_tokens=False)
                       ["input_ids"] for c in "ab"}
            at = next(i for i, (x, y) in enumerate(zip(answers["a"], answers["b"])) if x != y)
            items.append((prompt + answers["a"][:at], answers[shown.label][at], answers[shown.wrong_side][at]))
    width = max(len(ids) for ids, _, _ in items)
    ids = torch.full((len(items), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for i, (row, _, _) in enumerate(items):  # left padding: every row's next-token logits sit at the last column
        ids[i, width - len(row):] = torch.tensor(row)
        mask[i, width - len(row):] = 1
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -1, :]
    right = torch.tensor([r for _, r, _ in items])
    wrong = torch.tensor([w for _, _, w in items])
    two = torch.stack([logits[torch.arange(len(items)), right], logits[torch.arange(len(items)), wrong]], dim=1)
    return torch.softmax(two, dim=1)[:, 0].tolist()


def position_free(probabilities: list[float]) -> list[float]:
    """Per held-out pair, the right-verdict probability with the position preference taken out: a preference for
    'a' adds the same c to the log-odds of 'a' in both orders, and the right letter is 'a' in one order and 'b' in the
    other, so sigmoid of the mean of the two orders' log-odds of the right letter has no c in it. RL that only moves
    the judge's side (what the 0.4 M model does first) leaves it unchanged; learning the content raises it."""
    if len(probabilities) % 2:
        raise ValueError(f"expected both orders of each pair (an even count), got {len(probabilities)}")
    eps = 1e-9
    odds = [math.log(max(p, eps) / max(1 - p, eps)) for p in probabilities]
    return [1 / (1 + math.exp(-(odds[i] + odds[i + 1]) / 2)) for i in range(0, len(odds), 2)]


def by_right_response(values: list[float], n_pairs: int = 64) -> list[float]:
    """Per-pair ``values`` (the :func:`eval_pairs` order) averaged over the pairs whose better response is the same
    text, in first-seen order. The 64 held-out comparisons share their ten fruit answers (and four wordings of one
    question), so they are not 64 independent draws; the ten cluster means are, as far as the task goes. A sign test
    over them is the conservative reading of the canary (reported beside the gate, not part of it)."""
    pairs = eval_pairs(n_pairs)
    if len(values) != len(pairs):
        raise ValueError(f"expected one value per held-out pair ({len(pairs)}), got {len(values)}")
    groups: dict[str, list[float]] = {}
    for pair, value in zip(pairs, values):
        groups.setdefault(pair.response_a if pair.label == "a" else pair.response_b, []).append(value)
    return [sum(group) / len(group) for group in groups.values()]


def sign_test(before: list[float], after: list[float], *, alpha: float = ALPHA,
              min_rise: float = MIN_RISE) -> dict[str, Any]:
    """The canary's paired test, fixed in advance: per held-out judgment d = after - before; the one-sided exact sign
    test P(X >= ups) for X ~ Binomial(ups + downs, 1/2) (ties, d == 0, dropped), and the mean rise. ``learned`` is
    p < ``alpha`` AND mean rise >= ``min_rise``: a tiny but consistent drift is not learning the task."""
    if len(before) != len(after) or not before:
        raise ValueError(f"sign test needs two equally long, non-empty lists (got {len(before)} and {len(after)})")
    diffs = [a - b for b, a in zip(before, after)]
    ups, downs = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    p = sum(math.comb(ups + downs, i) for i in range(ups, ups + downs + 1)) / 2.0 ** (ups + downs)
    rise = sum(diffs) / len(diffs)
    return {"n": len(diffs), "before": sum(before) / len(before), "after": sum(after) / len(after), "rise": rise,
            "ups": ups, "downs": downs, "p_one_sided": p, "learned": p < alpha and rise >= min_rise}


def canary_arm(init: str | Path, root: str | Path, *, seed: int, control: str | None = None,
               before: list[float] | None = None, gen_before: dict[str, Any] | None = None,
               **settings: Any) -> dict[str, Any]:
    """One TRL canary arm: TRL GRPO from ``init`` on :data:`RL_PAIRS` canary pairs (right golds, or the negative
    ``control`` of :func:`canary_rl_pairs`), then :func:`judge_moved`. ``settings`` override :data:`RL_SETTINGS`.
    The result also holds the run's first and last rewards."""
    from thinkj.online.trl_grpo import GRPORun, run_trl_grpo

    arm = control or "right"
    root = Path(root)
    data = write_rl_pairs(root / f"rl-{arm}.jsonl", canary_rl_pairs(RL_PAIRS, seed, control=control))
    chosen = {**RL_SETTINGS, **settings}
    # file order: each step's golds balanced (canary_rl_pairs); a caller's own GRPOConfig fields are kept beside it
    extra = {"shuffle_dataset": False, **chosen.pop("extra", {})}
    run = GRPORun(model=str(init), data=str(data), out_dir=str(root / f"rl-{arm}"), seed=seed, device="cpu",
                  extra=extra, **chosen)
    summary = run_trl_grpo(run, force=True)
    return {**judge_moved(init, summary["model_dir"], before, gen_before), "arm": arm,
            "first_reward": summary["first_reward"], "last_reward": summary["last_reward"]}


def judge_moved(init: str | Path, trained: str | Path, before: list[float] | None = None,
                gen_before: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measure ``init`` and ``trained`` on the held-out pairs and test them (:func:`tests_from_records`).
    ``before``: the init's :func:`verdict_probabilities` and ``gen_before``: its :func:`own_generations`, measured
    when not given. The result keeps the measurements under ``records``, so the tests can be recomputed from a
    saved result (:func:`recheck_arm`)."""
    records = {"before": before if before is not None else verdict_probabilities(init),
               "after": verdict_probabilities(trained),
               "gen_before": gen_before if gen_before is not None else own_generations(init),
               "gen_after": own_generations(trained)}
    return {**tests_from_records(records), "records": records}


def tests_from_records(records: dict[str, Any]) -> dict[str, Any]:
    """The canary's tests from its measurements: :func:`sign_test` over the 64 held-out pairs of the
    :func:`position_free` probabilities (``before``/``after``: the 128 per-order :func:`verdict_probabilities`);
    ``per_order``, the same test on the 128 per-order values, and ``per_right_response``, the test over the
    :func:`by_right_response` clusters, both for the record; ``generation``, :func:`generation_held` on the two
    :func:`own_generations` (``gen_before``/``gen_after``)."""
    before, after = records["before"], records["after"]
    pair_before, pair_after = position_free(before), position_free(after)
    return {**sign_test(pair_before, pair_after), "per_order": sign_test(before, after),
            "per_right_response": sign_test(by_right_response(pair_before), by_right_response(pair_after)),
            "generation": generation_held(records["gen_before"], records["gen_after"])}


def recheck_arm(arm: dict[str, Any], where: str = "arm") -> None:
    """Raise ValueError unless every test figure saved in ``arm`` (a :func:`judge_moved` result, e.g. read back
    from ``canary.json``) equals the one recomputed from its own ``records``, naming the first field that differs."""
    if "records" not in arm:
        raise ValueError(f"{where}: no 'records' (measurements) saved, so its tests cannot be recomputed")
    try:
        fresh = tests_from_records(arm["records"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{where}: its records cannot be tested: {error!r}") from error

    def compare(saved: Any, recomputed: Any, path: str) -> None:
        if isinstance(recomputed, dict):
            if not isinstance(saved, dict):
                raise ValueError(f"{where}: {path} is {saved!r}, recomputed a table {recomputed}")
            for key, value in recomputed.items():
                compare(saved.get(key), value, f"{path}.{key}" if path else key)
        elif saved != recomputed:
            raise ValueError(f"{where}: {path} is saved as {saved!r} but its records give {recomputed!r}")

    compare(arm, fresh, "")


def recheck_canary(path: str | Path) -> tuple[bool, str]:
    """Recompute a saved ``canary.json`` (``thinkj train canary``): each arm's tests from its records
    (:func:`recheck_arm`) and the verdict from them (:func:`canary_verdict`); ValueError where a saved figure or
    the saved verdict differs from the recomputed one. Returns the verdict."""
    import json

    try:
        saved = json.loads(Path(path).read_text())
        arms = saved["arms"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a canary result ({error!r})") from error
    if len(arms) != 2:
        raise ValueError(f"{path}: expected two arms (right golds, control), found {len(arms)}")
    for i, arm in enumerate(arms):
        recheck_arm(arm, f"{path}, arms[{i}] ({arm.get('arm', '?')})")
    holds, why = canary_verdict(*arms)
    if (holds, why) != (saved.get("holds"), saved.get("why")):
        raise ValueError(f"{path}: saved verdict {saved.get('holds')!r} ({saved.get('why')!r}); the records give "
                         f"{holds!r} ({why!r})")
    return holds, why


def canary_machine() -> dict[str, Any]:
    """Where a canary ran: its numbers are exact for one CPU kernel set and thread count, not across them (the
    seed-0 init is 0.874, 0.863, 0.850 or 0.795 position-free by machine, ISA and threads; experiments/LOG.md,
    "session 28")."""
    import platform

    import torch

    from thinkj.evaluation.row_compare import git_commit

    cpu = platform.processor() or platform.machine()
    try:  # Linux names the model there; platform.processor() is often only the architecture
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"commit": git_commit(), "torch": torch.__version__, "cpu": cpu,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}


def machine_provenance(start: dict[str, Any], end_commit: str) -> dict[str, Any]:
    """The machine record of a run: :func:`canary_machine` taken when it started (the code that ran), with
    ``commit_at_end`` added when the checkout moved while it ran, so the record never names only the later one."""
    return start if end_commit == start["commit"] else {**start, "commit_at_end": end_commit}


def arm_summary(arm: dict[str, Any]) -> dict[str, Any]:
    """An arm's result without its bulk (the measurements under ``records``, verl's metric ``rows``): what a log
    line or a failure message shows."""
    return {k: v for k, v in arm.items() if k not in ("records", "rows")}


def canary_verdict(right: dict[str, Any], control: dict[str, Any]) -> tuple[bool, str]:
    """Whether a canary holds: the right-gold arm passes :func:`sign_test` and keeps its own answers
    (:func:`generation_held`), and its control does not pass :func:`sign_test`."""
    if not right["learned"]:
        return False, f"RL on the right golds did not learn the canary: {arm_summary(right)}"
    if not right["generation"]["held"]:
        return False, f"RL on the right golds lost its own answers (greedy accuracy or parse rate fell): {arm_summary(right)}"
    if control["learned"]:
        return False, f"RL on the {control['arm']} control passed the canary test: {arm_summary(control)}"
    gen, clusters = right["generation"], right.get("per_right_response")
    by_answer = f", {clusters['ups']} of {clusters['n']} right answers up, p {clusters['p_one_sided']:.2g}" \
        if clusters else ""
    return True, f"learned (rise {right['rise']:+.3f}, p {right['p_one_sided']:.2g}{by_answer}; own answers " \
                 f"{gen['before']:.3f} -> {gen['after']:.3f}, parsed {gen['parse_after']:.2f}); control " \
                 f"{control['arm']} did not (rise {control['rise']:+.3f})"


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
