"""Teacher traces -> clip -> seed set -> Table 1, end to end over HTTP with the scripted teacher."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from thinkj.data.cli import app
from thinkj.data.clip import explanation_of, run_clip
from thinkj.data.seed_set import CRITIC_DATASET, JUDGE_DATASET, run_seed_set
from thinkj.data.table1 import render_table1, table1_counts
from thinkj.data.traces import run_traces
from thinkj.prompts import get_template, verdict_sentence
from thinkj.records import RecordError, load_pairs, read_jsonl, write_jsonl
from thinkj.synthetic.fruit_task import explain, make_pairs
from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer, parse_prompt
from thinkj.verdict_parser import parse_verdict

ROOT = Path(__file__).resolve().parent.parent


def test_teacher_reads_the_pair_back_from_the_prompt():
    for pair in make_pairs(12, 3) + make_pairs(12, 4, asked=("animal", "tool")):
        text = get_template("judge_strength_v2").render(pair)[0]["content"]
        back = parse_prompt(text)
        assert (back.instruction, back.response_a, back.response_b) == (pair.instruction, pair.response_a, pair.response_b)
        assert explain(back) == explain(pair)
    assert parse_prompt("What is 2 + 2?") is None


@pytest.mark.parametrize("content, expected", [
    ("The user asks X.\n\nTherefore, Response (a) is better, and the preference strength is [[2]].", "The user asks X."),
    ("**Explanation:**\nB is wrong. A is right. **Therefore, Response (a) is better**, strength [[3]].",
     "B is wrong. A is right."),
    ("Therefore, Response (b) is better, and the preference strength is [[1]].", ""),
    ("Response (a) is accurate.\nResponse (b) is better.", "Response (a) is accurate."),
])
def test_explanation_is_the_content_before_the_verdict(content, expected):
    assert explanation_of(content) == expected


def test_stages_end_to_end(tmp_path, tiny_model_dir):
    pairs = make_pairs(50, 11)
    write_jsonl(tmp_path / "pairs.jsonl", pairs)
    traces = tmp_path / "traces" / "traces.jsonl"
    with TeacherServer(TeacherConfig(error_rate=0.2, empty_explanation_rate=0.15, seed=2)) as server:
        summary = run_traces(tmp_path / "pairs.jsonl", traces, model=server.model, base_url=server.base_url, api_key_env=None,
                             progress=False)
        assert summary["wrong"] > 0 and summary["n_out"] + summary["wrong"] + summary["unparsable"] == 50
        assert summary["calls"]["completed"] == 50
        again = run_traces(tmp_path / "pairs.jsonl", traces, model=server.model, base_url=server.base_url, api_key_env=None,
                           progress=False)
        assert again["calls"] == {"cached": 50, "completed": 0, "failures": 0, "requests": 0, "retries": 0}
        assert sum(server.counts()["answered"].values()) == 50
    rows = [row for _, row in read_jsonl(traces)]
    gold = {p.id: p for p in pairs}
    assert all(r["verdict"] == r["pair"]["label"] == gold[r["pair"]["id"]].label for r in rows)
    assert all(r["pair"]["strength"] == gold[r["pair"]["id"]].strength for r in rows)  # the gold strength is kept apart
    assert all(len(r["reasoning"].split()) > 100 for r in rows)

    clipped = tmp_path / "clip" / "clipped.jsonl"
    clip = run_clip(traces, clipped, tokenizer=str(tiny_model_dir))
    assert clip["dropped_empty_explanation"] > 0 and clip["n_out"] == clip["n_in"] - clip["dropped_empty_explanation"]
    assert clip["length_after"]["mean"] < clip["length_before"]["mean"] / 5
    assert clip["length_unit"] == str(tiny_model_dir)
    for _, row in read_jsonl(clipped):
        verdict = parse_verdict(row["target"], get_template("judge_strength_v2").answer, strict=True)
        assert verdict.well_formed and verdict.choice == row["pair"]["label"] and verdict.strength == row["strength"]
        assert row["explanation"] in row["target"] and "Okay" not in row["target"]
        assert row["target"].endswith(verdict_sentence(row["verdict"], row["strength"]))
    words = run_clip(traces, tmp_path / "clip_words" / "clipped.jsonl")
    assert words["length_unit"] == "whitespace words" and words["n_out"] == clip["n_out"]

    seed = run_seed_set(clipped, tmp_path / "seed_set")
    info = json.loads((tmp_path / "seed_set" / "dataset_info.json").read_text())
    assert set(info) == {JUDGE_DATASET, CRITIC_DATASET}
    judge_rows = json.loads((tmp_path / "seed_set" / f"{JUDGE_DATASET}.json").read_text())
    critic_rows = json.loads((tmp_path / "seed_set" / f"{CRITIC_DATASET}.json").read_text())
    assert len(judge_rows) == len(critic_rows) == clip["n_out"] == seed["datasets"][JUDGE_DATASET]
    assert "You are told that Response" in critic_rows[0]["messages"][0]["content"]
    assert "You are told" not in judge_rows[0]["messages"][0]["content"]
    assert judge_rows[0]["messages"][-1]["content"] == critic_rows[0]["messages"][-1]["content"]
    table = pq.read_table(tmp_path / "seed_set" / "rl.parquet").to_pylist()
    rl_pairs = load_pairs(tmp_path / "seed_set" / "rl_pairs.jsonl")
    assert len(table) == len(rl_pairs) == clip["n_out"]
    assert table[0]["reward_model"]["ground_truth"]["label"] == rl_pairs[0].label

    # Table 1 from the summaries, with upstream stages' summaries beside ours.
    (tmp_path / "difficulty").mkdir()
    (tmp_path / "difficulty" / "kept.summary.json").write_text(json.dumps({"stage": "difficulty", "n_in": 500, "n_out": 80}))
    (tmp_path / "dedup").mkdir()
    (tmp_path / "dedup" / "kept.summary.json").write_text(json.dumps({"stage": "dedup", "n_in": 80, "n_out": 50}))
    counts = [ours for _, ours, _ in table1_counts(tmp_path)]
    assert counts == [500, 80, 50, None, summary["n_out"], clip["n_out"]]  # None: no decontamination stage here
    markdown = render_table1(tmp_path)
    assert f"| - filtered by accuracy | {summary['n_out']} | 707 |" in markdown and "paper" in markdown.splitlines()[0]
    result = CliRunner().invoke(app, ["table1", str(tmp_path), "--initial", "10000"])
    assert result.exit_code == 0 and "| - initially selected | 10000 | 10K |" in result.output


def test_bad_trace_rows_name_file_line_and_field(tmp_path):
    pair = make_pairs(1, 0)[0]
    bad = tmp_path / "traces.jsonl"
    write_jsonl(bad, [{"pair": pair.to_dict(), "reasoning": "r", "content": "c", "verdict": "a", "strength": 2},
                      {"pair": pair.to_dict(), "reasoning": "r", "content": 7, "verdict": "a"}])
    with pytest.raises(RecordError) as err:
        run_clip(bad, tmp_path / "out.jsonl")
    assert "traces.jsonl" in str(err.value) and "2" in str(err.value) and "content" in str(err.value)
    write_jsonl(bad, [{"reasoning": "r", "content": "c", "verdict": "a"}])
    with pytest.raises(RecordError, match="pair"):
        run_clip(bad, tmp_path / "out.jsonl")
    unfiltered = tmp_path / "clipped.jsonl"
    wrong = "b" if pair.label == "a" else "a"
    write_jsonl(unfiltered, [{"pair": pair.to_dict(), "explanation": "e", "target": "<think>\ne\n</think>\nx",
                              "verdict": wrong, "strength": 2}])
    with pytest.raises(RecordError, match="verdict"):
        run_seed_set(unfiltered, tmp_path / "seed")


def test_data_prep_entry_point_runs(tmp_path):
    pair = make_pairs(2, 0)
    content = f"{explain(pair[0])}\n\n{verdict_sentence(pair[0].label, 2)}"
    write_jsonl(tmp_path / "traces.jsonl", [{"pair": pair[0].to_dict(), "reasoning": "long " * 50, "content": content,
                                             "verdict": pair[0].label, "strength": 2}])
    proc = subprocess.run([sys.executable, "-m", "data_prep.clip", str(tmp_path / "traces.jsonl"), str(tmp_path / "c.jsonl")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["n_out"] == 1
