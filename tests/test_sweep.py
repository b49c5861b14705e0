"""Sweeps: grid expansion and stable names, resume after a kill, and a real tiny 2 x 2 TRL sweep to a filled table.

Recipe sweeps (``thinkj run RECIPE --set ...`` per run) in particular: tests/test_sweep_recipes.py."""

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

from thinkj.errors import ThinkJError
from thinkj.records import RecordError
from thinkj.sweep import DONE_FILE, expand, load_spec, run_sweep
from thinkj.sweep.sweep_file import parse_overrides

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"


PAPER_SPECS = [*(f"table{n}" for n in range(2, 10)), "table4_baselines"]


def test_every_paper_table_has_a_spec_that_expands():
    expected = {"table8": 18, "table4": 8, "table4_baselines": 6, "table3": 18, "table6": 7, "table7": 7}
    for name in PAPER_SPECS:
        spec = load_spec(EXPERIMENTS / f"{name}.yaml")
        runs = expand(spec, Path("/sweeps") / spec.name)
        assert runs, name
        assert spec.table == name[len("table"):][:1]
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
    again = expand(load_spec(EXPERIMENTS / "table8.yaml"), Path("/s"))
    assert [r.name for r in runs] == [r.name for r in again]
    assert runs[0].name.startswith("recipe=qwen2.5-32b_w_fmt=1.0_w_str=0.5-")
    narrowed = expand(load_spec(EXPERIMENTS / "table8.yaml", parse_overrides(["w_str=[0.5]", "nnodes=1"])), Path("/s"))
    assert len(narrowed) == 6 and {r.settings["w_str"] for r in narrowed} == {0.5}
    # a changed shared setting changes every name (no reuse of results made with other settings)
    assert not {r.name for r in narrowed} & {r.name for r in runs}
    assert all(" --set nnodes=1 " in r.commands[0] and r.commands[0].endswith(" --set w_str=0.5") for r in narrowed)


@pytest.mark.parametrize("override, message", [
    ("w_str=[-0.2]", r"--set w_str=-0\.2: a reward weight must be >= 0"),
    ("w_acc=-1", r"--set w_acc=-1: a reward weight must be >= 0"),
])
def test_a_negative_reward_weight_is_refused_before_any_run(override, message):
    with pytest.raises(ThinkJError, match=message):
        load_spec(EXPERIMENTS / "table8.yaml", parse_overrides([override]))
    load_spec(EXPERIMENTS / "table8.yaml", parse_overrides(["w_str=[0.0, 0.3]"]))  # zero and positive pass


def test_bad_specs_name_the_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps: [echo]\n")
    with pytest.raises(RecordError, match="bad.yaml.*results"):
        load_spec(bad)
    bad.write_text("name: x\nsteps: ['echo {nope}']\nresults: r.json\n")
    with pytest.raises(RecordError, match=r"bad\.yaml, field 'steps\[0\]': \{nope\} names no setting"):
        load_spec(bad)


