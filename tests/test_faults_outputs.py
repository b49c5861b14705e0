"""Nothing a finished run made is deleted before the new run's inputs are checked, and a finished run is replaced
only by another finished one.

``thinkj train rl --engine trl --out FINISHED --data typo.jsonl`` used to delete the finished run's
``checkpoints/`` and its completion record, then notice the missing file. A finished run here is the folder
layout a TRL run leaves (its marker, settings, checkpoints, model); the typo'd reruns fail on their inputs, the
broken-model rerun fails inside the trainer after every check passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thinkj.errors import ThinkJError
from thinkj.folder_swap import promote, restore, staging_dir
from thinkj.online.trl_grpo import DONE_MARKER, GRPORun, run_trl_grpo
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

ROOT = Path(__file__).resolve().parent.parent


def _finished_trl_run(out: Path) -> dict[str, bytes]:
    """The files a finished TRL run leaves; returns their bytes to compare with later."""
    files = {DONE_MARKER: json.dumps({"engine": "trl", "run": {"steps": 500}, "inputs": {}}).encode(),
             "run_settings.json": b'{"run": {"steps": 500}}', "checkpoints/checkpoint-500/model.safetensors": b"w" * 64,
             "model/model.safetensors": b"m" * 64, "trainer_state.json": b"{}"}
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return files


def _unchanged(out: Path, files: dict[str, bytes]) -> bool:
    return all((out / name).read_bytes() == data for name, data in files.items())


def _rl(tmp_path: Path, out: Path, model: Path, data: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("THINKJ_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "thinkj.cli", "train", "rl", "--engine", "trl", "--model", str(model),
                           "--data", str(data), "--out", str(out), "--steps", "1", "--num-generations", "2",
                           "--device", "cpu", *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case", ["missing data", "unparsable data", "missing model", "unknown weight", "nan weight",
                                  "negative weight", "unknown trl field", "bad group size", "bad micro batch"])
def test_a_rerun_with_a_bad_input_leaves_the_finished_run_alone(tmp_path, tiny_model_dir, case):
    out = tmp_path / "online"
    files = _finished_trl_run(out)
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(4, seed=1))
    model, extra = tiny_model_dir, []
    if case == "missing data":
        data = tmp_path / "typo.jsonl"
    elif case == "unparsable data":
        data.write_text('{"id": "1", "source": \n')
    elif case == "missing model":
        model = tmp_path / "runs" / "no_such_model"
    elif case == "unknown weight":
        extra = ["--weight", "w_strr=0.0"]
    elif case == "nan weight":
        extra = ["--weight", "w_str=nan"]
    elif case == "negative weight":
        extra = ["--weight", "w_str=-1"]
    elif case == "unknown trl field":
        extra = ["temperatur=0.7"]
    elif case == "bad group size":
        extra = ["--prompts-per-step", "1", "per_device_train_batch_size=3"]
    elif case == "bad micro batch":  # 2 rollouts a step: 3 cannot divide them
        extra = ["--prompts-per-step", "1", "--micro-batch", "3"]
    proc = _rl(tmp_path, out, model, data, *extra)
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert _unchanged(out, files) and not staging_dir(out).exists()
    assert not (tmp_path / ".locks").exists()  # refused before the output folder's lock was taken


def test_a_typo_in_the_data_names_the_file(tmp_path, tiny_model_dir):
    out = tmp_path / "online"
    _finished_trl_run(out)
    proc = _rl(tmp_path, out, tiny_model_dir, tmp_path / "typo.jsonl")
    assert proc.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'typo.jsonl'}: RL data file not found"
    weight = _rl(tmp_path, out, tiny_model_dir, tmp_path / "typo.jsonl", "--weight", "w_strr=0.0")
    assert "did you mean 'w_str'?" in weight.stderr  # weights are checked before the data is read


def test_a_rerun_that_fails_while_training_keeps_the_finished_run(tmp_path, tiny_model_dir):
    """Every check passes, the trainer fails (weights that do not load): the finished run is still there."""
    out = tmp_path / "online"
    files = _finished_trl_run(out)
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(4, seed=1))
    broken = tmp_path / "broken_model"
    broken.mkdir()
    for item in tiny_model_dir.iterdir():
        if item.is_file():
            (broken / item.name).write_bytes(item.read_bytes()[:100] if item.suffix == ".safetensors" else item.read_bytes())
    run = GRPORun(model=str(broken), data=str(data), out_dir=str(out), steps=1, num_generations=2, device="cpu")
    with pytest.raises(Exception) as raised:
        run_trl_grpo(run)
    assert not isinstance(raised.value, ThinkJError)  # it got past every check: the failure is the trainer's
    assert _unchanged(out, files)
    settings = json.loads((staging_dir(out) / "run_settings.json").read_text())
    assert settings["run"]["model"] == str(broken)  # the new run was being made beside the finished one


def test_swap_replaces_only_a_finished_folder_and_survives_a_kill_between_its_renames(tmp_path):
    out, staged = tmp_path / "run", staging_dir(tmp_path / "run")
    (out / "model").mkdir(parents=True)
    (out / "model" / "w").write_text("old")
    (staged / "model").mkdir(parents=True)
    (staged / "model" / "w").write_text("new")
    os.replace(out, out.with_name("run.replaced"))  # the swap's first rename, then a kill
    restore(out)
    assert (out / "model" / "w").read_text() == "old"
    promote(staged, out)
    assert (out / "model" / "w").read_text() == "new" and not staged.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_finished_run_is_not_reused_after_its_data_changed_in_place(tmp_path, tiny_model_dir):
    """The marker keeps the data's sha256: the same path with other content is another run (trained beside)."""
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(4, seed=1))
    out = tmp_path / "online"
    run = GRPORun(model=str(tiny_model_dir), data=str(data), out_dir=str(out), steps=1, num_generations=2,
                  device="cpu", max_completion_length=8)
    summary = run_trl_grpo(run)
    assert summary["inputs"]["data"].startswith("sha256:")
    assert run_trl_grpo(run) == summary  # same settings, same bytes: reused
    write_jsonl(data, make_pairs(4, seed=2))  # edited in place
    again = run_trl_grpo(run)
    assert again["inputs"]["data"] != summary["inputs"]["data"]
    marker = json.loads((out / DONE_MARKER).read_text())
    assert marker["inputs"] == again["inputs"] and not staging_dir(out).exists() and (out / "model").is_dir()


