"""Every reward adapter refuses a weight it cannot use -- an unknown name, NaN, infinity, a negative value, a bool, a
non-number -- with one line naming the reward, the weight and the known names, before any sample is scored; and a
reward stays finite for any text and any weights it accepted."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from worst_case.reward import ground_truth, worst_case_inputs

from thinkj.errors import ThinkJError
from thinkj.prompts import judge_output
from thinkj.rewards import PRESETS, get_preset
from thinkj.rewards.adapters.trl import TRLPresetReward, TRLReward
from thinkj.rewards.adapters.trl_group import GROUP_REWARDS, TRLGroupReward, get_group_reward
from thinkj.rewards.adapters.verl import check_reward_kwargs, compute_score
from thinkj.rewards.weights import MAX_MAGNITUDE, RewardWeightError, check_weights

RIGHT = judge_output("because", "a", 2)
GT = {"label": "a", "strength": 2}
BAD_VALUES = {  # value -> what the message says
    "nan": (float("nan"), "must be a finite number"), "inf": (float("inf"), "must be a finite number"),
    "-inf": (float("-inf"), "must be a finite number"), "text 'abc'": ("abc", "must be a number"),
    "text 'nan'": ("nan", "must be a finite number"), "empty text": ("", "must be a number"),
    "text '1_000'": ("1_000", "must be a number"), "negative": (-0.5, "must be >= 0"),
    "negative text": ("-1", "must be >= 0"), "true": (True, "must be a number"), "None": (None, "must be a number"),
    "list": ([0.5], "must be a number"), "too large": (1e300, "in magnitude"),
}


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text
    return text


def test_a_typo_in_a_verl_weight_fails_instead_of_training_with_the_default():
    with pytest.raises(RewardWeightError) as err:
        compute_score("thinkj", RIGHT, GT, {"index": 0}, preset="thinkj_qwen", w_strr=0.0)
    message = one_line(err.value)
    assert message.startswith("reward.custom_reward_function.reward_kwargs.w_strr: reward preset 'thinkj_qwen'")
    assert "did you mean 'w_str'?" in message and "its weights: w_acc, w_con, w_fmt, w_str" in message
    assert isinstance(err.value, ThinkJError) and isinstance(err.value, TypeError)
    with pytest.raises(RewardWeightError, match="w_strr"):  # the default preset too
        compute_score("thinkj", RIGHT, GT, w_strr=0.0)
    with pytest.raises(RewardWeightError, match=r"has no weight 'presett' \(did you mean 'preset'\?\)"):
        compute_score("thinkj", RIGHT, GT, presett="thinkj_llama")  # a mistyped preset key would keep thinkj_qwen


def test_verl_sets_aside_only_its_own_keywords():
    plain = compute_score("thinkj", RIGHT, GT, {"index": 0}, preset="thinkj_llama")
    routed = compute_score("thinkj", RIGHT, GT, {"index": 0}, preset="thinkj_llama", reward_router_address="h:1",
                           reward_model_tokenizer=object())
    assert plain == routed and plain["score"] == 2.0
    for key in ("group_preset", "group_size", "group_wait_s"):  # a group setting without the group manager
        with pytest.raises(RewardWeightError, match=f"{key}: read only by the group reward manager"):
            compute_score("thinkj", RIGHT, GT, preset="thinkj_llama", **{key: "xml_judge"})


@pytest.mark.parametrize("name", sorted(BAD_VALUES))
def test_every_adapter_refuses_a_bad_weight_value(name):
    value, says = BAD_VALUES[name]
    calls = {
        "preset": lambda: get_preset("thinkj_qwen")(RIGHT, GT, w_str=value),
        "verl": lambda: compute_score("thinkj", RIGHT, GT, preset="thinkj_qwen", w_str=value),
        "verl check": lambda: check_reward_kwargs({"preset": "thinkj_qwen", "w_str": value}),
        "verl group check": lambda: check_reward_kwargs({"group_preset": "xml_judge", "w_fmt": value},
                                                        group_manager=True),
        "TRL": lambda: TRLReward("thinkj_qwen", w_str=value),
        "TRL preset": lambda: TRLPresetReward("thinkj_qwen", w_str=value),
        "TRL group": lambda: TRLGroupReward("xml_judge", w_fmt=value),
        "group score": lambda: get_group_reward("multi_objective").score("p", ["1"], [[1]], w_exact=value),
    }
    for adapter, call in calls.items():
        with pytest.raises(RewardWeightError) as err:
            call()
        message = one_line(err.value)
        assert says in message and "its weights:" in message, (adapter, message)
        assert "thinkj_qwen" in message or "xml_judge" in message or "multi_objective" in message, (adapter, message)


def test_an_unknown_weight_fails_at_construction_in_every_adapter():
    for call in (lambda: TRLReward("thinkj_qwen", w_strr=0.0), lambda: TRLPresetReward("competition", w_lenght=0.5),
                 lambda: TRLGroupReward("xml_judge", w_fmtt=0.1), lambda: get_preset("margin")(RIGHT, GT, w_margn=1),
                 lambda: check_reward_kwargs({"group_preset": "thinkj_pairwise", "shceme": "knockout"},
                                             group_manager=True)):
        with pytest.raises(RewardWeightError, match=r"has no weight '\w+' \(did you mean '\w+'\?\); its weights: "):
            call()


def test_clean_numeric_text_is_read_as_the_number():
    assert get_preset("thinkj_qwen")(RIGHT, GT, w_str="0.5") == get_preset("thinkj_qwen")(RIGHT, GT, w_str=0.5)
    assert compute_score("s", RIGHT, GT, preset="thinkj_qwen", w_str=" 1e-1 ")["score"] == pytest.approx(2.1)
    assert TRLReward("thinkj_llama", w_fmt="0")(completions=[RIGHT], label=["a"], strength=[2]) == [1.0]


def test_kinds_choices_whole_numbers_and_signed_penalties():
    xml = get_preset("xml_judge")
    assert xml("<judgement>A</judgement>", {"label": "a"}, target_tokens=100.0)["score"] > 0  # 100.0 is whole
    with pytest.raises(RewardWeightError, match="target_tokens must be a whole number, got 100.5"):
        xml("<judgement>A</judgement>", {"label": "a"}, target_tokens=100.5)
    with pytest.raises(RewardWeightError, match="must be text"):
        xml("x", {"label": "a"}, tokenizer=3)
    assert xml("<judgement>A</judgement>", {"label": "a"}, group_acc=None)["score"] == 1.0  # None where the default is
    # a penalty whose default is negative takes either sign; a non-negative weight does not
    assert get_preset("competition")("", "24", leak_penalty=-2.0)["score"] < 0
    assert get_preset("multi_objective")("1", [1, 2], failure_penalty=0.25)["score"] == 0.25
    with pytest.raises(RewardWeightError, match="tag_missing must be >= 0"):
        get_preset("competition")("", "24", tag_missing=-0.2)
    # settings with choices and bools
    with pytest.raises(RewardWeightError, match="scheme must be one of .* \\(did you mean 'round_robin'\\?\\)"):
        TRLGroupReward("thinkj_pairwise", scheme="round_robbin")
    with pytest.raises(RewardWeightError, match="weight_strength must be true or false, got 1"):
        TRLGroupReward("thinkj_pairwise", weight_strength=1)
    assert TRLGroupReward("thinkj_pairwise", weight_strength="true").weights == {"weight_strength": True}
    with pytest.raises(RewardWeightError, match="min_unique_ratio must be <= 1"):
        TRLGroupReward("multi_objective", min_unique_ratio=1.5)
    with pytest.raises(RewardWeightError, match="group_size must be >= 1"):
        check_reward_kwargs({"group_preset": "xml_judge", "group_size": 0}, group_manager=True)
    with pytest.raises(RewardWeightError, match="group_wait_s must be a finite number"):
        check_reward_kwargs({"group_preset": "xml_judge", "group_wait_s": float("nan")}, group_manager=True)


@pytest.mark.parametrize("reward", ["thinkj_pairwise", "thinkj_round_robin", "grm_listwise"])
def test_an_http_judge_needs_calls_time_and_tokens_above_zero(reward):
    """0 in-flight calls, 0 s or 0 tokens is no judge at all, not a small one: refused when the reward is set up
    (the HTTP client would refuse the first two at the first scored group, mid-run; 0 tokens gave empty answers)."""
    for setting, value in (("concurrency", 0), ("timeout_s", 0.0), ("max_tokens", "0"), ("failure_window", 0),
                           *([("n_iter", 0)] if reward == "grm_listwise" else [])):
        with pytest.raises(RewardWeightError, match=f"{setting} must be > 0, got {value!r}"):
            TRLGroupReward(reward, **{setting: value})
        with pytest.raises(RewardWeightError, match=f"{setting} must be > 0"):
            check_reward_kwargs({"group_preset": reward, setting: value}, group_manager=True)
    assert TRLGroupReward(reward, concurrency=1, timeout_s=0.5, max_tokens=1).weights == {
        "concurrency": 1, "timeout_s": 0.5, "max_tokens": 1}
    with pytest.raises(ValueError, match="unknown setting kind 'str\\+'"):
        check_weights("r", {"x": "a"}, {"x": "b"}, kinds={"x": "str+"})


def test_rewards_cli_refuses_bad_weights_in_one_line():
    from typer.testing import CliRunner

    from thinkj.rewards.cli import app

    runner = CliRunner()
    for setting, says in (("w_strr=0", "--set w_strr: reward preset 'thinkj_qwen' has no weight 'w_strr' "
                                       "(did you mean 'w_str'?)"),
                          ("w_str=NaN", "--set w_str must be a finite number"),
                          ("w_str=-1", "--set w_str must be >= 0"),
                          ("w_str=true", "--set w_str must be a number, got True"),
                          ("w_str=abc", "--set w_str must be a number, got 'abc'")):
        result = runner.invoke(app, ["score", "thinkj_qwen", "--gt", "a", "--text", RIGHT, "--set", setting])
        assert isinstance(result.exception, RewardWeightError), setting
        assert says in one_line(result.exception), (setting, str(result.exception))
    ok = runner.invoke(app, ["score", "thinkj_qwen", "--gt", "a", "--text", RIGHT, "--set", 'w_str="0.5"'])
    assert ok.exit_code == 0 and '"score": 2.0' in ok.output


def _accepted(defaults: dict, data: st.DataObject) -> dict:
    """Values for every number setting drawn from everything the check accepts (others keep their default)."""
    out = {}
    for name, default in defaults.items():
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            continue
        low = -MAX_MAGNITUDE if default < 0 else 0
        if isinstance(default, int):
            out[name] = data.draw(st.integers(int(low), int(MAX_MAGNITUDE)) | st.sampled_from([0, 1]), label=name)
        else:
            out[name] = data.draw(st.floats(low, MAX_MAGNITUDE) | st.sampled_from([0.0, 1e-300, MAX_MAGNITUDE]),
                                  label=name)
    return out


TEXTS = worst_case_inputs(size=3000)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), preset=st.sampled_from(sorted(PRESETS)))
def test_every_reward_is_finite_for_any_text_and_any_accepted_weights(data, preset):
    reward = get_preset(preset)
    weights = _accepted(reward.defaults, data)
    score = reward.bind(weights)
    for label, text in TEXTS.items():
        out = score(text, ground_truth(preset))
        numbers = {k: v for k, v in out.items() if isinstance(v, (int, float))}
        assert all(math.isfinite(v) for v in numbers.values()), (preset, label, weights, numbers)


def test_group_rewards_check_the_same_way():
    for name, reward in sorted(GROUP_REWARDS.items()):
        with pytest.raises(RewardWeightError, match=f"group reward '{name}' has no weight 'no_such_weight'"):
            reward.weights({"no_such_weight": 1})
        assert reward.weights({}) == {**reward.defaults, "min_unique_ratio": reward.min_unique_ratio}