def _counting_spec(tmp_path: Path, slow_value: int) -> Path:
    """Three runs; each step appends to a counter file; step 2 of run v=slow_value sleeps (the kill window) while
    the file ``slow`` exists -- removing it, not editing the spec, makes the resumed sweep fast."""
    script = tmp_path / "step.py"
    (tmp_path / "slow").touch()
    script.write_text(textwrap.dedent("""
        import json, sys, time
        from pathlib import Path
        step, v, run_dir, counter, slow = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], int(sys.argv[5])
        with open(counter, "a") as f:
            f.write(f"{v}:{step}\\n")
        if step == "2" and v == slow and (Path(counter).parent / "slow").exists():
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

    # resume the same spec without the slow step: run 1 is skipped, run 2 restarts at step 2, run 3 runs in full
    (tmp_path / "slow").unlink()
    summary = run_sweep(load_spec(spec_path), sweep_dir, "local", out=open(os.devnull, "w"))
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


def test_spec_commands_name_real_commands_configs_and_presets():
    from test_reproduce import _thinkj_command_exists

    from thinkj.rewards import get_preset

    for name in PAPER_SPECS:
        spec = load_spec(EXPERIMENTS / f"{name}.yaml")
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


# --------------------------------------------------------------------------------------------- spec schema

_GOOD = "name: s\nsettings: {w: 1}\nsteps: ['echo {w}']\nresults: '{run_dir}/r.results.json'\n"

# (case id, spec YAML, the field the error names, text the message holds)
BAD_SPECS = [
    ("spec is a list", "- name: s\n", None, "a sweep spec is a YAML mapping, got a list"),
    ("grid is a scalar", _GOOD + "grid: 5\n", "grid", "must be a mapping"),
    ("grid is a list", _GOOD + "grid: [1, 2]\n", "grid", "must be a mapping"),
    ("grid axis is a scalar", _GOOD.replace("{w: 1}", "{}") + "grid: {w: 0.5}\n", "grid.w", "must be a list of values"),
    ("grid axis is a string", _GOOD.replace("{w: 1}", "{}") + "grid: {w: abc}\n", "grid.w", "must be a list"),
    ("grid axis is empty", _GOOD.replace("{w: 1}", "{}") + "grid: {w: []}\n", "grid.w", "at least one value"),
    ("settings is a list", _GOOD.replace("settings: {w: 1}", "settings: [w, 1]"), "settings", "must be a mapping"),
    ("settings is a string", _GOOD.replace("settings: {w: 1}", "settings: w=1"), "settings", "must be a mapping"),
    ("runs is a mapping", _GOOD + "runs: {a: 1}\n", "runs", "must be a list"),
    ("a run is a scalar", _GOOD + "runs: [1]\n", "runs[0]", "must be a mapping"),
    ("tags is a list", _GOOD + "tags: [a]\n", "tags", "must be a mapping"),
    ("a tag is a list", _GOOD + "tags: {a: [1]}\n", "tags.a", "must be a string or number"),
    ("step read as a mapping", _GOOD.replace("['echo {w}']", "\n  - echo --tag a: b"), "steps[0]", "quote the line"),
    ("empty steps", _GOOD.replace("['echo {w}']", "[]"), "steps", "missing or empty"),
    ("positional {}", _GOOD.replace("echo {w}", "echo {}"), "steps[0]", "positional placeholder"),
    ("positional {0}", _GOOD.replace("echo {w}", "echo {0}"), "steps[0]", "positional placeholder {0}"),
    ("unknown placeholder", _GOOD.replace("echo {w}", "echo {nosuch}"), "steps[0]", "{nosuch} names no setting"),
    ("attribute placeholder", _GOOD.replace("echo {w}", "echo {w.real}"), "steps[0]", "names a setting only"),
    ("index placeholder", _GOOD.replace("echo {w}", "echo {w[0]}"), "steps[0]", "names a setting only"),
    ("unbalanced brace", _GOOD.replace("echo {w}", "echo {w"), "steps[0]", "literal brace is written"),
    ("stray closing brace", _GOOD.replace("echo {w}", "echo w}"), "steps[0]", "literal brace is written"),
    ("bad format spec", _GOOD.replace("{w: 1}", "{w: x}").replace("echo {w}", "echo {w:.2f}"), "steps[0]",
     "Unknown format code"),
    ("unknown placeholder in results", _GOOD.replace("'{run_dir}/r", "'{out}/r"), "results[0]", "{out} names no"),
    ("unknown placeholder in a tag", _GOOD + "tags: {m: '{model}'}\n", "tags", "{model} names no setting"),
    ("tag using tag_args", _GOOD + "tags: {m: '{tag_args}'}\n", "tags", "cannot use {tag_args}"),
    ("unknown placeholder inside a setting", _GOOD.replace("{w: 1}", "{w: '{v}'}"), "steps[0]",
     "{v} names no setting of this run"),
    ("settings in a loop", _GOOD.replace("{w: 1}", "{w: '{v}', v: '{w}'}"), "steps[0]", "loop: w -> v -> w"),
    ("reserved setting name", _GOOD.replace("{w: 1}", "{w: 1, run_dir: /x}"), "settings.run_dir", "reserved"),
    ("setting name that no template can use", _GOOD.replace("{w: 1}", "{w: 1, 'a.b': 2}"), "settings",
     "must be a word"),
    ("name is a list", _GOOD.replace("name: s", "name: [s]"), "name", "must be a plain name"),
    ("name escapes the sweeps folder", _GOOD.replace("name: s", "name: ../s"), "name", "must be a plain name"),
    ("unknown top-level key", _GOOD + "stepz: []\n", None, "unknown keys ['stepz']"),
    ("unknown table", _GOOD + "table: '99'\n", "table", "no results table '99'"),
    ("table and table_spec", _GOOD + "table: '8'\ntable_spec: {}\n", "table_spec", "not both"),
    ("name_keys naming no setting", _GOOD + "name_keys: [x]\n", "name_keys", "name no setting"),
    ("table_spec unknown benchmark", _GOOD.replace("{w: 1}", "{}") + "grid: {w: [1]}\ntable_spec: {rows: [w], "
     "columns: [{benchmark: rewardbnch, header: A, path: [accuracy]}]}\n", "table_spec.columns[0].benchmark",
     "unknown benchmark 'rewardbnch'"),
    ("table_spec rows not grid axes", _GOOD + "table_spec: {rows: [w], columns: [{benchmark: synthetic, "
     "header: A, path: [accuracy]}]}\n", "table_spec.rows", "must name grid axes"),
    ("empty spec", "", None, "is empty, expected a sweep spec"),
    ("key written twice", _GOOD + "settings: {v: 2}\n", None, "line 5: not valid YAML: the key 'settings' is written "
     "twice"),
    ("setting written twice", _GOOD.replace("{w: 1}", "{w: 1, w: 2}"), None, "the key 'w' is written twice"),
    ("alias bomb", _GOOD + "description: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"x{i}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6)), None,
     "more than 1,000,000 values"),
    ("self-referencing alias", _GOOD.replace("{w: 1}", "&s {w: [*s]}"), None, "nested deeper than 100 levels"),
    ("5,000-digit integer", _GOOD.replace("{w: 1}", "{w: " + "1" * 5000 + "}"), None,
     "an integer longer than Python's limit"),
    ("step expanding to nothing", _GOOD.replace("{w: 1}", "{w: ''}").replace("echo {w}", "{w}"), "steps[0]",
     "expands to an empty command"),
    ("grid of too many runs", _GOOD.replace("{w: 1}", "{}") + "grid: {" + ", ".join(
        f"a{i}: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" for i in range(5)) + "}\n", "grid", "100,000 runs, more than 10,000"),
    ("eval step with an unknown benchmark", _GOOD.replace("echo {w}", "thinkj eval run rewardbnch --model m"),
     "steps[0]", "thinkj eval run 'rewardbnch': unknown benchmark"),
]


@pytest.mark.parametrize("case", BAD_SPECS, ids=[c[0] for c in BAD_SPECS])
def test_bad_spec_shapes_name_the_file_and_key(case, tmp_path):
    _, text, key, message = case
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(RecordError) as err:
        load_spec(path)
    line = str(err.value)
    assert line.startswith(str(path)) and "\n" not in line, line
    if key is not None:
        assert f"field '{key}'" in line, line
    assert message in line, line


def test_literal_braces_stay_literal(tmp_path):
    """``{{`` in a step is a brace in the command; a setting's ``{{x}}`` stays ``{x}`` where a step uses it (an
    expansion is never expanded again)."""
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent("""
        name: braces
        settings: {code: "print({{'k': 1}})", w: 2}
        steps:
          - python -c "{code}" {{w}} {w}
          - >-
            echo '{{"json": {w}}}'
        results: "{run_dir}/r.results.json"
    """))
    run = expand(load_spec(path), tmp_path)[0]
    assert run.commands == ["python -c \"print({'k': 1})\" {w} 2", "echo '{\"json\": 2}'"]


# --------------------------------------------------------------------------------------------- run identity

def _writer_spec(tmp_path: Path, *, step_extra: str = "", tags: str = "{model: tiny}") -> Path:
    """Two runs whose one step writes the results JSON with the run's tags and counts its launches."""
    script = tmp_path / "write.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        from pathlib import Path
        run_dir, counter = Path(sys.argv[1]), sys.argv[2]
        tags = dict(t.split("=", 1) for t in sys.argv[3:] if t != "--tag")
        with open(counter, "a") as f:
            f.write(run_dir.name + "\\n")
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "r.results.json").write_text(json.dumps({"benchmark": "synthetic", "metrics": {"accuracy": 50.0},
                                                            "tags": tags}))
    """))
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""
        name: identity
        grid: {{v: [1, 2]}}
        tags: {tags}
        steps:
          - python {script} {{run_dir}} {tmp_path / 'launches.txt'} {{tag_args}} {step_extra}
        results: "{{run_dir}}/r.results.json"
    """))
    return spec


