"""RL canaries: GRPO with the Think-J reward must raise the held-out probability of the right verdict on a task the
init judge has only partly learnt, and the same run with every gold label on the wrong side (``flipped``: the
accuracy term negated) must not (thinkj/online/canary.py has the task, the init judge, the metric and the test).
TRL runs through ``run_trl_grpo`` (``thinkj train rl --engine trl``); verl through ``DEVICE=cpu bash
scripts/train_verl.sh`` and verl's model merger (thinkj/online/canary_verl.py).

The test (``sign_test``): per held-out pair (64), the teacher-forced probability of the right verdict letter, both
orders combined so that a mere change of side cancels (``position_free``), after vs before RL; one-sided exact sign
test p < 0.05 AND mean rise >= 0.05; and the right arm keeps its own answers (``generation_held``: its greedy
accuracy on the 128 held-out judgments falls by at most 0.05, its parse rate too), so a collapse of generation that
the teacher-forced metric cannot see fails (experiments/LOG.md, "session 15"). Reported beside the gate, not in it:
the same test over the ten right answers' cluster means (``per_right_response``: the 64 comparisons share them).
Breaks tried: the accuracy term's sign flipped in thinkj/rewards/designs/judge.py (the right arm then fails: mean fell;
TRL session 9, verl session 10, experiments/LOG.md). Shuffled golds are not the control: on verl they raised the
metric past the bar by sharpening the init's own leaning (experiments/LOG.md, "RL canaries, session 10").

In ``make test`` (``-m rl_canary``): TRL GRPO seed 0 at 60 steps (at 30 it failed on a CPU without bf16, +0.017;
at 60 seeds 0-2 held there, +0.054 / +0.109 / +0.193, experiments/LOG.md "session 15"). Opt-in (``-m "rl_canary and
opt_in"``): TRL seed 1; verl GRPO (its right arm also validates on the held-out pairs and runs
tests/test_verl_cpu_validation.py's check), ``grpo_consistent``, PPO and Reinforce++ (~6.5 min each at 30 steps;
verl GRPO runs 60 steps, ~9-10 min a pair of arms). verl's are opt-in for their time and because verl's rollouts are
not reproducible (one run is one draw): with both gold sides in every step verl GRPO's right arm passed the +0.05
bar on 3 of 5 runs at 30 steps, and on 5 of 5 at 60 (+0.088 to +0.107; experiments/LOG.md, "RL canaries: why verl
GRPO drifts" and "verl GRPO canary at 60 steps").
"""

from __future__ import annotations

import math

import pytest
from conftest import ROOT

from thinkj.online.canary import (
    CONTROL,
    INFORMATIVE,
    INIT_STEPS,
    arm_summary,
    by_right_response,
    canary_arm,
    canary_rl_pairs,
    canary_verdict,
    eval_pairs,
    format_only_judge,
    machine_provenance,
    paired_test,
    position_free,
    sign_test,
    verdict_probabilities,
)
from thinkj.stats import mcnemar_exact


def test_paired_test_counts_changed_judgments_and_is_one_sided():
    before = [True] * 40 + [False] * 60
    after = [True] * 40 + [True] * 12 + [False] * 48  # 12 gained, none lost
    result = paired_test(before, after)
    assert (result["gained"], result["lost"]) == (12, 0)
    assert result["p_one_sided"] == pytest.approx(0.5 ** 12)
    assert result["p_two_sided"] == pytest.approx(mcnemar_exact(12, 0))
    # a drop of the same size is never an improvement
    assert paired_test(after, before)["p_one_sided"] == pytest.approx(1.0)
    assert paired_test(before, before)["p_one_sided"] == 1.0
    with pytest.raises(ValueError, match="equally long"):
        paired_test(before, after[:-1])


def test_sign_test_needs_both_a_consistent_and_a_large_enough_rise():
    before = [0.5] * 20
    assert sign_test(before, [0.6] * 20)["learned"]  # 20 ups: p = 2**-20, rise 0.1
    small = sign_test(before, [0.51] * 20)
    assert small["p_one_sided"] < 0.05 and not small["learned"]  # consistent but under the least rise
    mixed = sign_test(before, [0.9] * 11 + [0.45] * 9)
    assert mixed["rise"] > 0.05 and not mixed["learned"]  # a large mean carried by few items: p ~ 0.41
    assert sign_test(before, before)["p_one_sided"] == 1.0
    assert sign_test([0.6] * 20, before)["p_one_sided"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="equally long"):
        sign_test(before, before[:-1])


