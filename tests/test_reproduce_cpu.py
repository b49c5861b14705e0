"""The reproduction pipeline run for real at CPU scale: ``scripts/reproduce_cpu.sh`` with ``CPU_MODEL=tiny``.

The same script and stage list as the GPU wrappers (only settings differ), after the stages the tiny recipe's run
prepares itself (the tiny model built in the run folder, the generated task): data selection with the scripted R1
served by the run over HTTP on 127.0.0.1, LlamaFactory judge SFT, verl's own GRPO trainer on the CPU for 2 steps,
the checkpoint merge, evaluation of the merged model and the table; then a Table 8 sweep (local launcher
interrupted, finished through ``ray job submit``). Opt-in (``-m opt_in``, ~3 min each, kept out of CI's budget): the
ablation path (``W_STR=0.0``: every finished data and SFT stage skipped with its record untouched, a new online run
whose verl config carries w_str = 0.0, both runs in the table) and offline learning (critic SFT, critic-guided
pairs, DPO + SFT term). What ``make test`` keeps of the ablation: the stage reuse by dry run
(tests/test_pipeline_done.py) and a weight override reaching verl's reward in a real run
(tests/test_verl_cpu_twins.py).

    python -m pytest -q tests/test_reproduce_cpu.py             # ~11 min on 2 idle cores
    python -m pytest -q tests/test_reproduce_cpu.py -m opt_in   # the ablation and the offline run
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from judgment_checks import check_synthetic_results
from test_reproduce import dry_run  # tests/ is on sys.path (a site-packages `tests` would shadow tests.*)

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
DATA_AND_SFT = ("load", "difficulty", "dedup", "decontaminate", "traces", "clip", "seed_set", "judge_sft")


def reproduce(run_dir: Path, log: Path, **env: str) -> subprocess.CompletedProcess:
    """``bash scripts/reproduce_cpu.sh`` on the tiny model into ``run_dir``; its output goes to ``log``."""
    full = {k: v for k, v in os.environ.items() if k not in ("W_STR", "W_FMT", "W_ACC", "LEARNING", "RL_ALGO", "SEED")}
    # 8 items per benchmark: RM-Bench judges 9 response pairs per item in both orders (20 items took 12 minutes)
    full.update(CPU_MODEL="tiny", RUN_DIR=str(run_dir), PYTHON=os.environ.get("PYTHON", ""), EVAL_LIMIT="8", **env)
    if SHARED.is_dir():  # the real Auto-J and RM-Bench files, evaluated on a slice
        full["SHARED_DATA"] = str(SHARED)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "reproduce_cpu.sh")], env=full, cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1500)
    log.write_text(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-6000:]
    return proc


def held_out_only(run_dir: Path) -> dict[str, str]:
    """A rerun judged on the task's held-out pairs only (the first run covered the Auto-J and RM-Bench slices)."""
    return {"BENCHMARKS": "synthetic", "BENCHMARK_DATA": f"synthetic={run_dir}/task/test.jsonl"}


def records(run_dir: Path) -> dict[str, Path]:
    return {p.name[: -len(".done.json")]: p for p in run_dir.rglob("*.done.json")}


