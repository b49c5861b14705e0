"""Sweeps: grid expansion and stable names, resume after a kill, and a real tiny 2 x 2 TRL sweep to a filled table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from thinkj.records import RecordError, write_jsonl
from thinkj.sweep import DONE_FILE, expand, load_spec, run_sweep
from thinkj.sweep.spec import parse_overrides

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"


def test_every_paper_table_has_a_spec_that_expands():
    expected = {"table8": 18, "table4": 14, "table3": 18, "table6": 7, "table7": 7}
    for n in range(2, 10):
        spec = load_spec(EXPERIMENTS / f"table{n}.yaml")
        runs = expand(spec, Path("/sweeps") / spec.name)
        assert runs, n
        assert spec.table == str(n)
        assert len({r.name for r in runs}) == len(runs)
        if spec.name in expected:
            assert len(runs) == expected[spec.name], spec.name
        for run in runs:
            assert all("{" not in c for c in run.commands), run.commands
            assert all(str(p).endswith(".results.json") for p in run.results)


def test_table8_grid_names_are_stable_and_overrides_narrow_it():
    spec = load_spec(EXPERIMENTS / "table8.yaml")
    runs = expand(spec, Path("/s"))
    grid = {(f, s) for f in (1.0, 0.5, 0.0) for s in (0.5, 0.2, 0.0)}
    assert {(r.settings["w_fmt"], r.settings["w_str"]) for r in runs} == grid
    assert all(r.settings["w_acc"] == 1.0 for r in runs)
    again = expand(load_spec(EXPERIMENTS / "table8.yaml"), Path("/s"))
    assert [r.name for r in runs] == [r.name for r in again]
    assert runs[0].name.startswith("model=")
    narrowed = expand(load_spec(EXPERIMENTS / "table8.yaml", parse_overrides(["w_str=[0.5]", "rollout_n=4"])), Path("/s"))
    assert len(narrowed) == 6 and {r.settings["w_str"] for r in narrowed} == {0.5}
    # a changed shared setting changes every name (no reuse of results made with other settings)
    assert not {r.name for r in narrowed} & {r.name for r in runs}
    assert all("actor_rollout_ref.rollout.n=4" in r.commands[0] for r in narrowed)


def test_bad_specs_name_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: [echo]\n")
    with pytest.raises(RecordError, match="bad.yaml.*results"):
        load_spec(bad)
    bad.write_text("name: x\nsteps: ['echo {nope}']\nresults: r.json\n")
    with pytest.raises(KeyError, match="nope"):
        expand(load_spec(bad), tmp_path)


def _counting_spec(tmp_path: Path, slow_value: int) -> Path:
    """Three runs; each step appends to a counter file; step 2 of run v=slow_value sleeps (the kill window)."""
    script = tmp_path / "step.py"
    script.write_text(textwrap.dedent("""
        import json, sys, time
        from pathlib import Path
        step, v, run_dir, counter, slow = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], int(sys.argv[5])
        with open(counter, "a") as f:
            f.write(f"{v}:{step}\\n")
        if step == "2" and v == slow:
            time.sleep(60)
        if step == "2":
            (run_dir / "eval").mkdir(parents=True, exist_ok=True)
            (run_dir / "eval" / "synthetic.results.json").write_text(json.dumps({
                "benchmark": "synthetic", "metrics": {"accuracy": 10.0 * v},
                "tags": {"model": "tiny", "v": str(v)}, "provenance": {"time": "2026-11-22T00:00:00"}}))
    """))
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""
        name: counting
        settings: {{slow: {slow_value}}}
        grid: {{v: [1, 2, 3]}}
        steps:
          - {sys.executable} {script} 1 {{v}} {{run_dir}} {tmp_path / 'counter.txt'} {{slow}}
          - {sys.executable} {script} 2 {{v}} {{run_dir}} {tmp_path / 'counter.txt'} {{slow}}
        results: "{{run_dir}}/eval/synthetic.results.json"
        table_spec:
          rows: [v]
          fixed_tags: {{model: tiny}}
          columns: [{{benchmark: synthetic, header: Accuracy, path: [accuracy]}}]
    """))
    return spec


