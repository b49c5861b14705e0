"""Critic-guided DPO pairs (paper §3.2.1) and the "offline (Sampling)" baseline (Table 4).

For each training comparison (a *view*: the pair in one response order) the judge writes a trace with the
Think-J judge prompt. Then:

* judge **right** (the verdict is the gold side and the answer is well-formed): the judge's trace is the
  positive; the critic is told the WRONG side and writes the negative. The negative is kept only if the
  critic's own answer really names the wrong side (``parse_verdict``).
* judge **wrong** (wrong side, unparsable or ill-formed answer): the judge's trace is the negative; the
  critic is told the RIGHT side and writes the positive. It is kept only if it names the right side and is
  well-formed, so DPO never pushes towards a broken answer.

Every DPO example's prompt is the judge prompt (``judge_strength_v2``) -- the same messages the judge saw
in SFT and sees at evaluation -- never the critic's prompt (the public code used the critic prompt there).
Ties are skipped (no right side). Each dropped view is counted with its reason. A view with a judge or critic
call that failed after the backend's retries (:class:`~thinkj.inference.failures.FailedCall`) is dropped, never
read as a wrong verdict; ``PairSet.calls`` counts the calls and failures so the caller applies the failure rule.

The Sampling baseline replaces the critic: the judge samples ``n`` traces per view, and a right trace is
paired with a wrong one from the same view.

    from thinkj.offline.critic_pairs import critic_guided_pairs
    result = critic_guided_pairs(pairs, judge_backend, critic_backend)
    result.write(out_dir, "thinkj_dpo")     # LlamaFactory ranking dataset + pairs_log.jsonl + summary.json
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.export.llamafactory import write_preference_dataset
from thinkj.inference.base import InferenceBackend, Messages, SamplingParams
from thinkj.inference.failures import CallTally, FailedCall
from thinkj.prompts import get_template
from thinkj.records import PreferencePair, write_json, write_jsonl
from thinkj.verdict_parser import parse_verdict

JUDGE_TEMPLATE = "judge_strength_v2"
CRITIC_TEMPLATE = "critic_strength_v2"
ORDERS = ("original", "swapped")
_OTHER = {"a": "b", "b": "a"}


@dataclass
class PairSet:
    """DPO examples plus one log row per view and counts of what was kept and dropped."""

    examples: list[tuple[Messages, str, str]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    settings: dict[str, Any] = field(default_factory=dict)
    calls: CallTally = field(default_factory=CallTally)  # generation calls asked for, and how many failed

    def summary(self) -> dict[str, Any]:
        return {"pairs": len(self.examples), "counts": dict(sorted(self.counts.items())), "calls": self.calls.summary(),
                **self.settings}

    def write(self, out_dir: str | Path, name: str) -> dict[str, Any]:
        """Write the LlamaFactory dataset ``name`` (in ``out_dir``), ``pairs_log.jsonl`` and ``summary.json``."""
        out = Path(out_dir)
        write_preference_dataset(out, name, self.examples)
        write_jsonl(out / "pairs_log.jsonl", self.log)
        summary = {"dataset": name, "dataset_dir": str(out), **self.summary()}
        write_json(out / "summary.json", summary)
        return summary


def make_views(pairs: list[PreferencePair], orders: tuple[str, ...] = ("original",)) -> list[tuple[str, PreferencePair]]:
    """(order, pair as shown) for each requested order; ``swapped`` exchanges the responses and the label."""
    bad = [o for o in orders if o not in ORDERS]
    if bad:
        raise ThinkJError(f"unknown order(s) {bad}; use {ORDERS}")
    return [(order, pair if order == "original" else pair.swapped()) for pair in pairs for order in orders]


def _is_right(text: str, gold: str, fmt) -> tuple[bool, str]:
    """A positive must name the gold side AND be well-formed (strict); returns (ok, why not)."""
    verdict = parse_verdict(text, fmt, strict=True)
    if verdict.choice != gold:
        return False, f"verdict {verdict.choice}" + (f" ({verdict.reason})" if verdict.reason else "")
    if not verdict.well_formed:
        return False, f"ill-formed ({verdict.reason})"
    return True, ""


def _names(text: str, side: str, fmt) -> bool:
    """A negative only has to really reach ``side`` (lenient parse: its form may be imperfect)."""
    return parse_verdict(text, fmt, strict=False).choice == side


def critic_guided_pairs(pairs: list[PreferencePair], judge: InferenceBackend, critic: InferenceBackend, *,
                        judge_params: SamplingParams | None = None, critic_params: SamplingParams | None = None,
                        orders: tuple[str, ...] = ("original",), judge_template: str = JUDGE_TEMPLATE,
                        critic_template: str = CRITIC_TEMPLATE) -> PairSet:
    """Build critic-guided DPO pairs. With ``critic_params.n > 1`` the first critic sample that obeys the rule is used."""
    from thinkj.models.profiles import generation_budget

    # without params: the main base model's profile budget, as for evaluation and the difficulty filter
    judge_params = judge_params or SamplingParams(temperature=0.0, max_new_tokens=generation_budget())
    critic_params = critic_params or SamplingParams(temperature=0.0, max_new_tokens=judge_params.max_new_tokens)
    jt, ct = get_template(judge_template), get_template(critic_template)
    if jt.kind != "judge" or ct.kind != "critic":
        raise ThinkJError(f"{judge_template} must be a judge template and {critic_template} a critic template")
    result = PairSet(settings={"judge": judge.name, "critic": critic.name, "judge_template": judge_template,
                               "critic_template": critic_template, "orders": list(orders),
                               "judge_sampling": judge_params.to_dict(), "critic_sampling": critic_params.to_dict()})
    views = []
    for order, view in make_views(pairs, orders):
        if not view.decided:
            result.counts["dropped: tie label"] += 1
            result.log.append({"item_id": view.id, "order": order, "case": "tie", "kept": False, "why": "tie label"})
            continue
        views.append((order, view))
    prompts = [jt.render(view) for _, view in views]
    judge_out = judge.generate(prompts, judge_params) if prompts else []
    result.calls.add(judge_out)
    answered = []
    for (order, view), prompt, samples in zip(views, prompts, judge_out):
        if isinstance(samples[0], FailedCall):
            _drop_failed(result, view, order, "judge", samples[0])
        else:
            answered.append((order, view, prompt, samples[0]))
    # One critic request per view: the wrong side when the judge was right, the right side otherwise.
    cases, critic_prompts = [], []
    for _, view, _, judge_text in answered:
        right, why = _is_right(judge_text, view.label, jt.answer)
        target = _OTHER[view.label] if right else view.label
        strength = view.strength if not right else None  # the critic argues the wrong side at its own strength
        cases.append((right, why, target))
        critic_prompts.append(ct.render(view, target, strength))
    critic_out = critic.generate(critic_prompts, critic_params) if critic_prompts else []
    result.calls.add(critic_out)
    for (order, view, prompt, judge_text), (right, why, target), critic_samples in zip(answered, cases, critic_out):
        failed = next((t for t in critic_samples if isinstance(t, FailedCall)), None)
        if failed is not None:  # the first obeying sample must not depend on which calls happened to answer
            _drop_failed(result, view, order, "critic", failed)
            continue
        row = {"item_id": view.id, "order": order, "gold": view.label, "judge_right": right, "judge_why": why,
               "critic_target": target}
        if right:
            negative = next((t for t in critic_samples if _names(t, target, ct.answer)), None)
            row["case"] = "judge_right"
            if negative is None:
                got = parse_verdict(critic_samples[0] if critic_samples else "", ct.answer, strict=False).choice
                result.counts["dropped: judge right, critic did not reach the wrong verdict"] += 1
                row.update(kept=False, why=f"critic verdict {got}, wanted {target}")
            else:
                result.examples.append((prompt, judge_text, negative))
                result.counts["kept: judge right, critic negative"] += 1
                row.update(kept=True, chosen="judge", rejected="critic")
        else:
            checks = [(t, *_is_right(t, target, ct.answer)) for t in critic_samples]
            positive = next((t for t, ok, _ in checks if ok), None)
            row["case"] = "judge_wrong"
            if positive is None:
                result.counts["dropped: judge wrong, critic trace not right and well-formed"] += 1
                row.update(kept=False, why=checks[0][2] if checks else "no critic output")
            else:
                result.examples.append((prompt, positive, judge_text))
                result.counts["kept: judge wrong, critic positive"] += 1
                row.update(kept=True, chosen="critic", rejected="judge")
        result.log.append(row)
    result.counts["views"] = len(views)
    result.counts["judge right"] = sum(c[0] for c in cases)
    return result


def _drop_failed(result: PairSet, view: PreferencePair, order: str, role: str, failed: FailedCall) -> None:
    """A view whose ``role`` call failed after retries: dropped and counted, never judged right or wrong."""
    result.counts[f"dropped: {role} call failed"] += 1
    result.log.append({"item_id": view.id, "order": order, "gold": view.label, "case": f"{role}_call_failed",
                       "kept": False, "why": f"{role} call failed after retries: {' '.join(failed.error.split())[:200]}"})


def sampling_pairs(pairs: list[PreferencePair], judge: InferenceBackend, *, n: int = 8,
                   params: SamplingParams | None = None, pairs_per_view: int = 1, orders: tuple[str, ...] = ("original",),
                   judge_template: str = JUDGE_TEMPLATE) -> PairSet:
    """Table 4 "offline (Sampling)": from ``n`` sampled judge traces per view, pair right ones with wrong ones."""
    if params is None:  # the main base model's profile budget, as for evaluation and the difficulty filter
        from thinkj.models.profiles import generation_budget

        params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=generation_budget(), n=n)
    if params.n != n:
        params = SamplingParams(params.temperature, params.top_p, params.max_new_tokens, n, params.seed)
    jt = get_template(judge_template)
    result = PairSet(settings={"judge": judge.name, "judge_template": judge_template, "orders": list(orders),
                               "sampling": params.to_dict(), "pairs_per_view": pairs_per_view})
    views = make_views(pairs, orders)
    ties = [(o, v) for o, v in views if not v.decided]
    views = [(o, v) for o, v in views if v.decided]
    result.counts["dropped: tie label"] += len(ties)
    prompts = [jt.render(view) for _, view in views]
    outputs = judge.generate(prompts, params) if prompts else []
    result.calls.add(outputs)
    for (order, view), prompt, samples in zip(views, prompts, outputs):
        failed = next((t for t in samples if isinstance(t, FailedCall)), None)
        if failed is not None:  # which samples pair up must not depend on which calls happened to answer
            _drop_failed(result, view, order, "judge", failed)
            continue
        # Right: gold side and well-formed. Wrong: the other side or no verdict. A well-aimed but ill-formed trace is
        # neither, so a pair never teaches "prefer this format over that" by accident.
        right = [t for t in samples if _is_right(t, view.label, jt.answer)[0]]
        wrong = [t for t in samples if parse_verdict(t, jt.answer, strict=False).choice != view.label]
        row = {"item_id": view.id, "order": order, "gold": view.label, "right": len(right), "wrong": len(wrong)}
        if not right or not wrong:
            reason = "all samples right" if right else "no right sample"
            result.counts[f"dropped: {reason}"] += 1
            row.update(kept=False, why=reason)
        else:
            k = min(pairs_per_view, len(right), len(wrong))
            result.examples.extend((prompt, right[i], wrong[i]) for i in range(k))
            result.counts["kept views"] += 1
            row.update(kept=True, pairs=k)
        result.log.append(row)
    result.counts["views"] = len(views)
    return result
