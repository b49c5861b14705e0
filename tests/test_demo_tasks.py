"""The demo's tasks: the facts task's entity split, its rationales and the scripted teacher's rules for it."""

from __future__ import annotations

import pytest

from thinkj.evaluation.row_compare import learning_checks, row_metrics
from thinkj.prompts import get_template
from thinkj.synthetic import fact_task
from thinkj.synthetic.scripted_teacher import TeacherConfig, scripted_answer
from thinkj.synthetic.tasks import get_task
from thinkj.verdict_parser import parse_verdict


def test_held_out_items_share_no_entity_or_value_with_training_items():
    report = fact_task.split_report()
    assert report["shared_entities"] == 0 and report["shared_values"] == 0 and report["test_facts"] >= 30
    train, test = fact_task.make_pairs(300, seed=1), fact_task.make_pairs(200, seed=1, split="test")
    test_facts = {(f.family, f.entity) for f in fact_task.facts("test")}
    for p in test:  # the asked fact and every fact a response borrows (wrong value, off-topic answer) are held out
        used = [(p.meta["family"], p.meta["entity"])] + [tuple(f) for f in p.meta["borrowed"]]
        assert set(used) <= test_facts, p
    assert {p.meta["split"] for p in train} == {"train"}


def test_pairs_are_balanced_and_the_rule_agrees_with_the_label():
    pairs = fact_task.make_pairs(200, seed=0)
    assert sum(p.label == "a" for p in pairs) == 100
    assert all(fact_task.rule_verdict(p) == p.label for p in pairs)
    assert {p.meta["bad_kind"] for p in pairs} == set(fact_task.BAD_KINDS)
    assert fact_task.make_pairs(20, seed=0) == fact_task.make_pairs(20, seed=0)


def test_rationale_states_the_fact_and_what_each_response_does():
    pair = next(p for p in fact_task.make_pairs(100, seed=2) if p.meta["bad_kind"] == "wrong")
    fact = fact_task.fact_of(pair.instruction)
    text = fact_task.explain(pair)
    good, bad = ("(a)", "(b)") if pair.label == "a" else ("(b)", "(a)")
    wrong = pair.response_b if pair.label == "a" else pair.response_a
    assert f"Response {good} says {fact.value}." in text
    assert f"Response {bad} {fact_task.what_it_says(wrong, fact)}." in text
    assert text.endswith(f"The answer is {fact.value}, so Response {good} is right.")


def test_a_wrong_side_argument_concludes_for_the_side_it_is_told():
    from thinkj.synthetic.sft_examples import critic_sft_examples
    from thinkj.verdict_parser import parse_verdict as parse

    pairs = fact_task.make_pairs(60, seed=3)
    for kind in ("wrong", "refusal"):
        pair = next(p for p in pairs if p.meta["bad_kind"] == kind)
        fact, bad = fact_task.fact_of(pair.instruction), "b" if pair.label == "a" else "a"
        assert fact_task.argue(pair, pair.label) == fact_task.explain(pair)
        text = fact_task.argue(pair, bad)
        assert text.endswith(f"so Response ({bad}) is right.")
        said = fact_task.what_it_says(pair.response_a if bad == "a" else pair.response_b, fact)
        claim = f"The answer is {said[5:]}" if said.startswith("says ") else f"The answer is not {fact.value}"
        assert claim in text
    # the critic's wrong-side examples: rationale and verdict line agree with the side it was told
    examples = critic_sft_examples(pairs[:8], wrong_side_every=2, explain=fact_task.explain,
                                   argue=fact_task.argue)
    for (_, output), pair in zip(examples[1::2], pairs[1:8:2]):
        told = parse(output).choice
        assert told != pair.label and f"so Response ({told}) is right." in output


