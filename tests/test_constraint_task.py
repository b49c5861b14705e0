"""The instruction-constraint judging task: labels agree with the rule checker, held-out items share no prompt with
training items and number in the thousands, the oracle on hand-written responses, and the task through the demo's
interface, the scripted teacher and `thinkj data task`."""

from __future__ import annotations

import json

import pytest

from thinkj.prompts import get_template
from thinkj.synthetic import constraint_task as ct
from thinkj.synthetic.scripted_teacher import TeacherConfig, scripted_answer
from thinkj.synthetic.tasks import get_task
from thinkj.verdict_parser import parse_verdict


def test_every_pair_is_labelled_by_the_oracle_and_the_worse_response_breaks_only_the_rule():
    for split in ("train", "test"):
        pairs = ct.make_pairs(600, seed=1, split=split)
        assert sum(p.label == "a" for p in pairs) == 300
        assert {p.meta["kind"] for p in pairs} == set(ct.KINDS)
        for p in pairs:
            constraint = ct.constraint_of(p.instruction)
            assert constraint is not None and constraint.kind == p.meta["kind"], p.instruction
            assert ct.rule_verdict(p) == p.label, p
    assert ct.make_pairs(30, seed=2) == ct.make_pairs(30, seed=2)


def test_held_out_items_share_no_prompt_with_training_items_and_are_thousands():
    report = ct.split_report()
    assert report["shared_subjects"] == report["shared_words"] == report["shared_items"] == 0
    assert report["test_items"] >= 3000 and report["train_items"] >= 3000
    train = {p.instruction for p in ct.make_pairs(2000, seed=0)}
    test = [p.instruction for p in ct.make_pairs(2000, seed=0, split="test")]
    assert not train & set(test)
    assert len(set(test)) >= 1500  # 2,000 draws from the test part: mostly distinct items


@pytest.mark.parametrize("kind,word,limit,good,bad", [
    ("lowercase", "", 0, "the old harbor is calm.", "The old harbor is calm."),
    ("uppercase", "", 0, "THE OLD HARBOR IS CALM.", "THE OLD HARBOR IS Calm."),
    ("no_commas", "", 0, "It is calm and quiet.", "It is calm, and quiet."),
    ("mention", "lantern", 0, "A Lantern glows.", "A lanterns glow."),
    ("end_with", "tonight", 0, "We go out tonight.", "Tonight we go out."),
    ("start_with", "echo", 0, "Echo, the valley answers.", "The valley answers echo."),
    ("one_word", "", 0, "Calm.", "Very calm."),
    ("max_words", "", 5, "It is very calm here.", "It is very calm here today."),
])
def test_the_oracle_on_hand_written_responses(kind, word, limit, good, bad):
    constraint = ct.Constraint(kind, word, limit)
    assert ct.constraint_of(f"Write one sentence about the old harbor. {constraint.text}") == constraint
    assert ct.satisfies(constraint, good) and not ct.satisfies(constraint, bad)
    assert not ct.satisfies(constraint, "   ")  # an empty answer follows no rule


def test_the_task_through_the_demo_interface_and_the_scripted_teacher():
    task, judge = get_task("constraints"), get_template("judge_strength_v1")
    config = TeacherConfig(error_rate=0.0, empty_explanation_rate=0.0, task="constraints")
    for pair in ct.make_pairs(24, seed=4):
        prompt = judge.render(pair)[-1]["content"]
        reasoning, content = scripted_answer(prompt, config)
        verdict = parse_verdict(f"<think>\n{reasoning}\n</think>\n{content}", judge.answer, strict=True)
        assert verdict.choice == pair.label and task.explain(pair) in content
        wrong = "b" if pair.label == "a" else "a"
        assert task.argue(pair, wrong).endswith(f"so Response ({wrong}) is right.")
        assert task.argue(pair, pair.label) == task.explain(pair)


def test_thinkj_data_task_writes_the_constraint_task(tmp_path):
    from typer.testing import CliRunner

    from thinkj.data.cli import app
    from thinkj.records import load_pairs

    result = CliRunner().invoke(app, ["task", "constraints", str(tmp_path / "t"), "--train", "40", "--test", "300"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["test"] == 300
    test = load_pairs(tmp_path / "t" / "test.jsonl")
    assert len(test) == 300 and all(ct.rule_verdict(p) == p.label for p in test)