@pytest.fixture(scope="module")
def online_run(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("rehearsal")
    run_dir = base / "run"
    proc = reproduce(run_dir, base / "online.log")
    return {"run_dir": run_dir, "out": proc.stdout, "base": base}


def benchmarks() -> list[str]:
    return ["synthetic", *(["autoj", "rmbench"] if SHARED.is_dir() else [])]


def test_every_stage_the_gpu_wrapper_prints_is_done(online_run):
    run_dir = online_run["run_dir"]
    gpu = [name for kind, name, _ in dry_run("reproduce_qwen2.5-7b.sh", run_dir.parent / "gpu") if kind == "stage"]
    expected = [n for n in gpu if not n.startswith("eval_")] + [f"eval_{b}" for b in benchmarks()]
    done = records(run_dir)
    assert set(expected) <= set(done), sorted(set(expected) - set(done))
    # the same stage list: the CPU run made every non-evaluation stage of the GPU plan, in the GPU plan's order,
    # after what the tiny recipe's run prepares for itself (the model built in the run folder, the generated task)
    order = [line.split()[2] for line in online_run["out"].splitlines() if line.startswith("# stage ")]
    assert order[:2] == ["model", "task"] and {"model", "task"} <= set(done)
    assert [n for n in order[2:] if not n.startswith("eval_")] == [n for n in gpu if not n.startswith("eval_")]
    profile = (run_dir / "model" / "tiny.yaml").read_text()
    assert f"model_name_or_path: {(run_dir / 'model').resolve()}" in profile and "template: qwen" in profile
    assert (run_dir / "model" / "config.json").is_file() and (run_dir / "task" / "test.jsonl").is_file()
    # the scripted teacher was served by the run itself
    assert "# scripted teacher for the fruit task on http://127.0.0.1:" in online_run["out"]
    for name in DATA_AND_SFT:
        record = json.loads(done[name].read_text())
        assert record["stage"] == name and record["settings"]["TRAIN_SOURCE"] == "pairs"
    # the teacher's loopback port is not part of what the traces depend on
    assert json.loads(done["traces"].read_text())["settings"]["TEACHER_URL"] == "http://127.0.0.1:*/v1"


def test_verl_trained_merged_evaluated_and_tabled(online_run):
    run_dir = online_run["run_dir"]
    online = run_dir / "train" / "online_grpo_thinkj_qwen"
    rows = [json.loads(line) for line in open(online / "logs" / "thinkj" / "thinkj_grpo.jsonl")]
    steps = {row["step"]: row["data"] for row in rows if "actor/pg_loss" in row["data"]}
    assert sorted(steps) == [1, 2]
    assert all(math.isfinite(m["actor/pg_loss"]) for m in steps.values())
    assert (online / "hf" / "config.json").is_file() and list((online / "hf").glob("*.safetensors"))
    for bench in benchmarks():
        folder = run_dir / "eval" / "online_grpo_thinkj_qwen_hf" / bench
        results = json.loads((folder / f"{bench}.results.json").read_text())
        assert results["tags"]["method"] == "online (GRPO)" and results["tags"]["model"] == "tiny"
        # the merged model judged EVAL_LIMIT items in both orders (`assert results["metrics"]` held for any file);
        # on the generated task the accuracy is recomputed from the outputs and the pairs file's golds
        judgments = (folder / f"{bench}.judgments.jsonl").read_text().splitlines()
        assert results["provenance"]["n_items"] == 8 and results["metrics"]["n_judgments"] == len(judgments), bench
        assert Path(results["provenance"]["model_path"]).resolve() == (online / "hf").resolve(), bench
        if bench == "synthetic":
            check_synthetic_results(folder, Path(results["provenance"]["data"]["source"]), 8)
    table = (run_dir / "tables" / "tablerehearsal.md").read_text()
    assert "online (GRPO)" in table


@pytest.mark.opt_in  # ~3 minutes of CI time; covered in make test as the module docstring says
def test_w_str_ablation_reuses_data_and_sft_and_adds_a_run(online_run):
    run_dir = online_run["run_dir"]
    before = {name: (path.stat().st_mtime_ns, path.read_bytes()) for name, path in records(run_dir).items()}
    proc = reproduce(run_dir, online_run["base"] / "ablation.log", W_STR="0.0", **held_out_only(run_dir))
    skipped = {line.split()[2].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("# skip ")}
    assert set(DATA_AND_SFT) <= skipped
    after = records(run_dir)
    for name in DATA_AND_SFT:
        assert (after[name].stat().st_mtime_ns, after[name].read_bytes()) == before[name], name
    ablation = run_dir / "train" / "online_grpo_thinkj_qwen_w_str0.0"
    launch = json.loads((ablation / "thinkj_launch.json").read_text())
    assert launch["launch"]["weights"] == {"w_str": 0.0}
    hydra = (ablation / "hydra" / ".hydra" / "overrides.yaml").read_text()
    assert "reward.custom_reward_function.reward_kwargs.w_str=0.0" in hydra
    results = json.loads((run_dir / "eval" / "online_grpo_thinkj_qwen_w_str0.0_hf" / "synthetic"
                          / "synthetic.results.json").read_text())
    assert results["tags"]["w_str"] == "0.0"
    table = (run_dir / "tables" / "tablerehearsal.md").read_text()
    online_rows = [line for line in table.splitlines() if line.startswith("| tiny | online (GRPO) |")]
    assert len(online_rows) == 2 and any("0.0" in row for row in online_rows), table


@pytest.mark.opt_in  # ~2 minutes more of CI time: python -m pytest -q tests/test_reproduce_cpu.py -m opt_in
def test_offline_learning_reuses_the_judge_and_reaches_the_table(online_run):
    run_dir = online_run["run_dir"]
    proc = reproduce(run_dir, online_run["base"] / "offline.log", LEARNING="offline", **held_out_only(run_dir))
    skipped = {line.split()[2].rstrip(":") for line in proc.stdout.splitlines() if line.startswith("# skip ")}
    assert set(DATA_AND_SFT) <= skipped
    done = records(run_dir)
    assert {"critic_sft", "offline"} <= set(done)
    iterations = json.loads((run_dir / "train" / "offline" / "iterations.json").read_text())
    assert iterations and (run_dir / "train" / "offline" / "iter_1" / "model" / "config.json").is_file()
    results = json.loads((run_dir / "eval" / "offline_iter_1_model" / "synthetic" / "synthetic.results.json").read_text())
    assert results["tags"]["method"] == "offline (Critic-guided)"
    assert "offline (Critic-guided)" in (run_dir / "tables" / "tablerehearsal.md").read_text()


# --- Table 8's sweep spec at CPU scale (experiments/scales/cpu.yaml), in the rehearsal's run folder ---

def sweep_command(online_run: dict, sweep_dir: Path, *extra: str) -> list[str]:
    """``thinkj sweep experiments/table8.yaml --scale experiments/scales/cpu.yaml`` pointed at the tiny rehearsal:
    the scale's fields, then --set for the tiny recipe and the rehearsal's run folder, whose data and SFT stages the
    cells share (each cell: ``thinkj run configs/recipes/tiny-cpu.yaml --set run_dir=... --set w_str=...``). The cells
    train with TRL (``rl_engine=trl``, ~20 s a cell against verl's ~2 min): what this test guards is the sweep's
    launchers and resume; verl's CPU run is the rehearsal's own online stage (the fixture) and its twins run."""
    run_dir = online_run["run_dir"]
    return [str(Path(os.environ.get("PYTHON") or sys.executable).parent / "thinkj"), "sweep",
            str(ROOT / "experiments" / "table8.yaml"), "--scale", str(ROOT / "experiments" / "scales" / "cpu.yaml"),
            "--sweep-dir", str(sweep_dir), "--set", "model=[{recipe: configs/recipes/tiny-cpu.yaml}]",
            "--set", f"run_dir={run_dir}", "--set", "eval_limit=8", "--set", "rl_engine=trl", *extra]


def sweep_state(sweep_dir: Path) -> dict:
    path = sweep_dir / "state.json"
    return json.loads(path.read_text()) if path.is_file() else {"runs": {}}


def check_filled_table(sweep_dir: Path) -> None:
    table = (sweep_dir / "tables" / "table_table8.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| 1.0")]
    assert len(rows) == 2 and all("—" not in row and " - " not in row for row in rows), table