def test_clusters_by_right_answer_see_a_rise_that_only_a_few_answers_carry():
    """The 64 held-out comparisons share ten fruit answers: a rise confined to three of them passes the per-pair test
    (27 ups, no downs) but not the test over the ten answers' means (3 ups, p = 1/8)."""
    pairs = eval_pairs()
    right = [p.response_a if p.label == "a" else p.response_b for p in pairs]
    assert len(by_right_response([0.0] * 64)) == len(set(right)) == 10
    assert by_right_response([float(i) for i in range(64)]) == [
        sum(i for i, r in enumerate(right) if r == answer) / right.count(answer) for answer in dict.fromkeys(right)]
    biggest = sorted(set(right), key=right.count, reverse=True)[:3]
    before = [0.5] * 64
    after = [0.8 if r in biggest else 0.5 for r in right]
    per_pair = sign_test(before, after)
    assert per_pair["learned"] and per_pair["ups"] == sum(right.count(a) for a in biggest) == 27
    clusters = sign_test(by_right_response(before), by_right_response(after))
    assert (clusters["ups"], clusters["downs"], clusters["p_one_sided"]) == (3, 0, 0.125) and not clusters["learned"]
    everywhere = sign_test(by_right_response(before), by_right_response([0.6] * 64))
    assert everywhere["p_one_sided"] == 2.0 ** -10 and everywhere["learned"]
    with pytest.raises(ValueError, match="one value per held-out pair"):
        by_right_response([0.5] * 63)


def test_position_free_ignores_a_change_of_side_and_sees_content():
    # right letter: 'a' in the original order, 'b' in the swapped one; a judge leaning to 'a' by log-odds c
    def orders(content: float, side: float) -> list[float]:
        return [1 / (1 + math.exp(-(content + side))), 1 / (1 + math.exp(-(content - side)))]

    assert position_free(orders(1.0, 0.0)) == pytest.approx(position_free(orders(1.0, 3.0)))
    assert position_free(orders(2.0, 3.0))[0] > position_free(orders(1.0, 0.0))[0]
    assert position_free(orders(0.0, 2.0)) == pytest.approx([0.5])
    with pytest.raises(ValueError, match="both orders"):
        position_free([0.5])


def test_controls_keep_responses_and_balance_and_break_the_rule():
    right = canary_rl_pairs(200, seed=3)
    shuffled = canary_rl_pairs(200, seed=3, control="shuffled")
    flipped = canary_rl_pairs(200, seed=3, control="flipped")
    for control in (shuffled, flipped):
        assert [(p.response_a, p.response_b) for p in right] == [(p.response_a, p.response_b) for p in control]
    assert sum(p.label == "a" for p in shuffled) == 100
    agree = sum(p.label == q.label for p, q in zip(right, shuffled))
    assert 70 < agree < 130  # independent of the rule: about half agree
    assert all(p.label != q.label for p, q in zip(right, flipped))  # every gold on the other side
    with pytest.raises(ValueError, match="choose one of flipped, shuffled"):
        canary_rl_pairs(4, seed=3, control="negated")
    # no RL pair shows the two responses of a held-out pair (13 of 64 did before the filter, seed 0; the verl
    # canary's held-out check caught it)
    held_out = eval_pairs()
    held = {frozenset((p.response_a, p.response_b)) for p in held_out}
    # 64 distinct comparisons, balanced (a plain draw repeated two: verl's dump, matched by prompt text, caught it)
    assert len({(str(p.messages), p.response_a, p.response_b) for p in held_out}) == 64
    assert sum(p.label == "a" for p in held_out) == 32
    assert not any(frozenset((p.response_a, p.response_b)) in held for p in right)