def _lf_data(folder: Path) -> Path:
    from thinkj.export.llamafactory import write_sft_dataset
    from thinkj.synthetic.sft_examples import judge_sft_examples

    write_sft_dataset(folder, "thinkj_judge_sft", judge_sft_examples(make_pairs(4, seed=5)))
    return folder


def _finished_lf_run(out: Path) -> dict[str, bytes]:
    from thinkj.train.launch import DONE_FILE

    files = {DONE_FILE: json.dumps({"kind": "sft", "planned": {"config": {"learning_rate": 1e-5}}}).encode(),
             "model.safetensors": b"m" * 64, "train_config.yaml": b"learning_rate: 1.0e-05\n"}
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return files


LF_STEPS = {"max_steps": 1, "per_device_train_batch_size": 2, "save_strategy": "no", "logging_steps": 1,
            "cutoff_len": 512, "plot_loss": False, "report_to": "none"}


@pytest.mark.parametrize("case", ["missing dataset_dir", "dataset not listed", "dataset file gone", "missing model"])
@pytest.mark.parametrize("force", [False, True])
def test_a_llamafactory_rerun_with_a_bad_input_leaves_the_finished_stage_alone(tmp_path, tiny_model_dir, case, force):
    from thinkj.models.profiles import ConfigError
    from thinkj.train.launch import run_stage

    files = _finished_lf_run(tmp_path / "run" / "judge_sft")
    data = _lf_data(tmp_path / "data")
    overrides = {**LF_STEPS, "model_name_or_path": str(tiny_model_dir), "dataset_dir": str(data)}
    if case == "missing dataset_dir":
        overrides["dataset_dir"] = str(tmp_path / "dataa")
    elif case == "dataset not listed":
        overrides["dataset"] = "thinkj_judge_stf"
    elif case == "dataset file gone":
        next(p for p in data.iterdir() if p.name != "dataset_info.json").unlink()
    elif case == "missing model":
        overrides["model_name_or_path"] = str(tmp_path / "no_model")
    with pytest.raises(ThinkJError) as raised:
        run_stage("sft", "judge_sft", profile="tiny", overrides=overrides, run_dir=tmp_path / "run", device="cpu",
                  force=force)
    assert "\n" not in str(raised.value)
    if case == "dataset not listed":
        assert isinstance(raised.value, ConfigError) and "did you mean thinkj_judge_sft?" in str(raised.value)
    assert _unchanged(tmp_path / "run" / "judge_sft", files)
    assert not staging_dir(tmp_path / "run" / "judge_sft").exists()
    assert not (tmp_path / "run" / ".locks").exists()  # refused before the output folder's lock was taken


