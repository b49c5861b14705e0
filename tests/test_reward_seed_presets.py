"""Rules of the seed-000/002/004 reward presets: example tables, the XML judge's chain of desirability,
group scaling and diversity guard, data builders, and property tests (never raises, fixed keys, bounds)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinkj.data.xml_judge_task import CORRUPTIONS, build_xml_judge_pairs
from thinkj.prompts import get_template
from thinkj.records import RecordError
from thinkj.rewards import get_preset
from thinkj.rewards.adapters.trl_group import TRLGroupReward, get_group_reward
from thinkj.rewards.designs.competition import COMPETITION_KEYS, jaccard
from thinkj.rewards.designs.multi_objective import (
    MULTI_KEYS,
    build_attribute_rows,
    check_diversity,
    group_advantages,
    parse_scores,
)
from thinkj.rewards.designs.xml_judge import XML_KEYS, length_bonus, parse_xml_judgement

A = {"label": "a", "strength": None}
NOTES_128 = " ".join(["word"] * 128)


def xml(letter, notes="Sample A keeps its numbers consistent.", strict=True):
    body = f"<notes>\n{notes}\n</notes>\n<judgement>{letter}</judgement>"
    return body if strict else "Sure! " + body + " Hope that helps."


# ------------------------------------------------------------------------------------------ XML judge
PARSE_TABLE = [
    (xml("A"), "a", True),
    (xml("b"), "b", False),  # lower-case letter: read, but not the strict format
    ("<judgement> B </judgement>", "b", False),
    (xml("A", strict=False), "a", False),
    ("<notes>x</notes><judgement>A</judgement><judgement>B</judgement>", "none", False),  # hedging
    ("<notes>x</notes><judgement>A</judgement><judgement>A</judgement>", "a", False),
    ("<notes> </notes><judgement>A</judgement>", "a", False),  # empty notes
    ("<judgement>C</judgement>", "none", False),
    ("", "none", False),
    (None, "none", False),
]


@pytest.mark.parametrize("text,choice,well_formed", PARSE_TABLE)
def test_xml_parse_table(text, choice, well_formed):
    assert parse_xml_judgement(text)[:2] == (choice, well_formed)


XML_TABLE = [  # text, gold, group_acc, expected score
    (xml("A", NOTES_128), A, 1.0, 1.0 + 0.2 + 0.2),
    (xml("A", NOTES_128), A, 0.5, 0.5 ** 4 + 0.2 + 0.2),
    (xml("A", NOTES_128, strict=False), A, 0.5, 0.5 ** 4 + 0.2),
    (xml("B", NOTES_128), A, 0.5, 0.0),
    (xml("A", " ".join(["w"] * 256)), A, 1.0, 1.0 + 0.2 + 0.0),  # 256 tokens: length bonus gone
    (xml("A", " ".join(["w"] * 64)), A, 1.0, 1.0 + 0.2 + 0.2 * 0.75),
    ("<judgement>A</judgement>", A, None, 1.0),  # per-sample call: unscaled, no notes
]


@pytest.mark.parametrize("text,gt,acc,score", XML_TABLE)
def test_xml_reward_table(text, gt, acc, score):
    result = get_preset("xml_judge")(text, gt, group_acc=acc)
    assert result["score"] == pytest.approx(score)
    assert tuple(result) == XML_KEYS


@pytest.mark.parametrize("acc", [0.25, 0.5, 0.75, 1.0])
def test_xml_chain_of_desirability(acc):
    reward = get_preset("xml_judge")
    for notes in ("short", NOTES_128, " ".join(["w"] * 300)):
        right_fmt = reward(xml("A", notes), A, group_acc=acc)["score"]
        right_bad = reward(xml("A", notes, strict=False), A, group_acc=acc)["score"]
        wrong_fmt = reward(xml("B", notes), A, group_acc=acc)["score"]
        wrong_bad = reward(xml("B", notes, strict=False), A, group_acc=acc)["score"]
        assert right_fmt > right_bad > wrong_fmt == wrong_bad == 0.0


def test_xml_length_counted_with_a_real_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    notes = "Sample A keeps its numbers consistent; Sample B swaps 1932 and 1970."
    expected = len(AutoTokenizer.from_pretrained(tiny_model_dir).encode(notes, add_special_tokens=False))
    result = get_preset("xml_judge")(xml("A", notes), A, tokenizer=str(tiny_model_dir))
    assert result["notes_tokens"] == expected != get_preset("xml_judge")(xml("A", notes), A)["notes_tokens"]
    assert result["length_bonus"] == pytest.approx(length_bonus(expected))


def test_length_bonus_peaks_at_target():
    values = [length_bonus(n) for n in range(0, 300, 8)]
    assert max(values) == length_bonus(128) == 1.0
    assert length_bonus(100) < length_bonus(120) < 1.0 and length_bonus(200) < length_bonus(140)


def test_xml_group_scaling_and_scopes():
    texts = [xml("A", NOTES_128), xml("A", NOTES_128), xml("B"), "nothing"]
    out = get_group_reward("xml_judge").score("p", texts, [A] * 4)
    assert [r["group_acc"] for r in out] == [0.5] * 4
    assert out[0]["score"] == pytest.approx(0.5 ** 4 + 0.4) and out[2]["score"] == out[3]["score"] == 0.0
    # TRL: two prompts, group scope -> accuracy per prompt; batch scope -> one accuracy for the call
    prompts = ["p1"] * 2 + ["p2"] * 2
    completions = [xml("A", NOTES_128), xml("B"), xml("A", NOTES_128), xml("A", NOTES_128)]
    labels = ["a"] * 4
    group = TRLGroupReward("xml_judge")(prompts=prompts, completions=completions, label=labels)
    assert group == pytest.approx([0.5 ** 4 + 0.4, 0.0, 1.4, 1.4])
    batch = TRLGroupReward("xml_judge", scope="batch")(prompts=prompts, completions=completions, label=labels)
    assert batch == pytest.approx([0.75 ** 4 + 0.4, 0.0, 0.75 ** 4 + 0.4, 0.75 ** 4 + 0.4])
    with pytest.raises(TypeError, match="w_typo"):
        TRLGroupReward("xml_judge", w_typo=1)
    with pytest.raises(ValueError, match=r"size \[1, 3\], expected 2"):  # a group cut across processes
        TRLGroupReward("xml_judge", expected_group_size=2)(prompts=["p1"] * 3 + ["p2"], completions=completions,
                                                            label=labels)


def test_xml_task_builder_is_seeded_balanced_and_counts_skips():
    texts = [f"Report {i}: the plant made {i * 7 + 3} units in {1990 + i}. It is run by a co-op. Output was "
             f"steady. Prices never moved." for i in range(20)]
    texts += ["too short", "No numbers or polarity words here at all, one sentence only"]
    pairs, counts = build_xml_judge_pairs(texts, seed=3)
    again, _ = build_xml_judge_pairs(texts, seed=3)
    assert [p.to_dict() for p in pairs] == [p.to_dict() for p in again]
    assert counts == {"texts": 22, "too_short": 1, "uncorruptible": 1}
    assert sum(p.label == "a" for p in pairs) == len(pairs) // 2
    for pair in pairs:
        original = pair.response_a if pair.label == "a" else pair.response_b
        corrupted = pair.response_b if pair.label == "a" else pair.response_a
        assert original in texts and corrupted != original and pair.meta["corruption"] in CORRUPTIONS
    messages = get_template("xml_judge_v1").render(pairs[0])
    assert "<judgement>" in messages[0]["content"] and pairs[0].response_a in messages[1]["content"]


def test_corruptions_table():
    import random

    text = "It is not red and it is big."
    assert {CORRUPTIONS["negate"](text, random.Random(i)) for i in range(20)} == {"It is red and it is big.",
                                                                                  "It is not red and it is not big."}
    assert CORRUPTIONS["swap_numbers"]("Built in 1932, rebuilt in 1970.", random.Random(0)) == "Built in 1970, rebuilt in 1932."
    assert CORRUPTIONS["swap_numbers"]("No digits.", random.Random(0)) is None
    three = "One. Two. Three."
    assert CORRUPTIONS["drop_sentence"](three, random.Random(0)) in ("One. Three.", "One. Two.")
    assert CORRUPTIONS["drop_sentence"]("One. Two.", random.Random(0)) is None
    assert sorted(CORRUPTIONS["swap_sentences"](three, random.Random(0)).split()) == sorted(three.split())


def test_xml_task_with_a_model_as_the_corruption(tiny_model_dir):
    from thinkj.data.xml_judge_task import model_corruption
    from thinkj.inference import SamplingParams, make_backend

    backend = make_backend("hf", str(tiny_model_dir), batch_size=2)
    corrupt = model_corruption(backend, SamplingParams(temperature=1.0, max_new_tokens=12))
    texts = ["The river floods every spring and the town builds its levees higher each year."] * 2
    pairs, counts = build_xml_judge_pairs(texts, seed=0, corruptions=[corrupt])
    assert counts["uncorruptible"] + len(pairs) == 2 and pairs
    assert all(p.meta["corruption"] == "model_rewrite" for p in pairs)


# ------------------------------------------------------------------------------------------ competition
def construct(p="Arr, 3 hives make 12 candles so 96 candles need 24 hives, says I.",
              k="Hark, one hive yields four candles; ninety-six divided by four is twenty four.",
              v="Thorson multiplies: ninety-six over twelve is eight, eight times three is 24.",
              winner="pirate", answer="The answer is 24 hives.", between=""):
    return (f"<competition>\n<pirate>\n{p}\n</pirate>{between}\n<knight>\n{k}\n</knight>\n<viking>\n{v}\n</viking>\n"
            f"<result>\nAll correct, dryly noted.\n<winner>\n{winner}\n</winner>\n</result>\n</competition>\n{answer}")


COMP_TABLE = [  # text, gold, expected {key: value}
    (construct(), "24", {"tags": 0.6, "format": 1.0, "originality": 1.0, "winner": 1.0, "answer": 1.0, "leak": 0.0}),
    (construct(between=" aside "), "24", {"format": 0.5, "tags": 0.6}),  # text between tags: partial format
    (construct(answer="It is 25."), "24", {"answer": 0.0}),
    (construct(answer="Final: \\boxed{24}. Checked 25 ways."), "24", {"answer": 1.0}),
    (construct(answer="<winner>pirate</winner> 24"), "24", {"answer": -1.0, "leak": 1.0}),
    (construct(answer="Paris is the capital."), "paris", {"answer": 1.0}),
    (construct(winner="the pirate, obviously"), "24", {"winner": 0.5}),
    (construct(winner="pirate and knight"), "24", {"winner": 0.0}),
    (construct(k="Arr, 3 hives make 12 candles so 96 candles need 24 hives, says I."), "24", {"originality": 0.0}),
    (construct(v="Hark, one hive yields four candles; ninety-six divided by four is twenty four."), "24",
     {"originality": 0.0}),
    (construct().replace("<viking>", "").replace("</viking>", ""), "24",
     {"tags": 0.5 - 0.2, "format": 0.0, "originality": 0.5}),
    (construct() + "\n<pirate>again</pirate>", "24", {"tags": 0.5 - 0.1, "format": 0.0, "answer": -1.0}),
    ("", "24", {"tags": -1.2, "format": 0.0, "length": 0.0, "winner": 0.0, "answer": 0.0}),
]


@pytest.mark.parametrize("text,gold,expected", COMP_TABLE)
def test_competition_table(text, gold, expected):
    result = get_preset("competition")(text, gold)
    assert tuple(result) == COMPETITION_KEYS
    for key, value in expected.items():
        assert result[key] == pytest.approx(value), key
    parts = ("tags", "format", "length", "originality", "winner", "answer")
    assert result["score"] == pytest.approx(sum(result[k] for k in parts))


def test_competition_length_and_weights():
    reward = get_preset("competition")
    words = lambda n: " ".join(f"w{i}" for i in range(n))  # noqa: E731 -- distinct words: no copying
    short = reward(construct(words(30), words(30), words(30)), "24")["length"]
    best = reward(construct(words(150), words(150), words(150)), "24")["length"]
    long = reward(construct(words(400), words(400), words(400)), "24")["length"]
    assert short == pytest.approx(0.2) and best == pytest.approx(1.0) and long == pytest.approx(1 - 250 / 450)
    only_answer = reward(construct(), "24", w_tags=0, w_format=0, w_length=0, w_orig=0, w_winner=0)
    assert only_answer["score"] == 1.0
    # the optional lexical self-reflection term: off by default, min(1, cues / 2) per character when weighted
    reflective = construct(p="Wait, that was a mistake; let me check again: 24.", k="Actually it is 24.", v="24 it is.")
    assert reward(reflective, "24")["reflection"] == pytest.approx((1 + 0.5 + 0) / 3)
    gain = reward(reflective, "24", w_reflect=2.0)["score"] - reward(reflective, "24")["score"]
    assert gain == pytest.approx(2.0 * 0.5)
    assert jaccard("a b c d", "a b c d") == 1.0 and jaccard("a b c d", "x y z w") == 0.0


# ------------------------------------------------------------------------------------------ multi-objective
MULTI_TABLE = [  # text, gold, score
    ("3 4 2 5", [3, 4, 2, 5], 0.3 + 0.3 + 0.25 + 0.15 + 0.1),
    ("3 4 3 5", [3, 4, 2, 5], 0.3 * 0.75 + 0.3 * (3 * 1.3 + 1) / 5.2 + 0.25 * (1 - 0.25 / 5) + 0.15),
    ("The answers are: 3 4 2 5", [3, 4, 2, 5], 0.3 + 0.3 + 0.25 + 0.15 * 0.5 + 0.1),
    ("3  4 2 5", [3, 4, 2, 5], 0.3 + 0.3 + 0.25 + 0.15 * 0.8 + 0.1),
    ("0 0 0 0", [3, 4, 2, 5], 0.25 * (1 - 3.5 / 5) + 0.15),
    ("3 4 2", [3, 4, 2, 5], -0.5),
    ("no numbers", [3, 4, 2, 5], -0.5),
    ("3 4 2 5 1", {"scores": [3, 4, 2, 5]}, -0.5),
]


@pytest.mark.parametrize("text,gold,score", MULTI_TABLE)
def test_multi_objective_table(text, gold, score):
    result = get_preset("multi_objective")(text, gold)
    assert result["score"] == pytest.approx(score)
    assert tuple(result) == MULTI_KEYS


def test_parse_scores_and_ground_truth_forms():
    assert parse_scores("3 4.5 x7 -1 2") == [3, -1, 2]
    reward = get_preset("multi_objective")
    cols = {"helpfulness": 3, "correctness": 4, "coherence": 4, "complexity": 1, "verbosity": 2}
    for gt in ([3, 4, 4, 1, 2], {"scores": [3, 4, 4, 1, 2]}, cols, "[3, 4, 4, 1, 2]"):
        assert reward("3 4 4 1 2", gt)["perfect"] == 1.0
    bad = reward("1", "not json")  # a data error the reward records, never an exception
    assert bad["gold_error"] == 1.0 and bad["score"] == 0.0
    assert reward.gold_problem("not json").startswith("ground_truth: not valid JSON")


def test_group_advantages_and_diversity():
    assert group_advantages([1.0, 1.0, 1.0, 1.0]) == [0.0] * 4
    assert group_advantages([0.5, 0.505]) == [0.0, 0.0]  # std below 0.01: no signal
    adv = group_advantages([0.0, 1.0, 0.0, 1.0])
    assert adv == pytest.approx([-1, 1, -1, 1], abs=1e-6) and group_advantages([2.0]) == [0.0]
    assert check_diversity(["a", "b", "a", "a"]) is True and check_diversity(["a", "a", "a", "b"]) is True
    assert check_diversity(["a", "a", "a", "a"]) is False and check_diversity([]) is False
    out = get_group_reward("multi_objective").score("p", ["1 2 3 4 0"] * 4 + ["0 0 0 0 0"],
                                                    [[1, 2, 3, 4, 0]] * 5)  # 2 of 5 distinct: 40% < 50%
    assert {r["group_skipped"] for r in out} == {1.0} and len({r["score"] for r in out}) == 1
    out = get_group_reward("multi_objective").score("p", ["1 2 3 4 0", "0 0 0 0 0"], [[1, 2, 3, 4, 0]] * 2)
    assert out[0]["score"] > out[1]["score"] and out[0]["group_skipped"] == 0.0


def test_helpsteer2_builder_and_template(tmp_path):
    rows = [{"prompt": "Name a prime.", "response": "7 is prime.", "helpfulness": 4, "correctness": 4,
             "coherence": 4, "complexity": 0, "verbosity": 1},
            {"prompt": "Explain tides.", "response": "The moon pulls water.", "helpfulness": 2, "correctness": 3,
             "coherence": 3, "complexity": 1, "verbosity": 0}]
    out = build_attribute_rows(rows)
    assert out[0]["reward_model"]["ground_truth"] == {"scores": [4, 4, 4, 0, 1]}
    content = out[1]["prompt"][0]["content"]
    assert "Explain tides." in content and "The moon pulls water." in content and "verbosity" in content
    assert get_preset("multi_objective")("2 3 3 1 0", out[1]["reward_model"]["ground_truth"])["perfect"] == 1.0
    # verl reads the parquet back with numpy arrays inside the ground truth; the preset takes them as they come
    import pyarrow.parquet as pq

    from thinkj.rewards.designs.multi_objective import write_attribute_parquet

    path = tmp_path / "hs2.parquet"
    assert write_attribute_parquet(str(path), out) == 2
    gt = pq.read_table(path).to_pandas().iloc[1]["reward_model"]["ground_truth"]
    assert get_preset("multi_objective")("2 3 3 1 0", gt)["perfect"] == 1.0
    with pytest.raises(RecordError, match=r"line 2.*correctness|correctness.*line 2"):
        build_attribute_rows([rows[0], {**rows[1], "correctness": 5}], path="hs2.jsonl")
    with pytest.raises(RecordError, match="response"):
        build_attribute_rows([{**rows[0], "response": ""}])


# ------------------------------------------------------------------------------------------ properties
FRAGMENTS = st.sampled_from(["<notes>", "</notes>", "<judgement>", "</judgement>", "A", "B", "<competition>",
                             "</competition>", "<pirate>", "</pirate>", "<knight>", "</knight>", "<viking>",
                             "</viking>", "<result>", "</result>", "<winner>", "</winner>", "pirate", "24", " ", "\n",
                             "3 4 2 1 0", "\\boxed{24}", "-7"])
TEXTS = st.one_of(st.text(max_size=300), st.lists(st.one_of(FRAGMENTS, st.text(max_size=12)), max_size=40).map("".join))

BOUNDS = {"xml_judge": (0.0, 1.4), "competition": (-3.2, 5.6), "multi_objective": (-0.5, 1.1)}
GOLDS = {"xml_judge": {"label": "b", "strength": None}, "competition": "24", "multi_objective": [3, 4, 2, 1, 0]}
KEYS = {"xml_judge": XML_KEYS, "competition": COMPETITION_KEYS, "multi_objective": MULTI_KEYS}


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, preset=st.sampled_from(sorted(BOUNDS)))
def test_presets_never_raise_fixed_keys_and_bounds(text, preset):
    result = get_preset(preset)(text, GOLDS[preset])
    assert tuple(result) == KEYS[preset]
    low, high = BOUNDS[preset]
    assert math.isfinite(result["score"]) and low - 1e-9 <= result["score"] <= high + 1e-9


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=6), acc_gold=st.sampled_from(["a", "b"]))
def test_xml_group_never_raises_and_scales_by_group_accuracy(texts, acc_gold):
    out = get_group_reward("xml_judge").score("p", texts, [acc_gold] * len(texts))
    acc = sum(r["acc"] for r in out) / len(out)
    for r in out:
        assert tuple(r) == XML_KEYS + ("group_size", "group_skipped")
        assert r["group_acc"] == pytest.approx(acc)
        assert (r["score"] == 0.0) if not r["acc"] else (acc ** 4 <= r["score"] <= acc ** 4 + 0.4 + 1e-9)


def test_rewards_cli_lists_and_scores():
    import json

    from typer.testing import CliRunner

    from thinkj.rewards.cli import app

    runner = CliRunner()
    listed = runner.invoke(app, ["list"])
    assert listed.exit_code == 0 and "group  xml_judge" in listed.output and "preset competition" in listed.output
    scored = runner.invoke(app, ["score", "xml_judge", "--group", "--gt", '{"label": "a"}',
                                 "--text", xml("A", NOTES_128), "--text", xml("B")])
    lines = [json.loads(line) for line in scored.output.splitlines()]
    assert scored.exit_code == 0 and [r["score"] for r in lines] == pytest.approx([0.5 ** 4 + 0.4, 0.0])
    bad = runner.invoke(app, ["score", "multi_objective", "--gt", "[1]", "--text", "1", "--set", "w_typo=1"])
    assert bad.exit_code != 0 and "w_typo" in str(bad.exception)


def test_reward_configs_name_real_presets_and_weights():
    from pathlib import Path

    from thinkj.online.trl_presets import load_config, reward_function

    files = sorted((Path(__file__).resolve().parent.parent / "configs" / "rewards").glob("*.yaml"))
    assert {f.stem for f in files} >= {"xml_judge", "grm_listwise", "thinkj_pairwise_rm", "competition", "multi_objective"}
    for path in files:
        cfg = load_config(path)
        reward = reward_function(cfg)  # unknown preset or weight names raise here
        name = cfg["reward"].get("group_preset") or cfg["reward"]["preset"]
        assert name in reward.__name__, path.name
    with pytest.raises(TypeError, match="w_typo"):
        reward_function({"reward": {"preset": "competition", "weights": {"w_typo": 1}}})
