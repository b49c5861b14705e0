from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinkj.errors import ThinkJError
from thinkj.prompts import judge_output, scores_sentence, verdict_sentence
from thinkj.rewards import PRESETS, REWARD_KEYS, get_preset
from thinkj.rewards.adapters.trl import TRLPresetReward, TRLReward
from thinkj.rewards.adapters.verl import compute_score


def out(choice, strength=None, thinking="because"):
    return judge_output(thinking, choice, strength)


GT = {"label": "a", "strength": 2}

# (preset, text, ground truth, expected score, expected acc)
TABLE = [
    ("thinkj_qwen", out("a", 2), GT, 1 + 1 + 0.2 * 1.0, 1),
    ("thinkj_qwen", out("a", 3), GT, 1 + 1 + 0.2 * 0.5, 1),
    ("thinkj_qwen", out("a", 1), {"label": "a", "strength": 3}, 1 + 1 + 0.0, 1),
    ("thinkj_qwen", out("b", 2), GT, 0 + 1 + 0, 0),  # wrong but well-formed: format only
    ("thinkj_qwen", "Therefore, Response (a) is better, and the preference strength is [[2]].", GT, 0, 0),
    ("thinkj_qwen", "<think>x</think>\nResponse (a) is better", GT, 1, 1),  # right, ill-formed
    ("thinkj_qwen", "<think>x</think>\nTherefore, Response (a) is better, and the preference strength is [[7]].",
     GT, 1, 1),  # strength out of range: ill-formed, no strength term
    ("thinkj_qwen", out("a", 2), {"label": "a", "strength": None}, 2, 1),
    ("thinkj_qwen", out("a", 2), {"label": "tie", "strength": 0}, 1, 0),
    ("thinkj_llama", out("a", 3), GT, 2, 1),
    ("thinkj_llama", "", GT, 0, 0),
    ("cot_binary", judge_output("t", "a"), GT, 1, 1),
    ("cot_binary", judge_output("t", "b"), GT, 0, 0),
    ("cot_binary", "garbage", GT, 0.5, 0),  # the public code pays 0.5 for an unparsable answer
    # thinkj_subtractive (1, 1, 1): accuracy + format - |gold - pred| / 8 (the public code's strength arithmetic)
    ("thinkj_subtractive", out("a", 2), GT, 2.0, 1),
    ("thinkj_subtractive", out("a", 3), {"label": "a", "strength": 1}, 2 - 2 / 8, 1),
    ("thinkj_subtractive", "<think>x</think>\nTherefore, Response (a) is better, and the preference strength is [[9]].",
     GT, 1 - 0.5, 1),  # ill-formed, right, out-of-range strength
    ("thinkj_subtractive", out("b", 2), GT, 1, 0),
    ("margin", f"<think>x</think>\n{scores_sentence(90, 10)}", GT, 1 + 1 + 0.8, 1),
    ("margin", f"<think>x</think>\n{scores_sentence(10, 90)}", GT, 1 - 0.8, 0),
    ("margin", f"<think>x</think>\n{scores_sentence(50, 50)}", GT, 1, 0),
    ("margin", "no scores", GT, 0, 0),
]


@pytest.mark.parametrize("preset,text,gt,score,acc", TABLE)
def test_reward_table(preset, text, gt, score, acc):
    result = get_preset(preset)(text, gt)
    assert result["score"] == pytest.approx(score)
    assert result["acc"] == acc
    assert tuple(result) == REWARD_KEYS


def test_unparsed_credit_is_a_weight():
    assert get_preset("cot_binary")("garbage", GT, unparsed_score=0.0)["score"] == 0.0
    assert get_preset("cot_binary")(judge_output("t", "b"), GT, unparsed_score=0.5)["score"] == 0.0


def test_weights_are_overrides_and_unknown_weights_fail():
    assert get_preset("thinkj_qwen")(out("a", 2), GT, w_fmt=0.0)["score"] == pytest.approx(1.2)
    with pytest.raises(TypeError, match="w_typo"):
        get_preset("thinkj_qwen")(out("a", 2), GT, w_typo=1)


def test_ground_truth_forms_and_data_errors():
    for gt in ({"label": "A", "strength": 2.0}, '{"label": "a", "strength": 2}', "a"):
        result = get_preset("thinkj_llama")(out("a", 2), gt)
        assert result["acc"] == 1 and result["gold_error"] == 0
    for gt in ({"label": "c"}, 3):  # a bad ground truth is a recorded data error, never an exception
        result = get_preset("thinkj_llama")(out("a", 2), gt)
        assert result["gold_error"] == 1 and result["acc"] == 0 and result["score"] == 1.0  # the format term only
    assert "ground_truth.label" in get_preset("thinkj_llama").gold_problem({"label": "c"})