def _launches(tmp_path: Path) -> list[str]:
    path = tmp_path / "launches.txt"
    return path.read_text().split() if path.exists() else []


def _sweep(spec: Path, sweep_dir: Path) -> dict:
    return run_sweep(load_spec(spec), sweep_dir, "local", out=open(os.devnull, "w"))


def test_edited_steps_or_tags_rerun_instead_of_reusing_results(tmp_path):
    """A run's name hashes its settings, expanded commands, results paths and tags: an unchanged spec reuses every
    finished run; an edited step or tag gives new runs (new folders) whose results carry the edit."""
    sweep_dir = tmp_path / "sw"
    spec = _writer_spec(tmp_path)
    first = _sweep(spec, sweep_dir)
    assert len(first["launched"]) == 2 and not first["failed"]
    assert _sweep(spec, sweep_dir)["skipped"] == first["runs"]  # same spec: nothing runs again

    edited_step = _writer_spec(tmp_path, step_extra="extra=1")
    second = _sweep(edited_step, sweep_dir)
    assert len(second["launched"]) == 2 and not set(second["runs"]) & set(first["runs"])

    edited_tag = _writer_spec(tmp_path, tags="{model: small}")
    third = _sweep(edited_tag, sweep_dir)
    assert len(third["launched"]) == 2 and not set(third["runs"]) & set(first["runs"])
    for name in third["runs"]:
        tags = json.loads((sweep_dir / "runs" / name / "r.results.json").read_text())["tags"]
        assert tags["model"] == "small" and tags["sweep_run"] == name
    assert len(_launches(tmp_path)) == 6
    # the first spec again: its runs are still finished, in their own folders
    assert _sweep(_writer_spec(tmp_path), sweep_dir)["skipped"] == first["runs"]
    assert len(_launches(tmp_path)) == 6


