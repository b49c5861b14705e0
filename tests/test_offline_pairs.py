"""Pairing logic of the critic-guided construction and the Sampling baseline, with a scripted backend.

The backend here is scripted on purpose: these tests are about which traces become chosen / rejected, so the
judge's and critic's answers must be chosen case by case. Real tiny-model runs are in test_offline_train.py.
"""

from __future__ import annotations

import json
import re

import pytest

from thinkj.inference.base import SamplingParams
from thinkj.offline.baselines import bt_examples, direct_sft_examples, rejection_sampling_examples
from thinkj.offline.critic_pairs import critic_guided_pairs, sampling_pairs
from thinkj.prompts import get_template, judge_output
from thinkj.records import PreferencePair
from thinkj.verdict_parser import parse_verdict

JUDGE = get_template("judge_strength_v2")
FMT = JUDGE.answer


def pair(i: int, label: str) -> PreferencePair:
    return PreferencePair(f"p{i}", "test", [{"role": "user", "content": f"Question {i}?"}], f"answer A{i}", f"answer B{i}",
                          label, 2, {})


class Scripted:
    """Answers by looking at the prompt: ``judge[item]`` for judge prompts, ``critic[item]`` for critic prompts.

    A script value is a function of the side the critic was told (or None for the judge) returning the text.
    """

    name = "scripted"

    def __init__(self, judge=None, critic=None):
        self.judge, self.critic, self.calls = judge or {}, critic or {}, []

    def generate(self, conversations, params):
        out = []
        for conv in conversations:
            text = conv[-1]["content"]
            item = re.search(r"Question (\d+)\?", text).group(1)
            told = re.search(r"You are told that Response \(([ab])\)", text)
            self.calls.append(("critic" if told else "judge", item))
            script = (self.critic if told else self.judge)[int(item)]
            out.append([script(told.group(1) if told else None, k) for k in range(params.n)])
        return out


def says(choice, strength=2, thinking="Because."):
    return lambda told, k: judge_output(thinking, choice, strength)


def obeys(told, k):  # a critic that argues whatever side it is told
    return judge_output(f"Arguing for {told}.", told, 2)


def test_every_kept_pair_obeys_the_rules():
    pairs = [pair(0, "a"), pair(1, "b"), pair(2, "a"), pair(3, "b"), pair(4, "a"), pair(5, "tie")]
    judge = {0: says("a"), 1: says("a"), 2: lambda t, k: "no verdict here", 3: says("b", strength=None),
             4: says("a"), 5: says("a")}
    critic = {0: obeys, 1: obeys, 2: obeys, 3: obeys, 4: says("a")}  # item 4: critic refuses to argue the wrong side
    result = critic_guided_pairs(pairs, Scripted(judge), Scripted(critic=critic))
    by_case = result.counts
    assert by_case["kept: judge right, critic negative"] == 1  # item 0
    assert by_case["kept: judge wrong, critic positive"] == 3  # item 1 (wrong side), 2 (unparsable), 3 (ill-formed)
    assert by_case["dropped: judge right, critic did not reach the wrong verdict"] == 1  # item 4
    assert by_case["dropped: tie label"] == 1
    assert len(result.examples) == 4
    gold = {p.id: p.label for p in pairs}
    kept = [row for row in result.log if row.get("kept")]
    for (prompt, chosen, rejected), row in zip(result.examples, kept):
        view = next(p for p in pairs if p.id == row["item_id"])
        assert prompt == JUDGE.render(view)  # the judge prompt of SFT, never the critic's
        good = parse_verdict(chosen, FMT, strict=True)
        assert good.choice == gold[view.id] and good.well_formed
        assert parse_verdict(rejected, FMT, strict=False).choice != gold[view.id] or \
            not parse_verdict(rejected, FMT, strict=True).well_formed
    # item 0: judge right -> chosen is the judge's trace, rejected the critic's wrong one
    prompt, chosen, rejected = result.examples[0]
    assert "Because." in chosen and parse_verdict(rejected, FMT).choice == "b"


