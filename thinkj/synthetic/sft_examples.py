"""Judge and critic SFT examples (and plain DPO pairs) written from a generated task's gold verdicts, for when no
teacher traces exist.

The rationale is the task's rule (``explain``; the fruit task's by default), so the demo and the CPU rehearsal can
train an initial judge and a critic without an R1 endpoint. Only decided pairs (label ``a`` or ``b``) give examples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from thinkj.prompts import Messages, get_template, judge_output
from thinkj.records import PreferencePair
from thinkj.synthetic import fruit_task


def judge_sft_examples(pairs: Iterable[PreferencePair], template: str = "judge_strength_v2", *,
                       explain: Callable[[PreferencePair], str] | None = None) -> list[tuple[Messages, str]]:
    """Judge SFT on a demo task: rule-based rationale (``explain``, default the fruit task's) + the right verdict."""
    tmpl = get_template(template)
    strength = tmpl.answer.strength != "forbidden"
    explain = explain or fruit_task.explain
    return [(tmpl.render(p), judge_output(explain(p), p.label, p.strength if strength else None))
            for p in pairs if p.decided]


def critic_sft_examples(pairs: Iterable[PreferencePair], template: str = "critic_strength_v2", *,
                        wrong_side_every: int = 0, explain: Callable[[PreferencePair], str] | None = None,
                        argue: Callable[[PreferencePair, str], str] | None = None) -> list[tuple[Messages, str]]:
    """Critic SFT on the synthetic task: told a side, it writes the rationale and a verdict for that side.

    By default the critic is only told the right side (the paper's critic data). ``wrong_side_every=k`` tells it the
    wrong side in every k-th example (the verdict still follows what it is told): a tiny model has no instruction
    following to generalise from, and without such examples it learns to judge instead of to argue the side it is
    given, so it never writes the negatives of the critic-guided construction.

    ``argue(pair, side)`` writes a wrong-side example's rationale: one that reaches the told side (a false claim about
    the task's fact), as the paper's critic argues the verdict it is given. Without it the wrong side gets the right
    rationale and only the verdict line follows what the critic was told, so the critic learns to contradict its own
    reasoning and the DPO pairs it writes differ in the verdict line alone.
    """
    tmpl = get_template(template)
    strength = tmpl.answer.strength != "forbidden"
    explain = explain or fruit_task.explain
    out = []
    for i, p in enumerate(p for p in pairs if p.decided):
        wrong = wrong_side_every > 0 and i % wrong_side_every == wrong_side_every - 1
        told = p.wrong_side if wrong else p.label
        # As in the critic-guided construction: the right side comes with its strength, the wrong side without.
        prompt = tmpl.render(p, told, None if wrong else p.strength)
        rationale = argue(p, told) if wrong and argue else explain(p)
        out.append((prompt, judge_output(rationale, told, p.strength if strength else None)))
    return out


def judge_dpo_examples(pairs: Iterable[PreferencePair], template: str = "judge_strength_v2", *,
                       explain: Callable[[PreferencePair], str] | None = None) -> list[tuple[Messages, str, str]]:
    """(prompt, chosen, rejected) for exercising a DPO stage: the right verdict against the wrong one, same rationale.

    The pair differs in the verdict line alone, so it checks that an engine trains on preferences, not what the
    paper's critic-guided pairs (``thinkj.offline.critic_pairs``) teach.
    """
    tmpl = get_template(template)
    strength = tmpl.answer.strength != "forbidden"
    explain = explain or fruit_task.explain
    out = []
    for p in (p for p in pairs if p.decided):
        rationale, stated = explain(p), p.strength if strength else None
        out.append((tmpl.render(p), judge_output(rationale, p.label, stated),
                    judge_output(rationale, p.wrong_side, stated)))
    return out
