"""Recipe sweeps: each run ``thinkj run RECIPE --set field=value ...``, its fields checked against the run's settings
when the spec is read, its results and tags the pipeline's; and the tiny 2 x 2 reward sweep run for real on CPU.

Broken on purpose once: with :func:`thinkj.sweep.recipe_runs.check_fields` returning at once, the unknown-field
cases failed (the spec was read, and the bad name would only have failed at launch); with ``set_items`` leaving out
the grid's fields, the dry-run expansion test failed (every run the recipe's default).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from thinkj.errors import ThinkJError
from thinkj.records import RecordError
from thinkj.sweep import expand, load_spec, run_sweep
from thinkj.sweep.sweep_file import parse_overrides

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"


def _dry_run(spec: Path, *sets: str) -> list[str]:
    """The commands the print launcher (`thinkj sweep SPEC --dry-run`) prints: the lines that are not `# run <name>`."""
    out = io.StringIO()
    run_sweep(load_spec(spec, parse_overrides(list(sets))), Path("/s"), "print", out=out)
    return [line for line in out.getvalue().splitlines() if line and not line.startswith("#")]


def test_table8_dry_run_is_one_thinkj_run_per_cell():
    expected = [f"thinkj run configs/recipes/{model}.yaml --set benchmarks=rewardbench --set tables=8 "
                f"--set w_fmt={fmt} --set w_str={strength}"
                for model in ("qwen2.5-32b", "llama3-8b") for fmt in ("1.0", "0.5", "0.0")
                for strength in ("0.5", "0.2", "0.0")]
    assert _dry_run(EXPERIMENTS / "table8.yaml") == expected
    assert _dry_run(EXPERIMENTS / "table8.yaml", "w_str=[0.0]", "eval_limit=50") == [
        c.replace("--set tables=8", "--set tables=8 --set eval_limit=50") for c in expected if c.endswith("w_str=0.0")]


def test_thinkj_sweep_dry_run_prints_the_commands(tmp_path):
    thinkj = Path(sys.executable).parent / "thinkj"
    proc = subprocess.run([str(thinkj), "sweep", "experiments/tiny_table8.yaml", "--dry-run", "--sweep-dir",
                           str(tmp_path / "sw")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": f"{thinkj.parent}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    common = ("thinkj run configs/recipes/tiny-cpu.yaml --set run_dir=runs/cpu/tiny_table8 --set rl_engine=trl "
              "--set in_process=true --set tables=rehearsal")
    assert [line for line in proc.stdout.splitlines() if not line.startswith("#")] == [
        f"{common} --set w_fmt={fmt} --set w_str={strength}" for fmt in ("1.0", "0.0") for strength in ("0.2", "0.0")]
    assert not (tmp_path / "sw").exists()  # nothing run, nothing recorded


def test_table4_dry_run_runs_the_pipeline_rows_per_model():
    head = "thinkj run configs/recipes/{}.yaml --set benchmarks=rewardbench --set tables=4 --set learning="
    expected = [head.format(model) + row for row in ("offline", "online --set rl_algo=ppo",
                                                     "online --set rl_algo=reinforce_pp", "online --set rl_algo=grpo")
                for model in ("llama3-8b", "qwen2.5-7b")]
    assert _dry_run(EXPERIMENTS / "table4.yaml") == expected


def test_runs_know_their_results_and_tags_from_the_pipeline_plan():
    runs = {r.name.rsplit("-", 1)[0]: r for r in expand(load_spec(EXPERIMENTS / "table8.yaml"), Path("/s"))}
    run = runs["recipe=llama3-8b_w_fmt=0.5_w_str=0.0"]
    assert [str(p) for p in run.results] == [
        "runs/llama-3-8b-instruct/eval/online_grpo_thinkj_llama_w_fmt0.5_w_str0.0_hf/rewardbench/rewardbench.results.json"]
    assert run.tags == {"model": "Llama-3-8B-Instruct", "train_data": "Skywork", "w_fmt": "0.5", "w_str": "0.0",
                        "method": "online (GRPO)"}
    # the sweep's own folder keeps the run's logs and done marker; its outputs go to the recipe's run folder
    assert run.run_dir == Path("/s/runs") / run.name
    table4 = {r.name.rsplit("-", 1)[0]: r for r in expand(load_spec(EXPERIMENTS / "table4.yaml"), Path("/s"))}
    offline = table4["recipe=qwen2.5-7b_learning=offline_rl_algo=None"]
    assert offline.tags["method"] == "offline (Critic-guided)" and offline.tags["iteration"] == "1"
    assert table4["recipe=qwen2.5-7b_learning=online_rl_algo=reinforce-pp"].tags["method"] == "online (Reinforce++)"


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(body))
    return path


BAD = [
    ("unknown grid field", "recipe: configs/recipes/tiny-cpu.yaml\ngrid: {w_sttr: [0.5]}\n", "grid.w_sttr",
     "w_sttr: not a setting of the run (did you mean w_str?)"),
    ("unknown setting", "recipe: configs/recipes/tiny-cpu.yaml\nsettings: {benchmark: [synthetic]}\n",
     "settings.benchmark", "did you mean benchmarks?"),
    ("unknown field of a grid value", "grid: {model: [{recipe: configs/recipes/tiny-cpu.yaml, modle_name: x}]}\n",
     "grid.model.modle_name", "did you mean model_name?"),
    ("unknown field of a run", "recipe: configs/recipes/tiny-cpu.yaml\nruns: [{rl_algoo: ppo}]\n", "runs[0].rl_algoo",
     "did you mean rl_algo?"),
    ("value of the wrong kind", "recipe: configs/recipes/tiny-cpu.yaml\nsettings: {eval_limit: many}\n",
     "settings.eval_limit", "eval_limit='many': must be a whole number"),
    ("missing recipe file", "recipe: configs/recipes/nope.yaml\n", "settings.recipe", "no such recipe file"),
    ("shell templates beside a recipe", "recipe: configs/recipes/tiny-cpu.yaml\nsteps: [echo]\n", "steps",
     "a recipe sweep runs `thinkj run RECIPE --set field=value ...`"),
    ("dry_run as a field", "recipe: configs/recipes/tiny-cpu.yaml\nsettings: {dry_run: true}\n", "settings.dry_run",
     "the sweep's own --dry-run"),
    ("a run the pipeline refuses", "recipe: configs/recipes/tiny-cpu.yaml\nsettings: {w_con: 0.5}\n", "grid/runs",
     "W_CON='0.5': the consistency term needs both orders"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_a_bad_field_is_refused_when_the_spec_is_read_naming_file_and_key(case, tmp_path):
    _, body, key, message = case
    path = _spec(tmp_path, "name: s\n" + body)
    with pytest.raises(RecordError) as err:
        load_spec(path)
    line = str(err.value)
    assert line.startswith(f"{path}, field '{key}': ") and message in line and "\n" not in line, line


def test_set_may_name_any_setting_of_the_run_and_nothing_else():
    spec = load_spec(EXPERIMENTS / "table8.yaml", parse_overrides(["eval_limit=10"]))
    assert all(" --set eval_limit=10 " in r.commands[0] for r in expand(spec, Path("/s")))
    with pytest.raises(ThinkJError, match=r"^--set w_sttr: not a setting of the run \(did you mean w_str\?\)"):
        load_spec(EXPERIMENTS / "table8.yaml", parse_overrides(["w_sttr=0.5"]))
    with pytest.raises(ThinkJError, match=r"^--set w_str='high': must be a number"):
        load_spec(EXPERIMENTS / "table8.yaml", parse_overrides(["w_str=high"]))
    with pytest.raises(ThinkJError, match=r"^--set tp='four': must be a whole number"):
        load_spec(EXPERIMENTS / "table8.yaml", parse_overrides(["tp=four"]))


@pytest.mark.slow
def test_tiny_recipe_sweep_fills_the_table_and_reruns_nothing(tmp_path):
    """The 2 x 2 tiny sweep for real (the tiny CPU recipe, TRL GRPO; ~80 s on 2 idle cores): four runs in one run
    folder, the first making its shared stages; results tagged by the pipeline with each cell's weights, the trainer
    run with them, a filled table; the rerun launches nothing."""
    from typer.testing import CliRunner

    from thinkj.cli import _register_subcommands, app

    if not any(g.name == "sweep" for g in app.registered_groups):
        _register_subcommands()
    run_dir, sweep_dir = tmp_path / "run", tmp_path / "sw"
    args = ["sweep", str(EXPERIMENTS / "tiny_table8.yaml"), "--launcher", "inprocess", "--sweep-dir", str(sweep_dir),
            "--set", f"run_dir={run_dir}"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stderr[first.stderr.index("{\n \"launched\""):])
    assert len(summary["launched"]) == 4 and not summary["skipped"] and not summary["failed"]
    state = json.loads((sweep_dir / "state.json").read_text())
    assert all(r["status"] == "done" and r["launches"] == 1 for r in state["runs"].values())
    # the shared stages ran once: one judge SFT record, four online folders
    assert len(list(run_dir.rglob("judge_sft.done.json"))) == 1
    results = sorted(run_dir.glob("eval/*/synthetic/synthetic.results.json"))
    assert len(results) == 4
    cells = set()
    for path in results:
        doc = json.loads(path.read_text())
        assert doc["tags"]["model"] == "tiny" and doc["tags"]["method"] == "online (GRPO)"
        cell = (float(doc["tags"]["w_fmt"]), float(doc["tags"]["w_str"]))
        # the weights the cell's trainer ran with (its run record) are the cell's
        online = run_dir / "train" / path.parent.parent.name.removesuffix("_model")
        weights = json.loads((online / "run_settings.json").read_text())["run"]["weights"]
        assert {k: float(v) for k, v in weights.items()} == {"w_fmt": cell[0], "w_str": cell[1]}
        cells.add(cell)
    assert cells == {(f, s) for f in (1.0, 0.0) for s in (0.2, 0.0)}
    table = (sweep_dir / "tables" / "table_tiny_table8.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| 1.0") or line.startswith("| 0.0")]
    assert len(rows) == 4 and all("—" not in r.split("|")[3] for r in rows), table
    assert summary["table"]["filled"] == summary["table"]["cells"] == 12
    mtimes = {p: p.stat().st_mtime_ns for p in results}

    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    again = json.loads(second.stderr[second.stderr.index("{\n \"launched\""):])
    assert again["launched"] == [] and len(again["skipped"]) == 4
    assert {p: p.stat().st_mtime_ns for p in results} == mtimes
    assert (sweep_dir / "tables" / "table_tiny_table8.md").read_text() == table
