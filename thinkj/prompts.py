"""Prompt templates, registered by versioned name.

A template turns a PreferencePair (and, for a critic, the verdict it must justify) into chat
messages. Anything that changes what a model sees gets a new version name instead of an edit, so
results recorded under ``judge_strength_v1`` keep meaning the same thing. The ``*_v2`` templates (the
defaults) follow the paper's format; ``*_v1`` add one sentence the paper does not have, against length,
style and position bias ("Length and style are not merits ..."), which can move RM-Bench and position
consistency. ``*_public_v1`` ask for the public Think-J code's answer sentences, for its exact rewards.

Each template also declares the answer format it asks for (:class:`AnswerFormat`), which is what
the verdict parser checks in strict mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from thinkj.records import PreferencePair
from thinkj.registry import Registry

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class AnswerFormat:
    """What a well-formed answer looks like for a template."""

    think: bool = True  # a <think>...</think> block comes first
    strength: str = "required"  # "required" | "forbidden" | "optional"
    scores: bool = False  # double-score answer instead of a choice sentence


@dataclass(frozen=True)
class Template:
    name: str
    kind: str  # judge | critic | direct | double_score
    answer: AnswerFormat
    build: Callable[[PreferencePair, str | None, int | None], Messages]
    description: str = ""

    def render(self, pair: PreferencePair, verdict: str | None = None, strength: int | None = None) -> Messages:
        if self.kind == "critic" and verdict not in ("a", "b"):
            raise ValueError(f"template {self.name} is a critic: pass the verdict to justify ('a' or 'b')")
        return self.build(pair, verdict, strength)


_REGISTRY: Registry[Template] = Registry("template")


def register(template: Template) -> Template:
    return _REGISTRY.add(template.name, template)


def get_template(name: str) -> Template:
    return _REGISTRY.lookup(name)


def list_templates() -> list[str]:
    return sorted(_REGISTRY)


def verdict_sentence(choice: str, strength: int | None = None) -> str:
    """The final line a Think-J judge writes, e.g. ``Therefore, Response (a) is better, ...``."""
    if choice not in ("a", "b"):
        raise ValueError(f"choice must be 'a' or 'b', got {choice!r}")
    if strength is None:
        return f"Therefore, Response ({choice}) is better."
    return f"Therefore, Response ({choice}) is better, and the preference strength is [[{strength}]]."


def scores_sentence(score_a: int, score_b: int) -> str:
    return (f"Therefore, the quality scores for Response (a) and Response (b) are [[{score_a}]] and [[{score_b}]], "
            "respectively.")


def judge_output(thinking: str, choice: str, strength: int | None = None) -> str:
    """A complete judge answer: the thinking block then the verdict sentence (SFT targets use this)."""
    return f"<think>\n{thinking.strip()}\n</think>\n{verdict_sentence(choice, strength)}"


# ---------------------------------------------------------------------------------------------
# Shared pieces. The wording is ours; the answer formats follow the Think-J paper (§3.2.2, A.1).

_ROLE = ("You are a careful and impartial judge of AI assistant answers. You will see a conversation "
         "and two candidate responses to its last user message.")

_CRITERIA = ("Decide which response serves the user better. Weigh, in this order: whether it is correct "
             "and safe, whether it actually does what was asked, and whether it is clear and useful.")
# Not in the paper: an instruction against length, style and position bias. It can move RM-Bench (style) and
# position consistency, so only the *_v1 templates carry it; the defaults (*_v2) are the paper's format.
_BIAS_NOTE = ("Length and style are not merits in themselves, and the order in which the responses are "
              "shown must not influence you.")

_STRENGTH_SCALE = ("Also rate the preference strength: 1 if the better response is only slightly better, "
                   "2 if it is clearly better, 3 if it is much better.")


def _conversation_block(pair: PreferencePair) -> str:
    if len(pair.messages) == 1:
        return f"[User question]\n{pair.messages[0]['content']}"
    lines = []
    for message in pair.messages:
        lines.append(f"[{message['role'].capitalize()}]\n{message['content']}")
    return "[Conversation]\n" + "\n\n".join(lines)


def _pair_block(pair: PreferencePair) -> str:
    return (f"{_conversation_block(pair)}\n\n"
            f"[Response (a)]\n{pair.response_a}\n[End of Response (a)]\n\n"
            f"[Response (b)]\n{pair.response_b}\n[End of Response (b)]")


def _answer_instructions(strength: bool, public: bool = False) -> str:
    if public:  # the public Think-J prompt's final sentence ("the strength", not "the preference strength")
        last = "Therefore, Response (a) is better, and the strength is [[2]]."
    else:
        last = verdict_sentence("a", 2) if strength else verdict_sentence("a")
    return ("First think it through inside <think> and </think>: point out the decisive difference between "
            "the two responses. Then, after </think>, write exactly one final line in this form, with (a) "
            f"or (b):\n{last}")


def _criteria(bias_note: bool) -> list[str]:
    return [_ROLE, f"{_CRITERIA} {_BIAS_NOTE}" if bias_note else _CRITERIA]


Builder = Callable[[PreferencePair, str | None, int | None], Messages]


def _judge(strength: bool, bias_note: bool, public: bool = False) -> Builder:
    def build(pair: PreferencePair, verdict: str | None, level: int | None) -> Messages:
        parts = _criteria(bias_note)
        if strength:
            parts.append(_STRENGTH_SCALE)
        parts.append(_answer_instructions(strength, public))
        return [{"role": "user", "content": "\n\n".join(parts) + "\n\n" + _pair_block(pair)}]

    return build


def _critic(strength: bool, bias_note: bool) -> Builder:
    def build(pair: PreferencePair, verdict: str | None, level: int | None) -> Messages:
        target = f"Response ({verdict})"
        told = f"You are told that {target} is the better one."
        if strength and level is not None:
            told += f" Its preference strength is {level}."
        parts = _criteria(bias_note) + [
            told, f"Write the judgment a careful judge would write on the way to that conclusion: the reasoning "
                  f"that shows why {target} is better. Do not mention that you were told the answer."]
        if strength:
            parts.append(_STRENGTH_SCALE)
        parts.append(_answer_instructions(strength))
        return [{"role": "user", "content": "\n\n".join(parts) + "\n\n" + _pair_block(pair)}]

    return build


def _direct(bias_note: bool) -> Builder:
    def build(pair: PreferencePair, verdict: str | None, level: int | None) -> Messages:
        parts = _criteria(bias_note) + ["Answer with the verdict only, no explanation, in exactly this form, with "
                                        "(a) or (b):\n" + verdict_sentence("a")]
        return [{"role": "user", "content": "\n\n".join(parts) + "\n\n" + _pair_block(pair)}]

    return build


def _double_score(bias_note: bool, public: bool = False) -> Builder:
    if public:  # the public code's tags, which its margin reward (reward_score.py) reads
        last = "Therefore, the scores are <Score 1>30</Score 1> and <Score 2>50</Score 2>, for Response (a) and (b)."
    else:
        last = scores_sentence(30, 50)

    def build(pair: PreferencePair, verdict: str | None, level: int | None) -> Messages:
        parts = _criteria(bias_note) + [
            "Give each response a quality score from 0 to 100. First think it through inside <think> and "
            "</think>. Then, after </think>, write exactly one final line in this form:\n" + last]
        return [{"role": "user", "content": "\n\n".join(parts) + "\n\n" + _pair_block(pair)}]

    return build


_STRENGTH_FMT = AnswerFormat(think=True, strength="required")
_COT_FMT = AnswerFormat(think=True, strength="forbidden")
_V1 = " v1 adds a sentence the paper lacks (length and style are no merits; the order must not matter)."
# (family, kind, answer format, builder factory taking bias_note, description). Each family is registered as
# _v2 (the paper's format: the defaults) and _v1 (the same plus the bias sentence, as first released).
_FAMILIES = (
    ("judge_strength", "judge", _STRENGTH_FMT, lambda note: _judge(True, note),
     "Think-J judge: thinking, then verdict with preference strength 1-3 (paper §3.2.2)."),
    ("judge_cot", "judge", _COT_FMT, lambda note: _judge(False, note),
     "Judge with thinking and a verdict without strength."),
    ("critic_strength", "critic", _STRENGTH_FMT, lambda note: _critic(True, note),
     "Critic: told the better response (and strength), writes the thinking that leads there."),
    ("critic_cot", "critic", _COT_FMT, lambda note: _critic(False, note), "Critic without strength."),
    ("direct", "direct", AnswerFormat(think=False, strength="forbidden"), _direct,
     "Direct judge: the verdict sentence only, no explanation (Direct Prompt w/o CoT, SFT w/o CoT)."),
    ("double_score", "double_score", AnswerFormat(think=True, strength="forbidden", scores=True), _double_score,
     "Two 0-100 quality scores after thinking (paper Appendix A.1)."),
)
for _family, _kind, _format, _factory, _text in _FAMILIES:
    register(Template(f"{_family}_v2", _kind, _format, _factory(False), _text))
    register(Template(f"{_family}_v1", _kind, _format, _factory(True), _text + _V1))
register(Template("judge_strength_public_v1", "judge", AnswerFormat(think=True, strength="optional"),
                  _judge(True, False, public=True),
                  "As judge_strength_v2, but asks for the public code's 'the strength is [[N]]' (preset strength_public)."))
register(Template("double_score_public_v1", "double_score", AnswerFormat(think=True, strength="forbidden", scores=True),
                  _double_score(False, public=True),
                  "Two 0-100 scores in the public code's <Score 1>/<Score 2> tags (preset margin_public)."))


# Seed 000's judge (kalomaze, "GRPO Judge Experiments"): XML tags, no strength; its task is thinkj.data.xml_judge_task.
def _xml_judge(pair: PreferencePair, verdict: str | None, level: int | None) -> Messages:
    system = ("You judge which of two text samples is better. Answer in two XML tags and nothing else: first "
              "<notes> with your reasoning, about 128 tokens long, then <judgement> holding only the letter of "
              "the sample you pick.\nExample of the shape:\n<notes>\nSample B reads naturally, while Sample A "
              "contradicts itself about ...\n</notes>\n<judgement>B</judgement>")
    user = (f"{pair.instruction}\n\n[Sample A]\n{pair.response_a}\n\n[Sample B]\n{pair.response_b}\n\n"
            "Write your <notes> and your <judgement> now.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


register(Template(
    "xml_judge_v1", "xml_judge", AnswerFormat(think=False, strength="forbidden"), _xml_judge,
    "Seed 000 judge: <notes> (~128 tokens) then <judgement>A|B</judgement>; parsed by thinkj.rewards.designs.xml_judge."))
