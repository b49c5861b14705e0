"""The public Think-J code's rewards, reproduced: cases worked out by reading its verl reward files.

HuihuiChyan/Think-J, verl/verl/utils/reward_score/: reward_cot.py (ground truth 1 = (a), 2 = (b)),
reward_strength.py (signed: -s = (a) better with strength s, +s = (b)), reward_score.py (1 / 2). Each row gives
the public code's value, worked out from its rules (see thinkj/rewards/designs/upstream_thinkj.py), then ours must equal it.
"""

from __future__ import annotations

import pytest

from thinkj.rewards import REWARD_KEYS, get_preset

S = "Therefore, Response ({}) is better, and the strength is [[{}]]."
A2, A1, B3 = {"label": "a", "strength": 2}, {"label": "a", "strength": 1}, {"label": "b", "strength": 3}

STRENGTH = [  # (text, ground truth, public reward)
    (S.format("a", 2), A2, 1.0),  # right, strength exact: 1 - 0/8
    (S.format("a", 3), A1, 0.75),  # 1 - |1 - 3| / 8
    (S.format("b", 1), B3, 0.75),  # gt +3: (b), 1 - |3 - 1| / 8
    (S.format("a", 9), A2, 0.5),  # strength outside {1, 2, 3}: 1 - 0.5
    (S.format("a", 0), A2, 0.5),
    (S.format("a", "002"), A2, 1.0),  # int("002") = 2
    (S.format("b", 2), A2, 0.0),  # wrong direction
    ("Therefore, Response (a) is better, and the preference strength is [[2]].", A2, 0.0),  # the paper's words
    (S.format("a", 2)[:-1], A2, 0.0),  # no final period: no match
    ("no think block needed. " + S.format("a", 2), A2, 1.0),
    ("<think>" + S.format("a", 2) + "</think>\n" + S.format("b", 1), A2, 1.0),  # re.search: the first one wins
    ("therefore, response (a) is better, and the strength is [[2]].", A2, 0.0),  # case-sensitive
]

COT = [  # (text, ground truth, public reward)
    ("<think>t</think>\nTherefore, Response (a) is better.", A2, 1.0),
    ("<think>t</think>\nTherefore, Response (a) is better.", {"label": "b"}, 0.0),
    ("garbage", A2, 0.5),  # parsing failed
    ("Response (a) is better. On reflection, Response (b) is better.", A2, 0.0),  # (b) checked last, wins
    ("Response (b) is better. On reflection, Response (a) is better.", A2, 0.0),  # still (b): order of patterns
    ("Response (a) is better", A2, 0.5),  # the pattern's final '.' needs one more character
    ("Response (a) is better!", A2, 1.0),  # '.' is any character
    ("<think>Response (a) is better.</think>", A2, 1.0),  # the thinking is searched too
    ("response (a) is better.", A2, 0.5),
]

M = "<Score 1>{}</Score 1> and <Score 2>{}</Score 2>"
MARGIN = [  # (text, ground truth, public reward)
    (M.format(90, 10), A2, 1.8),  # 1 + |90 - 10| / 100
    (M.format(90, 10), {"label": "b"}, -0.8),
    (M.format(50, 50), A2, 0.0),  # equal: the wrong branch, max(-0, -1)
    (M.format(0, 250), {"label": "b"}, 2.0),  # margin capped at 1
    (M.format(300, 0), {"label": "b"}, -1.0),  # penalty capped at -1
    ("no scores", A2, 0.5),
    ("<Score 1>90</Score 1>\n<Score 2>10</Score 2>", A2, 0.5),  # '.' does not cross the newline
    ("<Score 1>60</Score 1> x <Score 2>50</Score 2> y <Score 2>90</Score 2>", A2, -0.3),  # greedy: the last Score 2
    ("<Score 1>.5</Score 1> <Score 2>0.25</Score 2>", A2, 1.0025),  # \d*\.?\d+ reads .5 and 0.25
    ("<Score 1>7.</Score 1> <Score 2>3</Score 2>", A2, 0.5),  # '7.' is not a number to it
    ("<Score 1>1</Score 1> <Score 1>99</Score 1> <Score 2>50</Score 2>", A2, -0.49),  # first Score 1
    ("<Score 1>5</Score 1> alone\n<Score 1>90</Score 1> <Score 2>10</Score 2>", A2, 1.8),  # the next line matches
    ("<Score 2>50</Score 2> then <Score 1>60</Score 1>", A2, 0.5),  # Score 2 must come after Score 1
]


@pytest.mark.parametrize("preset, cases", [("strength_public", STRENGTH), ("cot_binary", COT),
                                           ("margin_public", MARGIN)])
def test_public_rewards_case_by_case(preset, cases):
    for text, gt, expected in cases:
        result = get_preset(preset)(text, gt)
        assert result["score"] == pytest.approx(expected), (preset, text, gt)
        assert tuple(result) == REWARD_KEYS


def test_where_the_public_code_has_no_answer_we_decide_and_never_raise():
    assert get_preset("cot_binary")("garbage", {"label": "tie"})["score"] == 0.0  # no tie label in the public data
    assert get_preset("strength_public")(S.format("a", 3), {"label": "a", "strength": None})["score"] == 1.0
    # int() of > 4300 digits raises in the public code; it cannot be 1..3, so it is out of range here
    assert get_preset("strength_public")(S.format("a", "9" * 5000), A2)["score"] == 0.5
    # inf - inf is NaN in the public code; not a finite score: unparsed here
    assert get_preset("margin_public")(M.format("9" * 400, "9" * 400), A2)["score"] == 0.5
    assert get_preset("cot_binary")("garbage", A2, unparsed_score=0.0)["score"] == 0.0


def test_the_presets_ask_for_the_sentences_they_read():
    from thinkj.prompts import get_template
    from thinkj.records import PreferencePair

    pair = PreferencePair("1", "s", [{"role": "user", "content": "q"}], "x", "y", "a")
    strength = get_template(get_preset("strength_public").template).render(pair)[0]["content"]
    assert "and the strength is [[2]]." in strength
    margin = get_template(get_preset("margin_public").template).render(pair)[0]["content"]
    assert "<Score 1>30</Score 1>" in margin and "<Score 2>50</Score 2>" in margin