def _where_stuck(pid: int) -> str:
    """The process group's processes and the Python stacks of its leader (py-spy), for a test that hangs."""
    ps = subprocess.run(["ps", "-o", "pid,ppid,pgid,stat,etime,args", "-g", str(pid)], capture_output=True, text=True)
    spy = Path(sys.executable).parent / "py-spy"
    stacks = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True) if spy.exists() \
        else None
    return ps.stdout + (stacks.stdout + stacks.stderr if stacks else "(py-spy not installed)")


def _wait_for(condition, proc: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the sweep ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(1)


def test_sweep_cells_by_local_then_ray_resume_after_a_kill(online_run, tmp_path):
    """Two cells of Table 8's grid, each a pipeline run (`thinkj run` of the tiny recipe in the rehearsal's run
    folder: its data and SFT stages reused, a verl online run per cell on the CPU, merged, evaluated) placed in the
    table: the first by the local launcher, which is interrupted (Ctrl-C to its process group) once the second
    cell's training stage is done; the rerun, through `ray job submit` against a Ray head on 127.0.0.1, repeats no
    finished cell and resumes the interrupted one after its finished training stage (the pipeline's records)."""
    from ray_local import local_ray

    run_dir, sweep_dir = online_run["run_dir"], tmp_path / "sweep"
    log = open(tmp_path / "local.log", "w")
    # Ctrl-C as a terminal sends it: SIGINT handled by default. A suite started in the background by a shell without
    # job control (`bash .ci/run &`) hands SIGINT down *ignored*, and Python then installs no KeyboardInterrupt
    # handler: the sweep would never see the Ctrl-C (the cause of this test's fresh-clone failures of 2026-11-25).
    proc = subprocess.Popen(sweep_command(online_run, sweep_dir, "--launcher", "local"), cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        def second_started() -> bool:
            runs = sweep_state(sweep_dir)["runs"]
            return (sum(r["status"] == "done" for r in runs.values()) == 1
                    and any(r["status"] == "running" for r in runs.values()))

        def second_trained() -> bool:  # the pipeline announces the next stage once the online stage's record is written
            running = [n for n, r in sweep_state(sweep_dir)["runs"].items() if r["status"] == "running"]
            step_log = sweep_dir / "runs" / running[0] / "logs" / "step1.log" if running else None
            text = step_log.read_text() if step_log and step_log.is_file() else ""
            return "# stage online " in text and "# stage " in text.split("# stage online ", 1)[1]

        _wait_for(second_started, proc, 900, "first cell done and second started")
        _wait_for(second_trained, proc, 900, "the second cell's training stage done")
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the local sweep outlived 120 s after Ctrl-C:\n" + _where_stuck(proc.pid))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    before = sweep_state(sweep_dir)["runs"]
    finished = [name for name, r in before.items() if r["status"] == "done"]
    assert len(finished) == 1
    marker = sweep_dir / "runs" / finished[0] / "SWEEP_DONE.json"
    stamp = marker.stat().st_mtime_ns
    (interrupted,) = [name for name in before if name != finished[0]]
    cell = before[interrupted]["settings"]
    online = run_dir / "train" / f"online_trl_grpo_thinkj_qwen_w_fmt{cell['w_fmt']}_w_str{cell['w_str']}"
    trained = online / "thinkj_online_done.json"  # TRL's completion record, written last by the run
    trained_stamp = (trained.stat().st_mtime_ns, trained.read_bytes())

    with local_ray() as cluster:  # a head on 127.0.0.1 started by scripts/ray_cluster.sh
        rerun = subprocess.run(sweep_command(online_run, sweep_dir, "--launcher", "ray", "--ray-address",
                                             cluster.dashboard, "--wait"),
                               cwd=ROOT, env=cluster.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=1200)
    (tmp_path / "ray.log").write_text(rerun.stdout)
    assert rerun.returncode == 0, rerun.stdout[-6000:]
    assert f"# done   {finished[0]}" in rerun.stdout  # the finished cell is not repeated
    assert marker.stat().st_mtime_ns == stamp
    after = sweep_state(sweep_dir)["runs"]
    assert all(r["status"] == "done" for r in after.values()) and after[finished[0]]["launches"] == 1
    assert after[interrupted]["job"].startswith("thinkj-") and "ray job submit" in rerun.stdout
    (submitted,) = [line for line in rerun.stdout.splitlines() if line.startswith("ray job submit")]
    assert interrupted in submitted and "thinkj run" in submitted, submitted
    # resumed after its finished training stage: the Ray job's pipeline skipped it, and the run's completion record
    # is untouched (a restart from scratch also ends at step 2, which is all a step count could tell)
    job_log = (sweep_dir / "runs" / interrupted / "logs" / "ray_job.log").read_text()
    assert "# skip online: done" in job_log and "# stage online " not in job_log, job_log[-3000:]
    assert (trained.stat().st_mtime_ns, trained.read_bytes()) == trained_stamp
    assert json.loads(trained.read_text())["steps"] == 2
    check_filled_table(sweep_dir)