def test_judge_dpo_examples_prefer_the_gold_verdict_and_skip_ties():
    from dataclasses import replace

    from thinkj.synthetic.sft_examples import judge_dpo_examples
    from thinkj.verdict_parser import parse_verdict as parse

    pairs = fact_task.make_pairs(6, seed=3)
    tie = replace(pairs[0], id="tie", label="tie")
    examples = judge_dpo_examples([*pairs, tie], "judge_strength_v1", explain=fact_task.explain)
    assert len(examples) == len(pairs)  # the tie has no right verdict to prefer
    with pytest.raises(ValueError, match="no wrong side"):
        tie.wrong_side  # noqa: B018
    fmt = get_template("judge_strength_v1").answer
    for (prompt, chosen, rejected), pair in zip(examples, pairs):
        assert prompt == get_template("judge_strength_v1").render(pair)
        assert parse(chosen, fmt, strict=True).choice == pair.label
        assert parse(rejected, fmt, strict=True).choice == ("b" if pair.label == "a" else "a")
        assert chosen.split("Therefore")[0] == rejected.split("Therefore")[0]  # the same rationale


def test_scripted_teacher_judges_the_facts_task():
    task, judge = get_task("facts"), get_template("judge_strength_v1")
    config = TeacherConfig(error_rate=0.0, empty_explanation_rate=0.0, task="facts")
    for pair in fact_task.make_pairs(20, seed=4):
        prompt = judge.render(pair)[-1]["content"]
        reasoning, content = scripted_answer(prompt, config)
        verdict = parse_verdict(f"<think>\n{reasoning}\n</think>\n{content}", judge.answer, strict=True)
        assert verdict.choice == pair.label and task.explain(pair) in content


def test_summary_metrics_and_checks():
    def records(item, gold, orig, swap):
        other = "b" if gold == "a" else "a"
        return [{"item_id": item, "order": "original", "gold": gold, "verdict": orig, "correct": orig == gold},
                {"item_id": item, "order": "swapped", "gold": other, "verdict": swap, "correct": swap == other}]

    constant = records("x", "a", "a", "a") + records("y", "b", "a", "a")  # always "(a)": 50 %, no pair right
    m = row_metrics(constant)
    assert (m["accuracy"], m["pair_accuracy"], m["consistency"], m["n_items"]) == (50.0, 0.0, 0.0, 2)
    good = records("x", "a", "a", "b") + records("y", "b", "b", None)
    m = row_metrics(good)
    assert (m["accuracy"], m["pair_accuracy"], m["consistency"], m["parse_failure"]) == (75.0, 50.0, 50.0, 25.0)
    rows = {"base": {"accuracy": 10, "accuracy_ci95": [5, 20], "pair_accuracy": 0},
            "init": {"accuracy": 50, "accuracy_ci95": [40, 60], "pair_accuracy": 30},
            "offline": {"accuracy": 55, "accuracy_ci95": [45, 65], "pair_accuracy": 61}}
    assert learning_checks(rows) == {"init_above_base": True, "best_trained": "offline", "best_above_init": False,
                                     "best_pair_accuracy_at_least_60": True}


def test_paired_comparison_counts_the_judgments_only_one_row_got_right():
    from thinkj.evaluation.row_compare import paired_comparison

    def judged(rights):
        return [{"item_id": f"i{k // 2}", "order": ("original", "swapped")[k % 2], "correct": ok, "verdict": "a"}
                for k, ok in enumerate(rights)]

    earlier = judged([True] * 6 + [False] * 4)  # 60 %
    later = judged([True] * 5 + [False] + [True] * 4)  # one lost, four gained: 90 %
    later.append({"item_id": "i0", "order": "original", "sample": 1, "correct": False, "verdict": "b"})  # not greedy
    c = paired_comparison(later, earlier, row_metrics(earlier))
    assert (c["change_points"], c["only_later_right"], c["only_earlier_right"], c["n_judgments"]) == (30.0, 4, 1, 10)
    # both orders of an item are one cluster: per-item differences i2 -1, i3 +2, i4 +2 (sum 3); of the 8 sign
    # patterns of (1, 2, 2), |sum| >= 3 in 4 (+-5, +-3): p = 1/2. McNemar over the 10 judgments would say 2 * 6/32.
    assert (c["test"], c["clusters"], c["cluster_by"], c["p"]) == ("cluster_sign_flip", 5, "comparison", 0.5)
    # 60 % of 10 ends its interval at 83.2 %, so only 10 of 10 (lower bound 72.2 %)... is not enough either
    assert c["accuracy_needed_for_separated_ci"] is None
    assert paired_comparison(later, later, row_metrics(later))["change_points"] == 0.0


