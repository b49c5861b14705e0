"""Difficulty filter: exact keep rule with a scripted judge, end to end with the tiny model, resume from cache."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from thinkj.data.difficulty import run_difficulty
from thinkj.inference import SamplingParams
from thinkj.prompts import judge_output
from thinkj.records import load_pairs, write_jsonl
from thinkj.synthetic.fruit_task import make_pairs


class ScriptedJudge:
    """A backend whose answers are fixed per question: sample k of pair i is right unless (i, k) is listed.

    The filter under test only sees text, exactly as from a model; this judge makes the expected kept set known.
    """

    name = "scripted-judge"

    def __init__(self, pairs, wrong: dict[int, set[int]], garbled: dict[int, set[int]]):
        self.by_question = {p.response_a + "|" + p.response_b: (i, p.label) for i, p in enumerate(pairs)}
        self.wrong, self.garbled, self.calls = wrong, garbled, 0

    def generate(self, conversations, params: SamplingParams):
        self.calls += len(conversations)
        out = []
        for conv in conversations:
            text = conv[-1]["content"]
            (i, label), = [v for key, v in self.by_question.items() if all(part in text for part in key.split("|"))]
            samples = []
            for k in range(params.n):
                if k in self.garbled.get(i, set()):
                    samples.append("I cannot decide.")
                else:
                    choice = {"a": "b", "b": "a"}[label] if k in self.wrong.get(i, set()) else label
                    samples.append(judge_output("Compared both.", choice, 2))
            out.append(samples)
        return out


def _unique_pairs(n: int):
    pairs = make_pairs(n, seed=7)
    # Make every pair's text unique so the scripted judge can recognise it.
    for i, p in enumerate(pairs):
        p.response_a, p.response_b = f"{p.response_a} [{i}a]", f"{p.response_b} [{i}b]"
    return pairs


def test_keeps_pairs_failed_at_least_once_and_resumes(tmp_path):
    pairs = _unique_pairs(8)
    src = tmp_path / "pairs.jsonl"
    write_jsonl(src, pairs)
    wrong, garbled = {1: {0}, 3: {0, 1, 2}, 6: {2}}, {4: {1}}
    judge = ScriptedJudge(pairs, wrong, garbled)
    out = tmp_path / "difficulty" / "kept.jsonl"
    summary = run_difficulty(src, out, model="scripted", backend_obj=judge, k=3, chunk=3)
    kept = load_pairs(out)
    assert [p.id for p in kept] == [pairs[i].id for i in (1, 3, 4, 6)]
    assert [p.meta["difficulty"]["failures"] for p in kept] == [1, 3, 1, 1]
    assert summary["n_in"] == 8 and summary["n_out"] == 4 and summary["unparsable_samples"] == 1
    assert summary["failure_histogram"] == {"0": 4, "1": 3, "2": 0, "3": 1}
    assert summary["failures_per_pair"][pairs[3].id] == 3
    assert json.loads(out.with_suffix(".summary.json").read_text())["n_out"] == 4
    assert len(list(open(out.with_suffix(".judgments.jsonl")))) == 24
    # Rerun: everything comes from the cache, nothing is generated again.
    again = run_difficulty(src, out, model="scripted", backend_obj=ScriptedJudge(pairs, wrong, garbled), k=3)
    assert again["cache"] == {"hits": 24, "generated": 0} and again["n_out"] == 4
    # min_failures=2 keeps only the pair failed three times.
    assert run_difficulty(src, tmp_path / "strict.jsonl", model="scripted", backend_obj=judge, k=3,
                          min_failures=2)["n_out"] == 1


def test_interrupted_run_resumes_without_repeating(tmp_path):
    pairs = _unique_pairs(6)
    src = tmp_path / "pairs.jsonl"
    write_jsonl(src, pairs)
    out = tmp_path / "kept.jsonl"

    class Crashing(ScriptedJudge):
        def generate(self, conversations, params):
            if self.calls >= 2:
                raise KeyboardInterrupt  # stands for a kill after the first chunk of 2 pairs
            return super().generate(conversations, params)

    with pytest.raises(KeyboardInterrupt):
        run_difficulty(src, out, model="scripted", backend_obj=Crashing(pairs, {0: {0}}, {}), k=3, chunk=2)
    judge = ScriptedJudge(pairs, {0: {0}}, {})
    summary = run_difficulty(src, out, model="scripted", backend_obj=judge, k=3, chunk=2)
    assert summary["cache"] == {"hits": 6, "generated": 12} and judge.calls == 4
    assert summary["n_out"] == 1


def test_difficulty_entry_point_with_tiny_model_hf_backend(tmp_path, tiny_model_dir):
    src = tmp_path / "pairs.jsonl"
    write_jsonl(src, make_pairs(6, seed=3))
    out = tmp_path / "kept.jsonl"
    cmd = [sys.executable, "-m", "data_prep.difficulty", "--in", str(src), "--out", str(out), "--model", str(tiny_model_dir),
           "--backend", "hf", "--k", "3", "--max-new-tokens", "12", "--batch-size", "8"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["n_in"] == 6 and summary["samples"] == 18 and summary["cache"]["generated"] == 18
    # The untrained tiny model almost never writes a verdict, so (nearly) every pair counts as hard.
    kept = load_pairs(out)
    assert len(kept) == summary["n_out"] == sum(1 for f in summary["failures_per_pair"].values() if f >= 1) >= 5
    judgments = [json.loads(line) for line in open(out.with_suffix(".judgments.jsonl"))]
    assert {j["sample"] for j in judgments} == {0, 1, 2} and all(isinstance(j["output"], str) for j in judgments)
    assert "[difficulty (judge_strength_v2, k=3)] 6/6" in run.stderr  # progress is shown
    assert json.loads(run.stdout)["n_out"] == summary["n_out"]
