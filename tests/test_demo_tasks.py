"""The demo's tasks: the facts task's entity split, its rationales and the scripted teacher's rules for it."""

from __future__ import annotations

from thinkj.demo.summary import learning_checks, row_metrics
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
    from thinkj.offline.baselines import synthetic_critic_examples
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
    examples = synthetic_critic_examples(pairs[:8], wrong_side_every=2, explain=fact_task.explain,
                                         argue=fact_task.argue)
    for (_, output), pair in zip(examples[1::2], pairs[1:8:2]):
        told = parse(output).choice
        assert told != pair.label and f"so Response ({told}) is right." in output


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
    from thinkj.demo.summary import paired_comparison

    def judged(rights):
        return [{"item_id": f"i{k // 2}", "order": ("original", "swapped")[k % 2], "correct": ok, "verdict": "a"}
                for k, ok in enumerate(rights)]

    earlier = judged([True] * 6 + [False] * 4)  # 60 %
    later = judged([True] * 5 + [False] + [True] * 4)  # one lost, four gained: 90 %
    later.append({"item_id": "i0", "order": "original", "sample": 1, "correct": False, "verdict": "b"})  # not greedy
    c = paired_comparison(later, earlier, row_metrics(earlier))
    assert (c["change_points"], c["only_later_right"], c["only_earlier_right"], c["n_judgments"]) == (30.0, 4, 1, 10)
    assert c["mcnemar_p"] == 0.375  # 2 * P(X <= 1 | 5, 1/2) = 2 * 6/32
    # 60 % of 10 ends its interval at 83.2 %, so only 10 of 10 (lower bound 72.2 %)... is not enough either
    assert c["accuracy_needed_for_separated_ci"] is None
    assert paired_comparison(later, later, row_metrics(later))["change_points"] == 0.0


def test_every_demo_plan_names_a_judge_and_a_critic_template_and_a_known_online_data():
    from thinkj.demo.plans import ONLINE_DATA, PLANS

    for name in PLANS:
        plan = PLANS[name]
        assert get_template(plan.template).kind == "judge", name
        assert get_template(plan.critic_template).kind == "critic", name
        assert plan.online_data in ONLINE_DATA, name


def test_plan_overrides_are_typed_and_named():
    import pytest

    from thinkj.demo.plans import PLANS, with_overrides
    from thinkj.errors import ThinkJError

    plan = with_overrides(PLANS["smollm2"], ["dpo_steps=16", "dpo_lr=1e-4", "cpu_bf16=false", "difficulty_pairs=null"])
    assert (plan.dpo_steps, plan.dpo_lr, plan.cpu_bf16, plan.difficulty_pairs) == (16, 1e-4, False, None)
    assert with_overrides(plan, ["sft_lr=1"]).sft_lr == 1.0 and isinstance(with_overrides(plan, ["sft_lr=1"]).sft_lr,
                                                                              float)
    for bad in (["dpo_step=16"], ["dpo_steps=1.5"], ["cpu_bf16=1"], ["template=3"], ["online_data=web"]):
        with pytest.raises(ThinkJError):
            with_overrides(plan, bad)


def test_bf16_only_where_the_plan_asks_and_the_cpu_has_it(monkeypatch):
    import thinkj.train.config as train_config
    from thinkj.demo.plans import PLANS, hf_backend_args, uses_bf16, with_overrides

    smol = PLANS["smollm2"]
    for native in (True, False):
        monkeypatch.setattr(train_config, "cpu_has_bf16", lambda native=native: native)
        assert uses_bf16(smol, "training") is native and uses_bf16(smol, "generation") is native
        assert hf_backend_args(smol, 30) == {"batch_size": 30, "dtype": "bfloat16" if native else "auto"}
        assert hf_backend_args(PLANS["tiny"], 8)["dtype"] == "auto"  # the tiny plan stays fp32
        fp32 = with_overrides(smol, ["bf16_generation=false"])
        assert hf_backend_args(fp32, 30)["dtype"] == "auto" and uses_bf16(fp32, "training") is native


def test_a_stage_run_alone_without_its_inputs_names_them(tmp_path):
    import pytest

    from thinkj.demo.runner import run_demo
    from thinkj.errors import ThinkJError

    with pytest.raises(ThinkJError, match="needs 'models'.*--only"):
        run_demo(tmp_path / "run", model="tiny", only=["dpo"])


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
    assert len(TASK_INTERFACE) == 7


def test_offline_pairs_come_from_training_pairs_outside_the_seed_set(tmp_path):
    from thinkj.demo.runner import DemoContext
    from thinkj.demo.stages_offline import offline_pool
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    pairs = make_pairs(10, seed=3)
    write_jsonl(tmp_path / "train.jsonl", pairs)
    ctx = DemoContext(tmp_path / "run")
    ctx.artifacts["train_pairs"] = tmp_path / "train.jsonl"
    pool, left_out = offline_pool(ctx)  # no seed set in this run: every training pair
    assert [p.id for p in pool] == [p.id for p in pairs] and left_out == 0
    seed_set = ctx.run_dir / "seed_set" / "rl_pairs.jsonl"  # where the seed_set stage writes it
    seed_set.parent.mkdir(parents=True)
    write_jsonl(seed_set, [pairs[0], pairs[2], pairs[3]])
    pool, left_out = offline_pool(ctx)
    assert [p.id for p in pool] == [p.id for p in pairs if p.id not in {pairs[0].id, pairs[2].id, pairs[3].id}]
    assert left_out == 3