def test_every_task_module_defines_the_interface_and_a_partial_one_is_named(monkeypatch):
    import sys
    import types

    import pytest

    from thinkj.errors import ThinkJError
    from thinkj.synthetic.tasks import TASK_INTERFACE, TASKS, get_task

    for name in TASKS:
        assert get_task(name).module.__name__ == TASKS[name]
    partial = types.ModuleType("partial_demo_task")
    partial.explain = partial.argue = lambda *a: ""
    monkeypatch.setitem(sys.modules, "partial_demo_task", partial)
    monkeypatch.setitem(TASKS, "partial", "partial_demo_task")
    with pytest.raises(ThinkJError, match="does not define split_pairs, rule_verdict, describe_response, asks"):
        get_task("partial")
    assert len(TASK_INTERFACE) == 8


def test_offline_pairs_come_from_training_pairs_outside_the_seed_set(tmp_path):
    """``thinkj data exclude`` (the pipeline's offline_pool stage, OFFLINE_PAIRS=outside_seed_set): the training pairs
    the seed set does not hold, in their order."""
    from thinkj.data.critic_data import exclude_pairs
    from thinkj.records import load_pairs, write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    pairs = make_pairs(10, seed=3)
    write_jsonl(tmp_path / "train.jsonl", pairs)
    write_jsonl(tmp_path / "seed.jsonl", [])
    assert exclude_pairs(tmp_path / "train.jsonl", tmp_path / "seed.jsonl", tmp_path / "a.jsonl")["excluded"] == 0
    assert [p.id for p in load_pairs(tmp_path / "a.jsonl")] == [p.id for p in pairs]
    write_jsonl(tmp_path / "seed.jsonl", [pairs[0], pairs[2], pairs[3]])
    counts = exclude_pairs(tmp_path / "train.jsonl", tmp_path / "seed.jsonl", tmp_path / "b.jsonl")
    assert [p.id for p in load_pairs(tmp_path / "b.jsonl")] == [p.id for p in pairs if p not in (pairs[0], pairs[2],
                                                                                                  pairs[3])]
    assert counts == {"n_in": 10, "n_out": 7, "excluded": 3}


def test_critic_data_adds_wrong_side_examples_beside_the_seed_sets(tmp_path):
    """``thinkj data critic-data``: the seed set's critic examples copied, every 2nd training pair argued for its
    wrong side by the task's rule, both registered in one dataset_info.json."""
    import json

    from thinkj.data.critic_data import write_critic_data
    from thinkj.export.llamafactory import write_sft_dataset
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    pairs = [p for p in make_pairs(12, seed=1) if p.decided]
    write_jsonl(tmp_path / "train.jsonl", pairs)
    seed_set = tmp_path / "seed_set"
    write_sft_dataset(seed_set, "thinkj_critic_sft", [([{"role": "user", "content": "q"}], "t")])
    counts = write_critic_data(seed_set, tmp_path / "out", tmp_path / "train.jsonl", task="fruit", every=2)
    info = json.loads((tmp_path / "out" / "dataset_info.json").read_text())
    assert set(info) == {"thinkj_critic_sft", "thinkj_critic_wrong_side"}
    assert counts["seed_set_examples"] == 1 and counts["wrong_side_examples"] == len(pairs[::2])
    rows = json.loads((tmp_path / "out" / info["thinkj_critic_wrong_side"]["file_name"]).read_text())
    wrong = {"a": "b", "b": "a"}
    for pair, row in zip(pairs[::2], rows):  # told the wrong side, the target ends with that verdict
        assert f"({wrong[pair.label]})" in row["messages"][-1]["content"].rsplit("Response", 1)[-1]
