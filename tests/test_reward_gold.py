"""A bad ground truth is a data error every reward records (``gold_error`` = 1, the terms that need the bad field at
0, the same keys as always), never an exception and never a misread value: Infinity, NaN, 2.7, 7, -1, ``true``,
``"2"``, None, a missing or malformed ground truth, a label that is not a/b/tie -- for every preset of the
registry and through the verl and TRL adapters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from worst_case.reward import (
    BAD_LABELS,
    BAD_STRENGTHS,
    STRENGTH_READERS,
    bad_ground_truths,
    ground_truth,
)

from thinkj.prompts import judge_output
from thinkj.rewards import PRESETS, get_preset
from thinkj.rewards.adapters.trl import TRLPresetReward, TRLReward
from thinkj.rewards.adapters.trl_group import GROUP_REWARDS, TRLGroupReward, get_group_reward
from thinkj.rewards.adapters.verl import compute_score
from thinkj.rewards.gold import pair_gold

RIGHT = judge_output("because", "a", 2)
TEXTS = {  # a completion each preset can score well, so a lost term shows
    "competition": "<competition><pirate>24</pirate><knight>x</knight><viking>y</viking><result><winner>pirate"
                   "</winner></result></competition> 24",
    "multi_objective": "3 3 4 2 1", "xml_judge": "<notes>n</notes><judgement>A</judgement>",
    "cot_binary": judge_output("t", "a"), "margin": "<think>x</think>\nTherefore, the quality scores for Response (a) "
    "and Response (b) are [[90]] and [[10]], respectively.", "margin_public": "<Score 1>90</Score 1> <Score 2>10</Score 2>",
    "strength_public": "Therefore, Response (a) is better, and the strength is [[2]].",
}


def finite(result: dict) -> bool:
    return all(math.isfinite(v) for v in result.values() if isinstance(v, (int, float)))


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_records_every_bad_ground_truth(preset):
    reward, text = get_preset(preset), TEXTS.get(preset, RIGHT)
    good = reward(text, ground_truth(preset))
    assert good["gold_error"] == 0.0 and good["score"] > 0
    for name, gt in bad_ground_truths(preset).items():
        result = reward(text, gt)
        assert tuple(result) == tuple(good), (preset, name)  # verl stacks the keys of every sample
        assert result["gold_error"] == 1.0 and finite(result), (preset, name, result)
        assert result["score"] <= good["score"], (preset, name)  # the terms that need the bad field are gone
        assert reward.gold_problem(gt).startswith("ground_truth"), (preset, name)
        via_verl = compute_score("s", text, gt, {"index": 0}, preset=preset)
        assert via_verl == result or (via_verl["gold_error"] == 1.0 and finite(via_verl)), (preset, name)


@pytest.mark.parametrize("name", sorted(BAD_STRENGTHS))
def test_a_bad_strength_is_never_truncated_or_misread(name):
    gt = {"label": "a", "strength": BAD_STRENGTHS[name]}
    exact = {"label": "a", "strength": 2}
    for preset in STRENGTH_READERS:
        result, good = get_preset(preset)(RIGHT, gt), get_preset(preset)(RIGHT, {"label": "a", "strength": None})
        assert result["gold_error"] == 1.0 and result["acc"] == good["acc"]  # the label still counts
        assert result["strength"] == good["strength"]  # the strength term as if there were none
    # 2.7 is not read as 2, true not as 1, "2" not as 2: the exact strength's bonus is not paid
    assert get_preset("thinkj_qwen")(RIGHT, gt)["score"] < get_preset("thinkj_qwen")(RIGHT, exact)["score"]
    # label-only presets never read the strength: no error for them
    for preset in ("cot_binary", "margin", "margin_public", "xml_judge"):
        assert get_preset(preset)(TEXTS[preset], gt)["gold_error"] == 0.0


def test_the_strength_rule_in_one_table():
    read = [pair_gold({"label": "a", "strength": value}) for value in (None, 0, 0.0, 1, 2.0, 3, np.int64(2))]
    assert [(g.strength, g.error) for g in read] == [(None, ""), (None, ""), (None, ""), (1, ""), (2, ""),
                                                              (3, ""), (2, "")]
    for value in (np.float64("nan"), np.int64(9), np.bool_(True), 2.5, -0.5, 1 + 1e-9):
        assert pair_gold({"label": "a", "strength": value}).error.startswith("ground_truth.strength"), value
    assert pair_gold(" TIE ") == pair_gold({"label": "tie"}) and pair_gold("A").label == "a"
    assert pair_gold('{"label": "b", "strength": 3}').strength == 3


def test_a_bad_label_scores_no_accuracy_but_keeps_the_format_term():
    for name, gt in BAD_LABELS.items():
        result = get_preset("thinkj_llama")(RIGHT, gt)
        assert (result["acc"], result["format"], result["score"], result["gold_error"]) == (0.0, 1.0, 1.0, 1.0), name
        assert get_preset("cot_binary")("garbage", gt)["score"] == 0.0, name  # no unparsed credit without a gold


def test_trl_adapters_record_bad_rows_and_log_their_share():
    reward = TRLReward("thinkj_llama")
    labels = ["a", "c", None, True, "a", "a", "a", "a", "a"]
    strengths = [2, 2, 2, 2, float("inf"), float("nan"), 2.7, True, "2"]
    scores = reward(prompts=["p"] * 9, completions=[RIGHT] * 9, label=labels, strength=strengths)
    assert scores == [2.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0]  # thinkj_llama: no strength weight
    assert reward.last_metrics["gold_error"] == pytest.approx(8 / 9)
    with pytest.raises(ValueError, match="'strength' column has 1 values for 2 completions"):  # no row dropped
        reward(prompts=["p"] * 2, completions=[RIGHT] * 2, label=["a", "a"], strength=[2])
    for preset in sorted(PRESETS):
        bad = list(bad_ground_truths(preset).values())
        out = TRLPresetReward(preset)(completions=[TEXTS.get(preset, RIGHT)] * len(bad), ground_truth=bad)
        assert len(out) == len(bad) and all(math.isfinite(s) for s in out), preset


@pytest.mark.parametrize("name", sorted(GROUP_REWARDS))
def test_group_rewards_record_bad_rows(name):
    reward = get_group_reward(name)
    if name in ("grm_listwise", "thinkj_round_robin"):  # judged by a served model: they read no ground truth
        _reads_no_ground_truth(reward)
        return
    preset = "multi_objective" if name == "multi_objective" else "xml_judge"
    bad = list(bad_ground_truths(preset).values())
    text = TEXTS[preset]
    if name == "thinkj_pairwise":  # reads the ground truth only for its reference anchor; no judge is called
        out = reward.score("q", ["x", "y"], [{"label": "a"}] * 2, scheme="anchor", anchor="reference")
        assert [(r["score"], r["gold_error"], r["judge_calls"]) for r in out] == [(0.5, 1.0, 0)] * 2
        return
    out = reward.score("p", [text, text + " "] * len(bad), [gt for gt in bad for _ in range(2)])
    assert all(r["gold_error"] == 1.0 and finite(r) for r in out)
    trl = TRLGroupReward(name)(prompts=["p"] * len(bad), completions=[text] * len(bad), ground_truth=bad)
    assert all(math.isfinite(s) for s in trl)


def _reads_no_ground_truth(reward) -> None:
    """Every bad ground truth (and one that raises when read) gives the rows the same keys and values as no ground
    truth at all: no ``gold_error``, nothing misread. The judge is a dead port on 127.0.0.1 with the failure stop off,
    so each row is the reward's scored-as-failed record (a real call path, no judge server needed). Before this
    check the two rewards were skipped here; break ``round_robin_group`` to read ``ground_truths[i]["label"]`` and
    this fails."""
    import socket

    class Unreadable(dict):
        def __getitem__(self, key):
            raise AssertionError(f"the ground truth was read ({key!r})")

        get = __getitem__

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    kw = {"base_url": dead, "retries": 0, "max_failure_rate": 1.0}
    bad = [*bad_ground_truths("xml_judge").values(), Unreadable(label="a")]
    texts = ["good", "bad"]
    baseline = reward.score("Q", texts, [None, None], **kw)
    assert baseline and "gold_error" not in baseline[0]
    for gt in bad:
        out = reward.score("Q", texts, [gt, gt], **kw)
        assert [sorted(r) for r in out] == [sorted(r) for r in baseline] and all(finite(r) for r in out)
        assert [r["score"] for r in out] == [r["score"] for r in baseline]