def test_every_canary_step_holds_both_gold_sides():
    """Read in file order (the arms turn shuffling off), each step of 4 prompts holds 2 golds (a) and 2 (b), in the
    flipped control too; verl's shuffled steps held 0 or 4 of 4 in 7 of 30 steps and drifted to one side."""
    from thinkj.online.canary import RL_PAIRS, RL_SETTINGS
    from thinkj.online.canary_verl import verl_canary_overrides

    per_step = RL_SETTINGS["prompts_per_step"]
    for control in (None, CONTROL):
        pairs = canary_rl_pairs(RL_PAIRS, seed=0, control=control)
        steps = [pairs[i:i + per_step] for i in range(0, len(pairs), per_step)]
        assert all(sum(p.label == "a" for p in step) == per_step // 2 for step in steps)
    assert "data.shuffle=False" in verl_canary_overrides("grpo", 272)


@pytest.fixture(scope="module")
def init_judge(tmp_path_factory):
    """The canary's init judge of a seed, built once per module (the TRL and verl canaries share seed 0's) with
    its held-out right-verdict probabilities; the precondition checked once."""
    from thinkj.models.tiny import build_tiny_model

    made: dict[int, tuple] = {}

    def get(seed: int) -> tuple:
        if seed not in made:
            root = tmp_path_factory.mktemp(f"canary_init_{seed}")
            tiny = build_tiny_model(root / "tiny", seed=seed)
            init = format_only_judge(tiny, root / "init", seed=seed, steps=INIT_STEPS, informative=INFORMATIVE)
            before = verdict_probabilities(init)
            free = position_free(before)
            assert 0.55 < sum(free) / len(free) < 0.9  # the init has the content binding, but far from certain
            made[seed] = (init, before)
        return made[seed]

    return get


def test_the_generation_criterion_sees_a_collapse_and_tolerates_noise():
    """The right arm must keep its own answers: greedy accuracy may fall by at most MAX_GEN_FALL (0.05 of the 128
    held-out judgments) and the parse rate by at most MAX_PARSE_FALL; a teacher-forced pass alone is not enough."""
    from thinkj.online.canary import MAX_GEN_FALL, generation_held

    def reading(right: int, parsed: int, n: int = 128) -> dict:
        return {"accuracy": right / n, "parse_rate": parsed / n, "a_share": 0.5,
                "correct": [True] * right + [False] * (n - right)}

    init = reading(76, 128)
    assert generation_held(init, reading(90, 128))["held"]  # rose
    assert generation_held(init, reading(70, 128))["held"]  # fell by 6 of 128 (0.047): noise of a side change
    assert not generation_held(init, reading(69, 128))["held"]  # 7 of 128: more than MAX_GEN_FALL
    assert not generation_held(init, reading(76, 121))["held"]  # as right, but 7 answers lost their verdict
    collapsed = generation_held(init, reading(0, 0))  # verl's right arm 3: reward 1.25 -> 0.57 (LOG, session 14)
    assert not collapsed["held"] and collapsed["fall"] == pytest.approx(76 / 128) and MAX_GEN_FALL == 0.05
    learned = {"learned": True, "rise": 0.09, "p_one_sided": 1e-9, "arm": "right"}
    control = {"learned": False, "rise": -0.2, "arm": "flipped"}
    holds, why = canary_verdict({**learned, "generation": collapsed}, control)
    assert not holds and "lost its own answers" in why
    assert canary_verdict({**learned, "generation": generation_held(init, reading(90, 128))}, control)[0]
    clusters = {"n": 10, "ups": 10, "p_one_sided": 2.0 ** -10}
    holds, why = canary_verdict({**learned, "per_right_response": clusters,
                                 "generation": generation_held(init, reading(90, 128))}, control)
    assert holds and "10 of 10 right answers up, p 0.00098" in why


def _made_arm(arm: str, before: list[float], after: list[float], right_after: int) -> dict:
    """An arm result as judge_moved makes it, from stand-in measurements (128 per-order probabilities, greedy)."""
    from thinkj.online.canary import tests_from_records

    def reading(right: int) -> dict:
        return {"n": 128, "accuracy": right / 128, "parse_rate": 1.0, "a_share": 0.5,
                "correct": [True] * right + [False] * (128 - right)}

    records = {"before": before, "after": after, "gen_before": reading(92), "gen_after": reading(right_after)}
    return {**tests_from_records(records), "records": records, "arm": arm}


def test_a_saved_canary_is_recomputed_from_its_records_and_a_changed_figure_is_named(tmp_path):
    """canary.json keeps each arm's measurements; `thinkj train canary-check` recomputes every test figure and the
    verdict from them, so a number in a committed result can be checked, and one edited by hand cannot pass."""
    import json

    from typer.testing import CliRunner

    from thinkj.cli import _register_subcommands, app
    from thinkj.online.canary import recheck_arm, recheck_canary

    before = [0.6 + 0.002 * (i % 50) for i in range(128)]
    right = _made_arm("right", before, [b + 0.1 for b in before], 94)
    control = _made_arm("flipped", before, [b - 0.2 for b in before], 64)
    holds, why = canary_verdict(right, control)
    assert holds and right["ups"] == 64 and right["per_right_response"]["ups"] == 10
    path = tmp_path / "canary.json"
    path.write_text(json.dumps({"holds": holds, "why": why, "arms": [right, control]}))
    assert recheck_canary(path) == (holds, why)
    _register_subcommands()
    result = CliRunner().invoke(app, ["train", "canary-check", str(path)], terminal_width=300)
    assert result.exit_code == 0 and "canary holds" in result.output, result.output

    edited = json.loads(path.read_text())
    edited["arms"][0]["per_right_response"]["ups"] = 9  # one figure, deep inside, edited
    with pytest.raises(ValueError, match=r"arms\[0\] \(right\): per_right_response.ups is saved as 9 but its "
                                         r"records give 10"):
        recheck_arm(edited["arms"][0], f"{path}, arms[0] (right)")
    path.write_text(json.dumps(edited))
    result = CliRunner().invoke(app, ["train", "canary-check", str(path)], terminal_width=300)
    assert result.exit_code == 2 and "per_right_response.ups" in result.output, result.output

    edited = json.loads(json.dumps({"holds": holds, "why": why, "arms": [right, control]}))
    edited["arms"][1]["records"]["after"][5] = 0.99  # a measurement edited: the saved test no longer follows
    path.write_text(json.dumps(edited))
    with pytest.raises(ValueError, match=r"arms\[1\] \(flipped\): (rise|after|ups)"):
        recheck_canary(path)
    path.write_text(json.dumps({"holds": False, "why": "hand-written", "arms": [right, control]}))
    with pytest.raises(ValueError, match="saved verdict False"):
        recheck_canary(path)
    with pytest.raises(ValueError, match="no 'records'"):
        recheck_arm(arm_summary(right))
    assert "records" not in arm_summary(right) and arm_summary(right)["ups"] == 64
    path.write_text("{")
    with pytest.raises(ValueError, match="not a canary result"):
        recheck_canary(path)


COMMITTED_CANARIES = sorted((ROOT / "experiments" / "results").glob("verl_canaries_session*/*.canary.json"))


@pytest.mark.parametrize("path", COMMITTED_CANARIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_canary_recomputes_from_its_records_and_holds(path):
    """The canary results kept in experiments/results (LOG, sessions 28, 29, 33): every figure and the verdict follow
    from each record's own measurements (what `thinkj train canary-check` does), and each holds."""
    from thinkj.online.canary import recheck_canary

    holds, why = recheck_canary(path)
    assert holds, why


def test_the_committed_canaries_are_found():
    assert len(COMMITTED_CANARIES) >= 5, COMMITTED_CANARIES  # a moved folder must not leave the check above empty


def test_a_canary_names_the_commit_it_started_on_and_one_that_moved_under_it():
    """The machine record is taken before the init; a commit made while the arms run (session 30's Reinforce++
    rerun read the later commit) is named beside it, not in its place."""
    import subprocess

    from thinkj.online.canary import canary_machine

    start = canary_machine()
    assert set(start) == {"commit", "torch", "cpu", "cpu_capability", "threads"} and start["threads"] >= 1
    from thinkj.paths import PROJECT_ROOT

    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, cwd=PROJECT_ROOT)
    if head.returncode == 0:
        assert start["commit"].split("-")[0] == head.stdout.strip()
    assert machine_provenance(start, start["commit"]) == start
    moved = machine_provenance({**start, "commit": "aaaaaaaaaaaa-dirty"}, "bbbbbbbbbbbb")
    assert moved["commit"] == "aaaaaaaaaaaa-dirty" and moved["commit_at_end"] == "bbbbbbbbbbbb"


def test_a_canary_arm_keeps_the_callers_grpoconfig_fields_beside_its_own(tmp_path):
    """canary_arm sets TRL's shuffle_dataset itself; a caller's ``extra`` joins it instead of clashing with it (a
    duplicate keyword before): the arm gets as far as checking its model."""
    from thinkj.errors import ThinkJError

    with pytest.raises(ThinkJError, match="missing"):
        canary_arm(tmp_path / "missing", tmp_path, seed=0, extra={"logging_steps": 1})


@pytest.mark.slow
@pytest.mark.rl_canary
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.opt_in)])
def test_trl_grpo_learns_the_canary_and_not_the_control(tmp_path, init_judge, seed):
    init, before = init_judge(seed)
    right = canary_arm(init, tmp_path, seed=seed, before=before)
    control = canary_arm(init, tmp_path, seed=seed, control=CONTROL, before=before)
    print(f"seed {seed}: right {arm_summary(right)}\ncontrol {arm_summary(control)}")
    holds, why = canary_verdict(right, control)
    assert holds, why  # includes right["generation"]["held"]: its own greedy answers did not fall
    assert control["rise"] < right["rise"]


