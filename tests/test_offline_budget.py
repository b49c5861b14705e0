"""The offline pair builders' generation budget is the model profile's ``max_new_tokens`` (as for evaluation and
the difficulty filter), not a fixed 1,024: ``--profile`` picks it, ``--max-new-tokens`` overrides it, and
``thinkj train offline`` takes it from its ``--model`` profile.

The backend is a scripted one registered for the test: what is checked is the budget the builders ask for.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from thinkj.inference import _BACKENDS
from thinkj.models.profiles import generation_budget
from thinkj.offline.cli import train_app as app
from thinkj.prompts import judge_output
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

runner = CliRunner()


class Recorder:
    """Judge and critic that always argue for (a) -- or the side they are told -- and note each call's budget."""

    budgets: list[int] = []

    def __init__(self, model_path: str, **kwargs):
        self.name = f"recorder:{model_path}"

    def generate(self, conversations, params):
        import re

        Recorder.budgets.append(params.max_new_tokens)
        out = []
        for conv in conversations:
            told = re.search(r"You are told that Response \(([ab])\)", conv[-1]["content"])
            out.append([judge_output("scripted", told.group(1) if told else "a", 2)] * params.n)
        return out


@pytest.fixture
def recorder(monkeypatch, tmp_path):
    monkeypatch.setitem(_BACKENDS, "recorder", f"{__name__}:Recorder")
    monkeypatch.setattr(Recorder, "budgets", [])
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(4, seed=5))
    return data


def _run(*args: str) -> None:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)


def test_profiles_have_different_budgets():
    # the checks below could not tell the defaults apart otherwise
    assert generation_budget("tiny") == 96 and generation_budget() == 4096 != 1024


@pytest.mark.parametrize("extra,budget", [([], 4096), (["--profile", "tiny"], 96),
                                          (["--profile", "tiny", "--max-new-tokens", "50"], 50)])
def test_critic_pairs_budget_is_the_profiles(recorder, tmp_path, extra, budget):
    out = tmp_path / "out"
    _run("critic-pairs", "--pairs", str(recorder), "--judge", "j", "--critic", "c", "--out", str(out),
         "--backend", "recorder", *extra)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge_sampling"]["max_new_tokens"] == summary["critic_sampling"]["max_new_tokens"] == budget
    assert Recorder.budgets and set(Recorder.budgets) == {budget}


@pytest.mark.parametrize("extra,budget", [([], 4096), (["--profile", "tiny"], 96)])
def test_sampling_pairs_budget_is_the_profiles(recorder, tmp_path, extra, budget):
    out = tmp_path / "out"
    _run("sampling-pairs", "--pairs", str(recorder), "--judge", "j", "--out", str(out), "-n", "2",
         "--backend", "recorder", *extra)
    assert json.loads((out / "summary.json").read_text())["sampling"]["max_new_tokens"] == budget
    assert set(Recorder.budgets) == {budget}


def test_baseline_rejection_sampling_budget_is_the_profiles(recorder, tmp_path):
    _run("baseline-data", "--pairs", str(recorder), "--out", str(tmp_path / "out"), "--rs-model", "m", "-n", "2",
         "--backend", "recorder", "--profile", "tiny")
    assert set(Recorder.budgets) == {96}


def test_unknown_profile_fails_in_one_line_before_any_output(recorder, tmp_path):
    result = runner.invoke(app, ["critic-pairs", "--pairs", str(recorder), "--judge", "j", "--critic", "c",
                                 "--out", str(tmp_path / "out"), "--backend", "recorder", "--profile", "nope"])
    assert result.exit_code != 0 and "nope" in str(result.exception)
    assert not (tmp_path / "out").exists() and Recorder.budgets == []


def test_offline_iterations_take_the_budget_from_the_model_profile(recorder, tmp_path, monkeypatch):
    """`thinkj train offline --model tiny` (the pipeline's offline stage passes its MODEL_PROFILE) judges with 96."""
    from thinkj.offline import iterate

    def trained(kind, config, *, run_dir, name, **kwargs):  # DPO training itself is covered in test_offline_train.py
        model = run_dir / name
        model.mkdir(parents=True, exist_ok=True)
        return model

    monkeypatch.setattr(iterate, "run_stage", trained)
    _run("offline", "--pairs", str(recorder), "--judge", "j", "--critic", "c", "--model", "tiny",
         "--run-dir", str(tmp_path / "run"), "--backend", "recorder", "--seed", "3")
    summary = json.loads((tmp_path / "run" / "offline" / "iter_1" / "data" / "summary.json").read_text())
    assert summary["judge_sampling"]["max_new_tokens"] == 96 and summary["judge_sampling"]["seed"] == 3
    assert set(Recorder.budgets) == {96}