def test_critic_is_told_the_opposite_side_and_strength_only_for_the_right_side():
    prompts = []

    class Recorder(Scripted):
        def generate(self, conversations, params):
            prompts.extend(c[-1]["content"] for c in conversations)
            return super().generate(conversations, params)

    # item 0: judge right (a) -> critic told b without a strength; item 1: judge wrong -> critic told b (gold), strength 2
    critic_guided_pairs([pair(0, "a"), pair(1, "b")], Scripted({0: says("a"), 1: says("a")}),
                        Recorder(critic={0: obeys, 1: obeys}))
    assert "told that Response (b)" in prompts[0] and "Its preference strength is" not in prompts[0]
    assert "told that Response (b)" in prompts[1] and "Its preference strength is 2" in prompts[1]


def test_critic_retries_use_the_first_sample_that_obeys():
    flaky = {0: lambda told, k: judge_output("x", "a" if k == 0 else told, 2)}
    result = critic_guided_pairs([pair(0, "a")], Scripted({0: says("a")}), Scripted(critic=flaky),
                                 critic_params=SamplingParams(temperature=1.0, n=3))
    assert len(result.examples) == 1 and parse_verdict(result.examples[0][2], FMT).choice == "b"


def test_both_orders_swap_label_and_prompt():
    result = critic_guided_pairs([pair(0, "a")], Scripted({0: says("a")}), Scripted(critic={0: obeys}),
                                 orders=("original", "swapped"))
    # original: judge right (a); swapped: gold b, judge says a -> critic positive for b
    assert [row["case"] for row in result.log] == ["judge_right", "judge_wrong"]
    assert result.examples[1][0] == JUDGE.render(pair(0, "a").swapped())
    assert parse_verdict(result.examples[1][1], FMT).choice == "b"


def test_write_produces_a_llamafactory_ranking_dataset(tmp_path):
    result = critic_guided_pairs([pair(0, "a"), pair(1, "b")], Scripted({0: says("a"), 1: says("a")}),
                                 Scripted(critic={0: obeys, 1: obeys}))
    summary = result.write(tmp_path, "thinkj_dpo")
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert info["thinkj_dpo"]["ranking"] is True and summary["pairs"] == 2
    rows = json.loads((tmp_path / "thinkj_dpo.json").read_text())
    assert rows[0]["messages"] == JUDGE.render(pair(0, "a")) and rows[0]["chosen"]["role"] == "assistant"
    assert len((tmp_path / "pairs_log.jsonl").read_text().splitlines()) == 2


def test_sampling_baseline_pairs_right_with_wrong():
    samples = {0: lambda t, k: judge_output("s", "a" if k % 2 == 0 else "b", 2),  # mixed -> pairs
               1: lambda t, k: judge_output("s", "b", 2),  # all right
               2: lambda t, k: judge_output("s", "a", None)}  # right side but ill-formed: neither right nor wrong
    result = sampling_pairs([pair(0, "a"), pair(1, "b"), pair(2, "a")], Scripted(samples), n=4, pairs_per_view=2)
    assert len(result.examples) == 2 and result.counts["dropped: all samples right"] == 1
    assert result.counts["dropped: no right sample"] == 1
    for _, chosen, rejected in result.examples:
        assert parse_verdict(chosen, FMT).choice == "a" and parse_verdict(rejected, FMT).choice == "b"


def test_baseline_datasets():
    pairs = [pair(0, "a"), pair(1, "b"), pair(2, "tie")]
    direct = direct_sft_examples(pairs)
    assert [t for _, t in direct] == ["Therefore, Response (a) is better.", "Therefore, Response (b) is better."]
    assert parse_verdict(direct[0][1], get_template("direct_v2").answer, strict=True).well_formed
    assert bt_examples(pairs)[1] == ([{"role": "user", "content": "Question 1?"}], "answer B1", "answer A1")
    judge = Scripted({0: lambda t, k: judge_output("r", "a" if k else "b", 2), 1: says("a")})
    examples, counts = rejection_sampling_examples(pairs[:2], judge, n=3)
    assert len(examples) == 1 and counts["items without a right sample"] == 1
    assert parse_verdict(examples[0][1], FMT).choice == "a"


def test_rejects_non_judge_templates():
    with pytest.raises(ValueError, match="judge template"):
        critic_guided_pairs([pair(0, "a")], Scripted(), Scripted(), judge_template="critic_strength_v2")