def test_killed_sweep_resumes_where_it_stopped(tmp_path):
    spec_path = _counting_spec(tmp_path, slow_value=2)
    sweep_dir = tmp_path / "sweep"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen([sys.executable, "-m", "thinkj.cli", "sweep", str(spec_path), "--launcher", "local",
                             "--sweep-dir", str(sweep_dir)], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counter = tmp_path / "counter.txt"
    deadline = time.time() + 60
    while time.time() < deadline and "2:2" not in (counter.read_text() if counter.exists() else ""):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole sweep dies mid-run (its own process group only)
    proc.wait()
    assert counter.read_text().split() == ["1:1", "1:2", "2:1", "2:2"]
    state = json.loads((sweep_dir / "state.json").read_text())
    names = list(state["runs"])
    assert [state["runs"][n]["status"] for n in names] == ["done", "running"]
    assert state["runs"][names[1]]["steps_done"] == 1

    # resume without the slow step: run 1 is skipped, run 2 restarts at step 2, run 3 runs in full
    spec = load_spec(spec_path, {"slow": 2})
    spec.steps = [s.replace(" {slow}", " 0") for s in spec.steps]
    summary = run_sweep(spec, sweep_dir, "local", out=open(os.devnull, "w"))
    assert summary["skipped"] == [names[0]] and summary["launched"] == names[1:] + [n for n in summary["runs"] if n not in names]
    assert counter.read_text().split()[4:] == ["2:2", "3:1", "3:2"]
    assert all((sweep_dir / "runs" / n / DONE_FILE).exists() for n in summary["runs"])


def test_done_marker_needs_results(tmp_path):
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(f"name: r\nsteps: ['{sys.executable} -c pass']\nresults: '{{run_dir}}/x.results.json'\n")
    summary = run_sweep(load_spec(spec_path), tmp_path / "sw", "local", out=open(os.devnull, "w"))
    assert summary["failed"] and not list((tmp_path / "sw").rglob(DONE_FILE))


def test_inprocess_hands_shell_lines_to_bash(tmp_path):
    from thinkj.sweep.runner import _run_inprocess

    out = tmp_path / "x.txt"
    assert _run_inprocess(f"thinkj --help > {out} && test -s {out}", tmp_path / "log") == 0
    assert "sweep" in out.read_text()


def test_ray_launcher_submits_one_job_per_run_with_the_marker_last():
    from thinkj.sweep.runner import ray_submit_command

    run = expand(load_spec(EXPERIMENTS / "table8.yaml"), Path("/s"))[0]
    command = ray_submit_command(run, "http://head:8265")
    assert command[:3] == ["ray", "job", "submit"] and "--address" in command and command[-3:-1] == ["bash", "-c"]
    entry = command[-1].split(" && ")
    assert entry[0].startswith("cd ") and entry[1:-1] == run.commands and "thinkj.sweep.runner mark-done" in entry[-1]


@pytest.mark.slow
def test_tiny_trl_sweep_fills_the_table_and_reruns_nothing(tiny_model_dir, tmp_path):
    """2 x 2 reward weights: TRL GRPO (1 step) + synthetic eval per run -> filled table; the rerun launches nothing."""
    from typer.testing import CliRunner

    from thinkj.cli import _register_subcommands, app
    from thinkj.demo.tiny_task import make_pairs

    write_jsonl(tmp_path / "train.jsonl", [p.to_dict() for p in make_pairs(8, seed=1)])
    write_jsonl(tmp_path / "test.jsonl", [p.to_dict() for p in make_pairs(4, seed=2, id_prefix="test")])
    if not any(g.name == "sweep" for g in app.registered_groups):
        _register_subcommands()
    args = ["sweep", str(EXPERIMENTS / "tiny_table8.yaml"), "--launcher", "inprocess", "--sweep-dir", str(tmp_path / "sw"),
            "--set", f"policy={tiny_model_dir}", "--set", f"train_data={tmp_path / 'train.jsonl'}",
            "--set", f"test_data={tmp_path / 'test.jsonl'}"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stderr[first.stderr.index("{\n"):])
    assert len(summary["launched"]) == 4 and not summary["skipped"]
    state = json.loads((tmp_path / "sw" / "state.json").read_text())
    assert len(state["runs"]) == 4 and all(r["status"] == "done" and r["launches"] == 1 for r in state["runs"].values())
    results = sorted((tmp_path / "sw").rglob("synthetic.results.json"))
    assert len(results) == 4
    for path in results:
        doc = json.loads(path.read_text())
        assert doc["tags"]["model"] == "tiny" and doc["metrics"]["n_comparisons"] == 4
        run_dir = path.parent.parent
        assert json.loads((run_dir / "train" / "run_settings.json").read_text()) is not None
    table = (tmp_path / "sw" / "tables" / "table_tiny_table8.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| 1.0") or line.startswith("| 0.0")]
    assert len(rows) == 4 and all("—" not in r.split("|")[3] for r in rows), table
    assert summary["table"]["filled"] == summary["table"]["cells"] == 12
    mtimes = {p: p.stat().st_mtime_ns for p in results}

    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    again = json.loads(second.stderr[second.stderr.index("{\n"):])
    assert again["launched"] == [] and len(again["skipped"]) == 4
    state = json.loads((tmp_path / "sw" / "state.json").read_text())
    assert all(r["launches"] == 1 for r in state["runs"].values())  # nothing re-launched
    assert {p: p.stat().st_mtime_ns for p in results} == mtimes
    assert (tmp_path / "sw" / "tables" / "table_tiny_table8.md").read_text() == table


def test_spec_commands_name_real_commands_configs_and_presets():
    from test_reproduce import _thinkj_command_exists

    from thinkj.rewards import get_preset

    for n in range(2, 10):
        spec = load_spec(EXPERIMENTS / f"table{n}.yaml")
        for run in expand(spec, Path("/s")):
            for line in (part for c in run.commands for part in c.split(" && ")):
                argv = line.split()
                if argv[0] == "thinkj":
                    assert _thinkj_command_exists(argv), (spec.name, line)
                    if argv[1:3] in (["train", "sft"], ["train", "dpo"], ["train", "rm"]):
                        assert (ROOT / "configs" / "llamafactory" / f"{argv[3]}.yaml").exists(), line
                    if "--model" in argv and argv[1:3] != ["eval", "run"] and argv[1:3] != ["train", "rl"]:
                        assert (ROOT / "configs" / "models" / f"{argv[argv.index('--model') + 1]}.yaml").exists(), line
                    if "--preset" in argv:
                        get_preset(argv[argv.index("--preset") + 1])
                else:
                    assert argv[0] in ("true", "python"), line