@pytest.mark.slow
@pytest.mark.rl_canary
@pytest.mark.timeout(1800)
@pytest.mark.opt_in  # verl GRPO holds 5 of 5 at 60 steps, but a pair of arms is ~9 min: over CI's budget (LOG)
@pytest.mark.parametrize("algo", ["grpo",
                                  pytest.param("grpo_consistent", marks=pytest.mark.opt_in),
                                  pytest.param("ppo", marks=[pytest.mark.opt_in, pytest.mark.verl_cpu_all]),
                                  pytest.param("reinforce_pp", marks=[pytest.mark.opt_in, pytest.mark.verl_cpu_all])])
def test_verl_learns_the_canary_and_not_the_control(tmp_path, init_judge, algo):
    from test_verl_cpu_validation import check_held_out_metrics

    from thinkj.online.canary_verl import VAL_EVERY, canary_steps, verl_canary_arm

    init, before = init_judge(0)
    right = verl_canary_arm(init, tmp_path, algo=algo, seed=0, before=before, val=algo == "grpo")
    control = verl_canary_arm(init, tmp_path, algo=algo, seed=0, control=CONTROL, before=before)
    report = {arm["arm"]: arm_summary(arm) for arm in (right, control)}
    print(f"verl {algo}: {report}")
    if algo == "grpo":  # learning visible during the run: held-out judge metrics, equal to verl's validation dump
        out = tmp_path / "grpo-right"
        steps = list(range(0, canary_steps(algo) + 1, VAL_EVERY))
        logged = check_held_out_metrics(right["rows"], out / "validation", tmp_path / "val.parquet",
                                        tmp_path / "grpo-right.parquet", steps)
        print({step: logged[step]["pair_acc"] for step in steps})
    holds, why = canary_verdict(right, control)
    assert holds, why
    assert control["rise"] < right["rise"]


@pytest.mark.parametrize("args, message", [(["--engine", "trl", "--algo", "ppo"], "trl runs grpo only"),
                                           (["--engine", "verl", "--algo", "dapo"], "choose one of grpo"),
                                           (["--control", "negated"], "choose one of flipped, shuffled")])
def test_canary_command_refuses_what_it_cannot_run(tmp_path, args, message):
    from typer.testing import CliRunner

    from thinkj.cli import _register_subcommands, app

    _register_subcommands()
    result = CliRunner().invoke(app, ["train", "canary", *args, "--out", str(tmp_path)], terminal_width=300)
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert not any(tmp_path.iterdir())  # refused before building anything