def test_verl_adapter_selects_preset_and_ignores_bookkeeping_kwargs():
    r = compute_score("thinkj", out("a", 3), GT, {"index": 1}, preset="thinkj_llama", reward_router_address=None)
    assert r["score"] == 2.0
    r = compute_score(data_source="thinkj", solution_str=out("a", 3), ground_truth=GT, w_str=0.5)
    assert r["score"] == pytest.approx(2.25)


def test_trl_adapter():
    fn = TRLReward("thinkj_llama")
    completions = [[{"role": "assistant", "content": out("a", 2)}], out("b", 1), "junk"]
    scores = fn(prompts=["p"] * 3, completions=completions, label=["a", "a", "b"], strength=[2, 2, None])
    assert scores == [2.0, 1.0, 0.0]
    assert fn.__name__ == "thinkj_llama_reward" and fn.last_metrics["acc"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="label"):
        fn(prompts=["p"], completions=["x"])


def test_trl_adapters_read_a_message_without_content_as_empty_text():
    # A tool-call turn carries content None: it adds no text instead of raising TypeError inside "".join.
    completion = [{"role": "assistant", "content": None}, {"role": "assistant", "content": out("a", 2)}]
    assert TRLReward("thinkj_llama")(prompts=["p"], completions=[completion], label=["a"], strength=[2]) == [2.0]
    assert TRLPresetReward("thinkj_llama")(prompts=["p"], completions=[completion], ground_truth=[GT]) == [2.0]


def test_trl_preset_adapter_reads_the_ground_truth_column():
    fn = TRLPresetReward("xml_judge", w_fmt=0.0)
    assert fn.__name__ == "xml_judge_reward"
    assert fn(completions=["<judgement>A</judgement>", "<judgement>B</judgement>"],
              ground_truth=[{"label": "a"}, {"label": "a"}]) == [1.0, 0.0]
    with pytest.raises(ThinkJError, match="ground_truth"):
        fn(completions=["x"])
    with pytest.raises(TypeError, match="w_typo"):
        TRLPresetReward("xml_judge", w_typo=1)


texts = st.text(max_size=300) | st.builds(lambda c, s, t: f"<think>{t}</think>\n{verdict_sentence(c, s)}",
                                          st.sampled_from("ab"), st.integers(1, 3), st.text(max_size=50))
golds = st.builds(lambda lab, s: {"label": lab, "strength": s}, st.sampled_from(["a", "b", "tie"]),
                  st.none() | st.integers(0, 3))


@settings(max_examples=300, deadline=None)
@given(texts, golds)
def test_every_preset_has_fixed_keys_and_bounds(text, gt):
    bounds = {"thinkj_qwen": (0, 2.2), "thinkj_llama": (0, 2), "cot_binary": (0, 1), "strength_public": (0, 1),
              "margin": (-1, 3), "margin_public": (-1, 2), "thinkj_subtractive": (-0.5, 2)}
    assert set(bounds) <= set(PRESETS)
    for name, (lo, hi) in bounds.items():
        result = compute_score("thinkj", text, gt, preset=name)
        assert tuple(result) == REWARD_KEYS
        assert lo <= result["score"] <= hi
        assert result["pred"] in ("a", "b", "tie", "none")
        if gt["label"] == "tie":
            assert result["acc"] == 0


def test_log_to_trainer_appends_to_the_buffer_of_the_models_mode():
    from collections import defaultdict
    from types import SimpleNamespace

    from thinkj.rewards.adapters.trl import log_to_trainer

    trainer = SimpleNamespace(_metrics={"train": defaultdict(list), "eval": defaultdict(list)},
                              model=SimpleNamespace(training=True))
    log_to_trainer(trainer, {"pos/a_share": 0.75})
    trainer.model.training = False
    log_to_trainer(trainer, {"pos/a_share": 0.25})
    assert trainer._metrics["train"]["pos/a_share"] == [0.75]
    assert trainer._metrics["eval"]["pos/a_share"] == [0.25]
    log_to_trainer(None, {"pos/a_share": 1.0})  # not bound to a trainer: nothing to log, no error
