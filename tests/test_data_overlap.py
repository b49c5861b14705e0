"""Look-only overlap checks: `thinkj data overlap`, a model's recorded training data, and the warning of `eval run`.

Fails before: without the records followed (``recorded_training_data`` returning []) the evaluation prints no
warning and the chain test finds no data; with strings of LlamaFactory rows not read (``row_fields`` returning {}
for non-pair rows) the judge-template rows pass unnoticed.
"""

from __future__ import annotations

import json
import shutil

from conftest import shared_data
from typer.testing import CliRunner

from thinkj.data.cli import app
from thinkj.data.overlap import recorded_training_data, training_rows, warn_training_overlap
from thinkj.records import PreferencePair, write_json, write_jsonl


def _autoj_slice(tmp_path, n: int = 3):
    """The first ``n`` rows of the real Auto-J test set, and the prompt of its first row (long enough to n-gram)."""
    rows = [json.loads(line) for line in open(shared_data("auto-j", "testdata_pairwise.jsonl"), encoding="utf-8")]
    rows = [r for r in rows if len(r["prompt"].split()) >= 30][:n]
    path = tmp_path / "autoj.jsonl"
    write_jsonl(path, rows)
    return path, rows[0]["prompt"]


def _judge_sft_folder(folder, prompt: str | None):
    """A LlamaFactory dataset folder as the seed set writes it: sharegpt rows whose human turn embeds a question."""
    question = prompt or "Which of these two poems about autumn rain uses the more vivid imagery and why?"
    rows = [{"conversations": [
        {"from": "human", "value": "Please act as an impartial judge and compare the two responses to the question.\n"
                                   f"[Question]\n{question}\n[Response (a)]\nA reply.\n[Response (b)]\nAnother reply."},
        {"from": "gpt", "value": "<think>(a) answers it.</think> Therefore, Response (a) is better, and the "
                                 "preference strength is [[2]]."}]}]
    folder.mkdir(parents=True)
    write_json(folder / "dataset_info.json", {"judge_sft": {"file_name": "judge_sft.json", "formatting": "sharegpt"}})
    write_json(folder / "judge_sft.json", rows)
    return folder


def test_overlap_command_prints_rows_by_benchmark(tmp_path):
    data, prompt = _autoj_slice(tmp_path)
    pairs = [PreferencePair("clean", "t", [{"role": "user", "content": "Name a fruit that is yellow."}], "Banana.",
                            "Chair.", "a"),
             PreferencePair("copy", "t", [{"role": "user", "content": prompt.upper()}], "x", "y", "a")]
    write_jsonl(tmp_path / "train.jsonl", pairs)
    result = CliRunner().invoke(app, ["overlap", str(tmp_path / "train.jsonl"), "--against", f"autoj={data}",
                                      "--encoder", "none", "--report", str(tmp_path / "report.jsonl")])
    assert result.exit_code == 0, result.output
    assert "2 training rows checked" in result.output and "1 hold a benchmark item" in result.output
    assert f"| autoj | {data} | 3 | 1 | 1 | 0 | 0 | 1 |" in result.output
    report = [json.loads(line) for line in (tmp_path / "report.jsonl").read_text().splitlines()]
    assert [(m["row"], m["rule"], m["item"]) for m in report] == [("copy", "exact", "0")]
    assert not (tmp_path / "train.jsonl.contamination.jsonl").exists()  # look only


def test_llamafactory_rows_are_checked_by_their_strings(tmp_path):
    data, prompt = _autoj_slice(tmp_path)
    folder = _judge_sft_folder(tmp_path / "seed_set", prompt)
    rows = training_rows(folder)
    assert [r[0] for r in rows] == ["judge_sft.json:1"]  # dataset_info.json is metadata, not data
    assert set(rows[0][2]) == {"conversations.0.value", "conversations.1.value"}  # 'human' / 'gpt' are too short
    result = CliRunner().invoke(app, ["overlap", str(folder), "--against", f"autoj={data}", "--encoder", "none"])
    assert result.exit_code == 0 and f"| autoj | {data} | 3 | 1 | 0 | 1 | 0 | 1 |" in result.output, result.output


def test_a_models_training_data_is_followed_through_its_records(tmp_path, capsys):
    data, prompt = _autoj_slice(tmp_path)
    seed = _judge_sft_folder(tmp_path / "seed_set", prompt)
    sft = tmp_path / "train" / "judge_sft"
    sft.mkdir(parents=True)
    write_json(sft / "thinkj_train.json", {"kind": "sft", "planned": {"config": {"dataset_dir": str(seed),
                                                                                "model_name_or_path": "hub/base"}}})
    rl_pairs = tmp_path / "rl_pairs.jsonl"
    write_jsonl(rl_pairs, [PreferencePair("p", "t", [{"role": "user", "content": "Hi?"}], "a", "b", "a")])
    online = tmp_path / "train" / "online"
    (online / "hf").mkdir(parents=True)  # verl's merged model, in the run folder holding its launch record
    write_json(online / "thinkj_launch.json", {"launch": {"train_files": str(rl_pairs), "model": str(sft)}})
    assert recorded_training_data(online / "hf") == [rl_pairs, seed]
    assert warn_training_overlap(str(online / "hf"), "autoj", str(data)) == 1
    warning = capsys.readouterr().err
    assert f"was trained on {seed}, where 1 rows hold 1 autoj items (ngram 1)" in warning
    assert f"thinkj data overlap {seed} --against autoj={data}" in warning
    assert warn_training_overlap(str(sft), "rmbench", str(shared_data("rm-bench"))) == 0  # nothing of RM-Bench
    assert recorded_training_data(tmp_path / "nowhere") == [] and capsys.readouterr().err == ""


def test_eval_run_warns_when_the_model_was_trained_on_the_benchmark(tmp_path, tiny_model_dir):
    from thinkj.evaluation.cli import app as eval_app

    data, prompt = _autoj_slice(tmp_path, n=1)
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    seed = _judge_sft_folder(tmp_path / "seed_set", prompt)
    write_json(model / "thinkj_train.json", {"kind": "sft", "planned": {"config": {"dataset_dir": str(seed)}}})
    args = ["run", "autoj", "--model", str(model), "--data", str(data), "--max-new-tokens", "4", "--profile", "tiny"]
    result = CliRunner().invoke(eval_app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, (result.output, result.exception)
    assert f"warning: {model} was trained on {seed}, where 1 rows hold 1 autoj items" in result.stderr
    (model / "thinkj_train.json").unlink()
    clean = CliRunner().invoke(eval_app, [*args, "--out", str(tmp_path / "out2")])
    assert clean.exit_code == 0 and "was trained on" not in clean.stderr
