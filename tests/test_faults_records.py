"""Contradictory records, corrupt binary inputs, dry runs and settings that used to pass without a word (issue 42).

Each case goes through the real entry point (``thinkj …`` under ``exit_on_user_error``, what ``main`` runs) and must
end in one ``error: …`` line naming the file, row and field (exit 2), or -- for what public data really holds and a
stage can still use -- run on with one ``warning:`` line naming them. The rule table is in docs/runs.md ("Record
rules"). Every case here failed before its fix: it was accepted (exit 0, no word), or ended in a pyarrow traceback.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from thinkj.errors import exit_on_user_error, run_typer
from thinkj.records import RecordError, write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

ROOT = Path(__file__).resolve().parent.parent


def _pair(**change) -> dict:
    row = make_pairs(1, seed=0)[0].to_dict()
    row.update(change)
    return {k: v for k, v in row.items() if v is not _DROP}


_DROP = object()


def _rl_rows(**change) -> list[dict]:
    from thinkj.export.verl import verl_rows

    rows, _ = verl_rows(make_pairs(4, seed=0))
    for key, value in change.items():  # "reward_model.ground_truth.strength" -> the nested field of row 2
        target = rows[1]
        *parents, last = key.split(".")
        for name in parents:
            target = target[name] if not name.isdigit() else target[int(name)]
        target[int(last) if last.isdigit() else last] = value
    return rows


def _parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _files(tmp: Path) -> dict[str, Path]:
    """Pairs with one contradiction each, RL parquets with one bad row each, and damaged binary files."""
    files: dict[str, Path] = {"out": tmp / "out" / "rl.parquet", "outdir": tmp / "outdir"}
    pairs = {
        "tie_strength": _pair(label="tie", strength=3),
        "winner_zero": _pair(label="a", strength=0),
        "meta_list": _pair(meta=[]),
        "meta_text": _pair(meta="x"),
        "typo": {**_pair(strength=_DROP), "strenght": 2},
        "identical": _pair(response_b=_pair()["response_a"]),
    }
    for name, row in pairs.items():
        files[name] = tmp / f"{name}.jsonl"
        files[name].write_text(json.dumps(row) + "\n")
    rl = {
        "rl_strength7": _rl_rows(**{"reward_model.ground_truth.strength": 7}),
        "rl_role_bot": _rl_rows(**{"prompt.0.role": "bot"}),
        "rl_null_content": _rl_rows(**{"prompt.0.content": None}),
        "rl_label": _rl_rows(**{"reward_model.ground_truth.label": "c"}),
    }
    for name, rows in rl.items():
        files[name] = _parquet(tmp / f"{name}.parquet", rows)
    good = _parquet(tmp / "good.parquet", _rl_rows())
    files["good"] = good
    files["text_parquet"] = tmp / "text.parquet"
    files["text_parquet"].write_text("prompt,label\nhello,a\n")
    files["empty_parquet"] = tmp / "empty.parquet"
    files["empty_parquet"].write_bytes(b"")
    files["cut_parquet"] = tmp / "cut.parquet"
    files["cut_parquet"].write_bytes(good.read_bytes()[:300])
    files["missing_parquet"] = tmp / "missing.parquet"
    return files


def _run(argv: list[str], monkeypatch, capsys) -> tuple[int, list[str]]:
    from thinkj.cli import _register_subcommands, app

    if not any(g.name == "train" for g in app.registered_groups):
        _register_subcommands()
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("THINKJ_TRACEBACK", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(sys, "argv", ["thinkj", *argv])
    try:
        exit_on_user_error(lambda: run_typer(app))
        code = 0
    except SystemExit as stop:
        code = stop.code or 0
    return code, capsys.readouterr().err.strip().splitlines()


def _fill(files: dict[str, Path], argv: list[str]) -> list[str]:
    return [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]


SFT_DRY = ["train", "sft", "judge_sft", "--model", "tiny", "--device", "cpu", "--dry-run", "--run-dir", "{outdir}"]
VERL_DRY = ["train", "rl", "--engine", "verl", "--model", "m", "--out", "{outdir}", "--dry-run", "--data"]

# (case id, argv, text the one error line must hold)
ERRORS = [
    # contradictions in a PreferencePair (every reader goes through PreferencePair.from_dict)
    ("tie with a strength", ["data", "verl-parquet", "{tie_strength}", "{out}"],
     "tie_strength.jsonl, line 1, field 'strength': is 3, but the label is 'tie'"),
    ("winner with strength 0", ["data", "verl-parquet", "{winner_zero}", "{out}"],
     "winner_zero.jsonl, line 1, field 'strength': is 0 (no difference), but the label is"),
    ("meta a list", ["data", "verl-parquet", "{meta_list}", "{out}"],
     "meta_list.jsonl, line 1, field 'meta': must be an object (or null), got list"),
    ("meta a string", ["data", "verl-parquet", "{meta_text}", "{out}"], "meta_text.jsonl, line 1, field 'meta'"),
    ("unknown field, close to a known one", ["data", "verl-parquet", "{typo}", "{out}"],
     "typo.jsonl, line 1, field 'strenght': unknown field (did you mean 'strength'?)"),
    # RL parquet rows, checked by the verl dry run as by the real launch
    ("RL strength 7", [*VERL_DRY, "{rl_strength7}"],
     "rl_strength7.parquet, line 2, field 'reward_model.ground_truth.strength': must be a whole number 1-3 or null"),
    ("RL role bot", [*VERL_DRY, "{rl_role_bot}"], "rl_role_bot.parquet, line 2, field 'prompt[0].role'"),
    ("RL null content", [*VERL_DRY, "{rl_null_content}"],
     "rl_null_content.parquet, line 2, field 'prompt[0].content': content must be text"),
    ("RL label c", [*VERL_DRY, "{rl_label}"], "rl_label.parquet, line 2, field 'reward_model.ground_truth.label'"),
    # binary inputs: one reader, one line naming the file
    ("verl dry run, missing data", [*VERL_DRY, "{missing_parquet}"], "missing.parquet: --data does not exist"),
    ("verl dry run, text file", [*VERL_DRY, "{text_parquet}"], "text.parquet: not a readable parquet file"),
    ("verl dry run, zero bytes", [*VERL_DRY, "{empty_parquet}"], "empty.parquet: not a readable parquet file"),
    ("verl dry run, truncated", [*VERL_DRY, "{cut_parquet}"], "cut.parquet: not a readable parquet file"),
    # a LlamaFactory dry run: the same checks as the real run before its first step (imports LlamaFactory: seconds)
    ("sft dry run, a chat template LlamaFactory lacks", [*SFT_DRY, "template=qwen_x"],
     "template='qwen_x' (from overrides): not a chat template of this LlamaFactory (did you mean qwen"),
    ("sft dry run, a model folder that does not exist", [*SFT_DRY, "model_name_or_path={outdir}/no/model"],
     "no/model: model_name_or_path folder does not exist"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_contradiction_or_corrupt_input_is_one_line(case, tmp_path, monkeypatch, capsys):
    _, argv, expected = case
    files = _files(tmp_path)
    code, lines = _run(_fill(files, argv), monkeypatch, capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    assert expected in lines[0], lines[0]
    # nothing written (`thinkj train` makes its --run-dir before it reads the config: an empty folder at most)
    assert not files["out"].exists() and not (files["outdir"].exists() and any(files["outdir"].iterdir()))


def test_identical_responses_with_a_winner_are_kept_with_a_warning(tmp_path, monkeypatch, capsys):
    """Public sets (HH-RLHF) hold such rows; the judge cannot learn from them, so the row is named, not dropped."""
    files = _files(tmp_path)
    code, lines = _run(_fill(files, ["data", "verl-parquet", "{identical}", "{out}"]), monkeypatch, capsys)
    assert code == 0, lines
    warnings = [line for line in lines if line.startswith("warning: ") and "identical.jsonl, line" in line]
    assert len(warnings) == 1 and "identical.jsonl, line 1, field 'response_b': response_a and response_b are the " \
                                   "same text, yet the label is" in warnings[0], lines
    assert files["out"].exists()


@pytest.mark.parametrize("name", ["text_parquet", "empty_parquet", "cut_parquet", "rl_strength7", "rl_role_bot",
                                  "rl_null_content"])
def test_trl_rows_from_a_bad_parquet_are_one_record_error(name, tmp_path):
    """TRL GRPO reads the same parquet through the same reader and row check as the verl launch."""
    from thinkj.online.trl_grpo import load_rl_rows

    files = _files(tmp_path)
    with pytest.raises(RecordError, match=rf"^{files[name]}"):
        load_rl_rows(files[name])
    rows, skipped = load_rl_rows(files["good"])
    assert len(rows) == 4 and skipped == {"tie": 0} and all(r["strength"] in (1, 2, 3, None) for r in rows)


@pytest.mark.parametrize("value", ["yes", 1, "false"])
def test_judgment_flag_that_is_not_a_boolean_is_refused(value, tmp_path):
    from thinkj.evaluation.judgment_records import load_records

    path = tmp_path / "judgments.jsonl"
    rows = [{"item_id": "1", "order": order, "gold": gold, "verdict": None, "too_long": value}
            for order, gold in (("original", "a"), ("swapped", "b"))]
    write_jsonl(path, rows)
    with pytest.raises(RecordError, match=rf"^{path}, line 1, field 'too_long': must be true, false or null"):
        load_records(path)


# --------------------------------------------------------------------------------------------- settings

SETTINGS = [
    ("eval --context-length 0", ["eval", "run", "rewardbench", "--model", "m", "--context-length", "0", "--out",
                                 "{outdir}"], "--context-length must be >= 1"),
    ("teacher-serve unknown task", ["data", "teacher-serve", "--task", "chess", "--port", "0"],
     "unknown demo task 'chess'; registered: constraints, facts, fruit"),
    ("traces with a critic template", ["data", "traces", "{identical}", "{out}", "--base-url", "http://127.0.0.1:9/v1",
                                       "--api-key-env", "", "--template", "critic_strength_v2"],
     "--template critic_strength_v2: a critic template; this command needs a judge template"),
]


@pytest.mark.parametrize("case", SETTINGS, ids=[c[0] for c in SETTINGS])
def test_bad_setting_is_one_line(case, tmp_path, monkeypatch, capsys):
    _, argv, expected = case
    files = _files(tmp_path)
    code, lines = _run(_fill(files, argv), monkeypatch, capsys)
    assert code == 2 and len(lines) == 1 and expected in lines[0], lines
    assert not files["outdir"].exists() and not files["out"].exists()


def test_pipeline_settings_are_read_without_spaces_and_named_once():
    from thinkj.errors import ThinkJError
    from thinkj.pipeline.learn import online_folder
    from thinkj.pipeline.plan import validate
    from thinkj.pipeline.settings import env_settings

    s = env_settings({"W_STR": " 0.5", "RUN_DIR": "runs/x"})
    validate(s)
    assert s["W_STR"] == "0.5" and online_folder(s) == "online_grpo_thinkj_qwen_w_str0.5"
    with pytest.raises(ThinkJError, match=r"^BENCHMARKS='rewardbench rewardbench': rewardbench named more than once"):
        validate(env_settings({"BENCHMARKS": "rewardbench rewardbench", "RUN_DIR": "runs/x"}))


def test_sweep_done_without_its_results_runs_its_steps_again(tmp_path, monkeypatch, capsys):
    """A done marker whose results JSON was deleted is not done: the run's steps run again (it used to be stuck at
    'steps finished but results are missing' for ever)."""
    writer = tmp_path / "mk.py"
    writer.write_text("import json, sys\nopen(sys.argv[1], 'w').write(json.dumps({'metrics': {}}))\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: st\ngrid: {{v: [1]}}\nsteps: ['{sys.executable} {writer} {{run_dir}}/r.results.json']\n"
                    "results: '{run_dir}/r.results.json'\n")
    sweep_dir = tmp_path / "sw"
    from thinkj.sweep.runner import run_sweep
    from thinkj.sweep.sweep_file import load_spec

    loaded = load_spec(spec)
    first = run_sweep(loaded, sweep_dir, out=sys.stderr)
    (result,) = sweep_dir.glob("runs/*/r.results.json")
    assert first["failed"] == [] and result.exists()
    result.unlink()
    second = run_sweep(loaded, sweep_dir, out=sys.stderr)
    assert second["failed"] == [] and second["launched"] and result.exists()
    assert "its steps finished, but" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- the teacher cache key

def test_teacher_cache_keys_on_the_endpoint(tmp_path):
    """Two servers under one served model name answer differently: the second is asked, never served the first's
    answers from the cache (it used to be: exit 0 with the old server's verdicts)."""
    from thinkj.inference import SamplingParams, make_backend
    from thinkj.inference.cache import CachedBackend, ResultCache
    from thinkj.prompts import get_template
    from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer

    convs = [get_template("judge_strength_v2").render(p) for p in make_pairs(3, seed=0)]
    cache = ResultCache(tmp_path / "cache.sqlite")
    answers = {}
    for side in ("a", "b"):
        with TeacherServer(TeacherConfig(always=side, error_rate=0.0)) as server:
            backend = make_backend("openai", "r1-scripted", base_url=server.base_url, api_key_env=None,
                                   progress=False)
            texts = CachedBackend(backend, cache, tag="t").generate(convs, SamplingParams(max_new_tokens=64))
            answers[side] = ([t for row in texts for t in row], sum(server.counts()["requests"].values()))
    assert answers["b"][1] == len(convs)  # asked again, not answered from the first server's rows
    assert answers["a"][0] != answers["b"][0]


# --------------------------------------------------------------------------------------------- rewards' bad gold

def _trainer() -> SimpleNamespace:
    from collections import defaultdict

    return SimpleNamespace(_metrics={"train": defaultdict(list), "eval": defaultdict(list)},
                           model=SimpleNamespace(training=True))


@pytest.mark.parametrize("preset, gold", [("competition", float("nan")), ("multi_objective", [float("nan"), 2]),
                                          ("xml_judge", None)])
def test_trl_preset_adapter_counts_bad_gold_in_the_step_metrics(preset, gold):
    from thinkj.rewards.adapters.trl import TRLPresetReward

    reward, trainer = TRLPresetReward(preset), _trainer()
    reward.bind_trainer(trainer)
    scores = reward(completions=["some answer", "another"], ground_truth=[gold, gold])
    assert all(math.isfinite(s) for s in scores)
    assert reward.last_metrics["gold_error"] == 1.0 and trainer._metrics["train"]["gold_error"] == [1.0]


def test_trl_judge_adapters_count_bad_gold_in_the_step_metrics():
    from thinkj.online.trl_grpo import RecordingReward
    from thinkj.rewards.adapters.trl import TRLReward

    text = "<think>x</think>Therefore, Response (a) is better, and the preference strength is [[2]]."
    for reward in (TRLReward("thinkj_qwen"), RecordingReward("thinkj_qwen")):
        trainer = _trainer()
        reward.bind_trainer(trainer)
        reward(completions=[text, text], label=["a", "a"], strength=[float("inf"), 2])
        assert trainer._metrics["train"]["gold_error"] == [0.5], type(reward).__name__
