"""Inputs that used to be accepted silently: each is now one ``error: …`` line (exit 2) naming the file, row, field
or option, and leaves nothing behind. Results files for ``thinkj tables`` (fractions, non-numbers, unknown
benchmarks), SFT targets that contradict their label, judgment records that cannot be scored as their benchmark
defines, a demo stage that does not exist, and numeric options and LlamaFactory overrides out of range.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from thinkj.errors import exit_on_user_error, run_typer
from thinkj.prompts import judge_output
from thinkj.records import RecordError, write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

ROOT = Path(__file__).resolve().parent.parent


def _result(benchmark: str, metrics: dict, **extra) -> dict:
    return {"benchmark": benchmark, **extra, "metrics": {"complete": True, "missing": [], **metrics},
            "tags": {"model": "Think-J-Qwen-2.5-32B"}, "provenance": {"time": "2026-01-01T00:00:00Z"}}


def _judgments(benchmark: str, gold_swapped: str = "b", **fields) -> list[dict]:
    return [{"benchmark": benchmark, "item_id": "1", "order": "original", "gold": "a", "verdict": "a", **fields},
            {"benchmark": benchmark, "item_id": "1", "order": "swapped", "gold": gold_swapped, "verdict": "b", **fields}]


def _files(tmp: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}

    def doc(name: str, document: dict) -> None:
        files[name] = tmp / f"{name}.results.json"
        files[name].write_text(json.dumps(document))

    doc("fractions", _result("rmbench", {"overall": 0.83, "hard": 0.7, "normal": 0.8, "easy": 0.9}))
    doc("unit_fraction", _result("rmbench", {"overall": 83.0}, unit="fraction"))
    doc("not_a_number", _result("rmbench", {"overall": "n/a"}, unit="percent"))
    doc("a_list", _result("rmbench", {"overall": [83.0]}, unit="percent"))
    doc("a_boolean", _result("rmbench", {"overall": True}, unit="percent"))
    doc("unknown_bench", _result("rewardbnch", {"overall": 83.0}, unit="percent"))
    doc("pooled_text", _result("rewardbench", {"sections": {"Chat": "high", "Chat Hard": 50.0}, "overall": 60.0},
                               unit="percent"))
    doc("bad_interval", _result("synthetic", {"accuracy": 50.0, "accuracy_ci95": ["low", 60.0]}, unit="percent"))
    files["huge_int"] = tmp / "huge_int.results.json"
    files["huge_int"].write_text('{"benchmark": "rmbench", "metrics": {"overall": 1' + "0" * 5000 + "}}")

    pair = make_pairs(1, seed=0)[0]
    other = "b" if pair.label == "a" else "a"

    def clipped(name: str, target: str, strength: int = 2) -> None:
        files[name] = tmp / f"{name}.jsonl"
        write_jsonl(files[name], [{"pair": pair.to_dict(), "explanation": "x", "target": target, "verdict": pair.label,
                                   "strength": strength}])

    clipped("good_clipped", judge_output("x", pair.label, 2))
    clipped("contradicting", judge_output("x", other, 2))
    clipped("no_verdict", "<think>\nx\n</think>\nBoth have merits.")
    clipped("hedging", "<think>\nx\n</think>\nResponse (a) is better. Response (b) is better.")
    clipped("other_strength", judge_output("x", pair.label, 3), strength=2)
    clipped("strength_seven", judge_output("x", pair.label, 7), strength=7)

    def records(name: str, rows: list[dict]) -> None:
        files[name] = tmp / f"{name}.jsonl"
        write_jsonl(files[name], rows)

    records("unflipped", _judgments("synthetic", gold_swapped="a", subset="facts"))
    records("tie_flipped", _judgments("autoj", gold_swapped="tie", scenario="chitchat"))
    records("rb_no_subset", _judgments("rewardbench"))
    records("rb_empty_subset", _judgments("rewardbench", subset=""))
    records("autoj_no_scenario", _judgments("autoj"))
    records("jb_no_source", _judgments("judgebench", category="math", response_model="gpt-4o-2024-05-13"))
    records("jb_wrong_category", _judgments("judgebench", source="livebench-math", category="coding",
                                            response_model="gpt-4o-2024-05-13"))
    records("jb_no_model", _judgments("judgebench", source="livebench-math", category="math"))
    files["pairs"] = tmp / "pairs.jsonl"
    write_jsonl(files["pairs"], make_pairs(3, seed=0))
    files["outdir"] = tmp / "outdir"
    return files


# (case id, argv with {name} for _files, text the error line must hold)
CASES = [
    # thinkj tables: a results file is read as percentages 0-100 or refused
    ("tables: fractions without a unit", ["tables", "2", "--results", "{fractions}", "--out", "{outdir}"],
     "fractions.results.json, field 'unit': no unit and every metric the tables read is within 0-1"),
    ("tables: a declared unit other than percent", ["tables", "2", "--results", "{unit_fraction}", "--out", "{outdir}"],
     "unit_fraction.results.json, field 'unit': 'fraction' is not 'percent'"),
    ("tables: a metric that is text", ["tables", "2", "--results", "{not_a_number}", "--out", "{outdir}"],
     "not_a_number.results.json, field 'metrics.overall': must be a number, got 'n/a'"),
    ("tables: a metric that is a list", ["tables", "2", "--results", "{a_list}", "--out", "{outdir}"],
     "a_list.results.json, field 'metrics.overall': must be a number, got a list"),
    ("tables: a metric that is a boolean", ["tables", "2", "--results", "{a_boolean}", "--out", "{outdir}"],
     "a_boolean.results.json, field 'metrics.overall': must be a number"),
    ("tables: a derived cell's input that is text", ["tables", "5", "--results", "{pooled_text}", "--out", "{outdir}"],
     "pooled_text.results.json, field 'metrics.sections.Chat': must be a number, got 'high'"),
    ("tables: an unknown benchmark", ["tables", "2", "--results", "{unknown_bench}", "--out", "{outdir}"],
     "unknown_bench.results.json, field 'benchmark': unknown benchmark 'rewardbnch'"),
    ("tables: an interval bound that is text", ["tables", "demo", "--results", "{bad_interval}", "--out", "{outdir}"],
     "bad_interval.results.json, field 'metrics.accuracy interval': must be a number, got 'low'"),
    ("tables: an integer of 5,000 digits", ["tables", "2", "--results", "{huge_int}", "--out", "{outdir}"],
     "huge_int.results.json: not valid JSON"),
    # thinkj data seed-set: the SFT target says what the label says
    ("seed-set: target contradicts the label", ["data", "seed-set", "{contradicting}", "{outdir}"],
     "contradicting.jsonl, line 1, field 'target': the target's verdict"),
    ("seed-set: target states no verdict", ["data", "seed-set", "{no_verdict}", "{outdir}"],
     "no_verdict.jsonl, line 1, field 'target': the target states no verdict"),
    ("seed-set: target names both responses", ["data", "seed-set", "{hedging}", "{outdir}"],
     "hedging.jsonl, line 1, field 'target': the target states no verdict the parser reads (conflicting verdicts)"),
    ("seed-set: target strength is not the told one", ["data", "seed-set", "{other_strength}", "{outdir}"],
     "other_strength.jsonl, line 1, field 'strength': the target states strength 3 but the record's is 2"),
    ("seed-set: a strength outside 1-3", ["data", "seed-set", "{strength_seven}", "{outdir}"],
     "strength_seven.jsonl, line 1, field 'strength': must be an integer 1-3 or null, got 7"),
    ("seed-set: a critic as the judge template", ["data", "seed-set", "{good_clipped}", "{outdir}", "--template",
                                                 "critic_strength_v2"], "--template critic_strength_v2: a critic"),
    ("seed-set: a judge as the critic template", ["data", "seed-set", "{good_clipped}", "{outdir}", "--critic-template",
                                                 "judge_strength_v2"], "--critic-template judge_strength_v2: a judge"),
    # thinkj eval score: records that cannot be scored as their benchmark defines
    ("eval score: swapped gold not flipped", ["eval", "score", "synthetic", "{unflipped}"],
     "unflipped.jsonl, line 2, field 'gold': the swapped record of comparison"),
    ("eval score: a tie gold turned into another", ["eval", "score", "autoj", "{tie_flipped}"],
     "tie_flipped.jsonl, line 2, field 'gold'"),
    ("eval score: RewardBench record without subset", ["eval", "score", "rewardbench", "{rb_no_subset}"],
     "rb_no_subset.jsonl, line 1, field 'subset': missing"),
    ("eval score: RewardBench record with an empty subset", ["eval", "score", "rewardbench", "{rb_empty_subset}"],
     "rb_empty_subset.jsonl, line 1, field 'subset': must be a non-empty string"),
    ("eval score: Auto-J record without scenario", ["eval", "score", "autoj", "{autoj_no_scenario}"],
     "autoj_no_scenario.jsonl, line 1, field 'scenario': missing"),
    ("eval score: JudgeBench record without source", ["eval", "score", "judgebench", "{jb_no_source}"],
     "jb_no_source.jsonl, line 1, field 'source': missing"),
    ("eval score: JudgeBench category not its source's", ["eval", "score", "judgebench", "{jb_wrong_category}"],
     "jb_wrong_category.jsonl, line 1, field 'category': 'coding' is not the category of source 'livebench-math'"),
    ("eval score: JudgeBench record without response model", ["eval", "score", "judgebench", "{jb_no_model}"],
     "jb_no_model.jsonl, line 1, field 'response_model': missing"),
    # thinkj run: the learning and evaluation settings (pipeline.learn), refused before any stage
    ("run: an unknown LEARNING", ["run", "configs/recipes/tiny-cpu.yaml", "--dry-run", "--set", "learning=bothh"],
     "LEARNING='bothh': must be one of"),
    ("run: an unknown EVAL_ROWS row", ["run", "configs/recipes/tiny-cpu.yaml", "--dry-run", "--set",
                                       "eval_rows=base inti"], "EVAL_ROWS='inti': must be one of"),
    ("run: a row the run does not train", ["run", "configs/recipes/tiny-cpu.yaml", "--dry-run", "--set",
                                           "eval_rows=init offline"], "EVAL_ROWS names offline, which LEARNING=online"),
    ("run: PPO with TRL", ["run", "configs/recipes/tiny-cpu.yaml", "--dry-run", "--set", "rl_engine=trl", "--set",
                           "rl_algo=ppo"], "RL_ENGINE=trl: runs GRPO only"),
    ("run: wrong-side critic data without a task", ["run", "configs/recipes/qwen2.5-7b.yaml", "--dry-run", "--set",
                                                    "critic_wrong_side_every=2"],
     "CRITIC_WRONG_SIDE_EVERY=2: wrong-side critic examples are written by a generated task's rules"),
    ("run: a TRL override that is no key=value", ["run", "configs/recipes/tiny-cpu.yaml", "--dry-run", "--set",
                                                  "trl_overrides=lr"], "TRL_OVERRIDES 'lr': expected key=value"),
    # thinkj train: pair builders' numbers
    ("critic-pairs --critic-samples 0", ["train", "critic-pairs", "--pairs", "{pairs}", "--judge", "j", "--critic", "c",
                                        "--out", "{outdir}", "--critic-samples", "0"], "--critic-samples must be >= 1"),
    ("critic-pairs negative temperature", ["train", "critic-pairs", "--pairs", "{pairs}", "--judge", "j", "--critic",
                                           "c", "--out", "{outdir}", "--critic-temperature", "-1"],
     "--critic-temperature must be >= 0"),
    ("critic-pairs --limit 0", ["train", "critic-pairs", "--pairs", "{pairs}", "--judge", "j", "--critic", "c", "--out",
                                "{outdir}", "--limit", "0"], "--limit must be >= 1"),
    ("sampling-pairs -n 1", ["train", "sampling-pairs", "--pairs", "{pairs}", "--judge", "j", "--out", "{outdir}",
                             "-n", "1"], "-n must be >= 2"),
    ("sampling-pairs greedy", ["train", "sampling-pairs", "--pairs", "{pairs}", "--judge", "j", "--out", "{outdir}",
                               "--temperature", "0"], "--temperature must be > 0"),
    ("baseline-data -n 0", ["train", "baseline-data", "--pairs", "{pairs}", "--out", "{outdir}", "-n", "0"],
     "-n must be >= 1"),
    ("offline --iterations 0", ["train", "offline", "--pairs", "{pairs}", "--judge", "j", "--critic", "c", "--run-dir",
                                "{outdir}", "--iterations", "0"], "--iterations must be >= 1"),
]

# LlamaFactory overrides (each case imports LlamaFactory to know its arguments: a few seconds, so kept few)
LLAMAFACTORY_CASES = [
    ("sft negative learning rate", ["train", "sft", "judge_sft", "--model", "tiny", "learning_rate=-1e-6", "--run-dir",
                                    "{outdir}", "--dry-run"], "learning_rate=-1e-06 (from overrides): must be > 0"),
    ("dpo negative SFT weight", ["train", "dpo", "dpo", "--model", "tiny", "pref_ftx=-1", "--run-dir",
                                 "{outdir}", "--dry-run"], "pref_ftx=-1 (from overrides): must be >= 0"),
    ("rm zero steps", ["train", "rm", "bt_rm", "--model", "tiny", "max_steps=0", "--run-dir", "{outdir}", "--dry-run"],
     "max_steps=0 (from overrides): must be >= 1 (or -1"),
    ("sft a boolean written no", ["train", "sft", "judge_sft", "--model", "tiny", "bf16=no", "--run-dir", "{outdir}",
                                  "--dry-run"], "bf16='no' (from overrides): must be true or false"),
    ("offline DPO override checked before any pair", ["train", "offline", "--pairs", "{pairs}", "--judge", "j",
                                                      "--critic", "c", "--run-dir", "{outdir}", "learning_rate=0"],
     "learning_rate=0 (from overrides): must be > 0"),
]


def _run(argv: list[str], tmp_path: Path, monkeypatch, capsys) -> tuple[int, list[str], dict[str, Path]]:
    from thinkj.cli import _register_subcommands, app

    if not any(g.name == "train" for g in app.registered_groups):
        _register_subcommands()
    files = _files(tmp_path)
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("THINKJ_TRACEBACK", raising=False)
    monkeypatch.setattr(sys, "argv", ["thinkj", *[a.format(**{k: str(v) for k, v in files.items()}) for a in argv]])
    with pytest.raises(SystemExit) as stop:
        exit_on_user_error(lambda: run_typer(app))
    return stop.value.code, capsys.readouterr().err.strip().splitlines(), files


@pytest.mark.parametrize("case", CASES + LLAMAFACTORY_CASES, ids=[c[0] for c in CASES + LLAMAFACTORY_CASES])
def test_refused_in_one_line_naming_what(case, tmp_path, monkeypatch, capsys):
    _, argv, expected = case
    code, lines, files = _run(argv, tmp_path, monkeypatch, capsys)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert expected in lines[0], lines[0]
    assert not files["outdir"].exists()


# ----------------------------------------------------------------------------------- what is still read or scored

def test_percentages_old_files_and_zeros_are_read(tmp_path):
    from thinkj.tables import render_table
    from thinkj.tables.results import collect_results

    (tmp_path / "old.json").write_text(json.dumps(_result("rmbench", {"overall": 77.7})))  # before "unit": read
    (tmp_path / "small.json").write_text(json.dumps(_result("autoj", {"agreement": 0.5}, unit="percent")))
    (tmp_path / "zero.json").write_text(json.dumps({**_result("rewardbench", {
        "sections": {"Chat": 0, "Chat Hard": 0, "Safety": 0, "Reasoning": 0}, "overall": 0})}))
    (tmp_path / "empty.json").write_text(json.dumps(_result("rmbench", {"overall": None}, unit="percent")))
    md = render_table(2, collect_results([tmp_path])).markdown
    assert "77.7 / " in md and "0.5 / " in md and "0.0 / " in md
    assert "empty.json (rmbench) fills no cell" in md  # null: an empty cell, listed like any result that fills none


def test_results_documents_declare_their_unit(tmp_path):
    from thinkj.evaluation.run import EvalConfig, results_document

    records = [{**r, "subset": "facts"} for r in _judgments("synthetic")]
    document = results_document(EvalConfig(benchmark="synthetic", model="m"), records, None)
    assert document["unit"] == "percent" and document["metrics"]["accuracy"] == 100.0


def test_every_scorer_checks_flipped_gold_even_when_called_alone():
    from thinkj.evaluation.judgebench import score_judgebench
    from thinkj.evaluation.metrics import score_autoj, score_rewardbench

    rows = _judgments("x", gold_swapped="a", subset="alpacaeval-easy", scenario="chitchat", source="livebench-math",
                      category="math", response_model="gpt-4o-2024-05-13")
    for scorer in (score_rewardbench, score_autoj, score_judgebench):
        with pytest.raises(RecordError, match="field 'gold'"):
            scorer(rows)
    good = _judgments("x", subset="alpacaeval-easy")
    assert score_rewardbench(good)["subsets"] == {"alpacaeval-easy": 100.0}


def test_a_good_seed_set_is_still_written(tmp_path):
    from thinkj.data.seed_set import run_seed_set

    files = _files(tmp_path)
    summary = run_seed_set(files["good_clipped"], files["outdir"])
    assert summary["n_out"] == 1 and (files["outdir"] / "rl.parquet").exists()


def test_llamafactory_values_in_range_pass_and_whole_floats_become_integers():
    from thinkj.train.config import ConfigError, build_config

    cfg = build_config("dpo", "tiny", ["learning_rate=5e-7", "max_steps=-1"])
    assert cfg["max_steps"] == -1 and cfg["learning_rate"] == 5e-7
    assert build_config("dpo", "tiny", ["max_steps=1e3"])["max_steps"] == 1000
    with pytest.raises(ConfigError, match=r"max_steps=2\.5 \(from overrides\): must be an integer"):
        build_config("dpo", "tiny", ["max_steps=2.5"])
    with pytest.raises(ConfigError, match=r"num_train_epochs=inf \(from overrides\): must be a finite number"):
        build_config("dpo", "tiny", ["num_train_epochs=1e999"])