def test_checkpoints_of_an_interrupted_stage_with_another_config_are_not_resumed(tmp_path, tiny_model_dir):
    """A checkpoint another config left behind would be resumed by LlamaFactory; it is removed, the stage trains."""
    from thinkj.train.launch import DONE_FILE, STARTED_FILE, run_stage

    out = tmp_path / "run" / "judge_sft"
    (out / "checkpoint-9").mkdir(parents=True)
    (out / "checkpoint-9" / "trainer_state.json").write_text("not a checkpoint of this run")
    (out / STARTED_FILE).write_text(json.dumps({"planned": {"config": {"learning_rate": 1e-5}}}))
    overrides = {**LF_STEPS, "model_name_or_path": str(tiny_model_dir), "dataset_dir": str(_lf_data(tmp_path / "data"))}
    assert run_stage("sft", "judge_sft", profile="tiny", overrides=overrides, run_dir=tmp_path / "run",
                     device="cpu") == out
    assert (out / DONE_FILE).is_file() and not (out / "checkpoint-9").exists()


def _verl_spec(tmp_path: Path, model: Path, **changes):
    from thinkj.export.verl import write_verl_parquet
    from thinkj.online.verl_launch import VerlLaunch

    data = tmp_path / "train.parquet"
    if not data.exists():
        write_verl_parquet(data, make_pairs(6, seed=3))
    fields = {"algo": "grpo", "model": str(model), "train_files": str(data), "out_dir": str(tmp_path / "online"),
              "device": "cpu", **changes}
    return VerlLaunch(**fields)


def test_verl_refuses_a_missing_data_file_before_launching(tmp_path, tiny_model_dir, capsys):
    from thinkj.online.verl_launch import main

    typo = tmp_path / "typo.parquet"
    code = main(["--algo", "grpo", "--model", str(tiny_model_dir), "--data", str(typo), "--out", str(tmp_path / "o"),
                 "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: {typo}: --data does not exist"] and not (tmp_path / "o").exists()


def test_verl_never_resumes_checkpoints_of_another_launch(tmp_path, tiny_model_dir):
    from thinkj.online.verl_launch import LAUNCH_FILE, LaunchError, check_resumable, launch_record, run
    from thinkj.records import write_json

    first = _verl_spec(tmp_path, tiny_model_dir, weights={"w_str": 0.2})
    out = Path(first.out_dir)
    (out / "checkpoints" / "global_step_5" / "actor").mkdir(parents=True)
    write_json(out / LAUNCH_FILE, launch_record(first))
    check_resumable(first, launch_record(first))  # the same launch resumes
    longer = _verl_spec(tmp_path, tiny_model_dir, weights={"w_str": 0.2}, overrides=["trainer.total_training_steps=9"])
    check_resumable(longer, launch_record(longer))  # so does the same run asked to go on for longer
    other = _verl_spec(tmp_path, tiny_model_dir, weights={"w_str": 0.0})
    with pytest.raises(LaunchError, match=r"holds checkpoints of another launch \(launch.weights: \{'w_str': 0.2\} "
                                          r"then, \{'w_str': 0.0\} now\), which verl would resume"):
        run(other)
    from thinkj.export.verl import write_verl_parquet

    write_verl_parquet(tmp_path / "train.parquet", make_pairs(6, seed=4))  # the data rewritten in place
    with pytest.raises(LaunchError, match=r"inputs.train_files: 'sha256:"):
        check_resumable(first, launch_record(first))
    assert json.loads((out / LAUNCH_FILE).read_text())["launch"]["weights"] == {"w_str": 0.2}  # refused: untouched