def test_names_ignore_the_sweep_folder_and_record_the_identity(tmp_path):
    spec = load_spec(_writer_spec(tmp_path))
    assert [r.name for r in expand(spec, tmp_path / "a")] == [r.name for r in expand(spec, tmp_path / "b")]
    _sweep(_writer_spec(tmp_path), tmp_path / "sw")
    run = expand(spec, tmp_path / "sw")[0]
    marker = json.loads((run.run_dir / DONE_FILE).read_text())
    assert marker["identity"] == run.identity["hash"] == run.name.rsplit("-", 1)[1]
    assert marker["run"] == run.identity and marker["run"]["tags"] == {"model": "tiny", "sweep_run": "<name>"}
    assert marker["run"]["commands"][0].startswith(f"python {tmp_path / 'write.py'} <run_dir> ")


def test_a_marker_of_another_identity_is_not_finished(tmp_path):
    from thinkj.sweep import is_done

    spec = load_spec(_writer_spec(tmp_path))
    _sweep(_writer_spec(tmp_path), tmp_path / "sw")
    run = expand(spec, tmp_path / "sw")[0]
    assert is_done(run)
    marker = run.run_dir / DONE_FILE
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "identity": "00000000"}))
    assert not is_done(run)


# --------------------------------------------------------------------------------------------- state and markers

@pytest.mark.parametrize("damage", ["truncated", "empty", "a list", "bad entry", "binary"])
def test_damaged_state_file_is_one_line_and_nothing_reruns(damage, tmp_path):
    from thinkj.errors import ThinkJError

    sweep_dir = tmp_path / "sw"
    spec = _writer_spec(tmp_path)
    first = _sweep(spec, sweep_dir)
    state = sweep_dir / "state.json"
    text = state.read_text()
    state.write_bytes({"truncated": text[:len(text) // 2].encode(), "empty": b"", "a list": b"[]",
                       "bad entry": json.dumps({"sweep": "identity", "runs": {"x": {"status": "done",
                                                                                    "steps_done": "1"}}}).encode(),
                       "binary": b"\xff\xfe\x00"}[damage])
    with pytest.raises(ThinkJError) as err:
        _sweep(spec, sweep_dir)
    line = str(err.value)
    assert str(state) in line and "delete it" in line and "\n" not in line, line
    assert len(_launches(tmp_path)) == 2  # nothing ran again
    state.unlink()  # the recovery the message gives: finished runs stay finished
    assert _sweep(spec, sweep_dir)["skipped"] == first["runs"] and len(_launches(tmp_path)) == 2


def test_state_of_another_sweep_is_refused(tmp_path):
    from thinkj.errors import ThinkJError

    sweep_dir = tmp_path / "sw"
    sweep_dir.mkdir()
    (sweep_dir / "state.json").write_text(json.dumps({"sweep": "other", "runs": {}}))
    with pytest.raises(ThinkJError, match="holds the state of sweep 'other', not 'identity'"):
        _sweep(_writer_spec(tmp_path), sweep_dir)


def test_damaged_done_marker_is_one_line(tmp_path):
    from thinkj.errors import ThinkJError

    sweep_dir = tmp_path / "sw"
    spec = _writer_spec(tmp_path)
    _sweep(spec, sweep_dir)
    marker = expand(load_spec(spec), sweep_dir)[0].run_dir / DONE_FILE
    marker.write_text('{"results": [')
    with pytest.raises(ThinkJError, match=rf"{marker}: invalid JSON .*delete it"):
        _sweep(spec, sweep_dir)
    assert len(_launches(tmp_path)) == 2
