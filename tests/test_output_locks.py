"""One standalone command at a time writes an output folder; a second, started meanwhile, waits, then reuses.

- `thinkj train sft|dpo|rm` (:func:`thinkj.train.launch.train_lock`): two shells (or a pipeline and a shell) that
  start the same stage into the same ``--run-dir`` used to train side by side into one folder, the same checkpoints
  and completion record written by two runs. Now the second waits, then finds the finished run and keeps it.
- `thinkj eval run` (``<out>/.locks/<benchmark>.lock``): two runs of one benchmark into one ``--out`` used to load two
  judges and generate every answer twice. Now the second waits, then takes every answer from the cache.

Real processes: LlamaFactory's own training, and the hf backend, on the tiny model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from thinkj.train.launch import DONE_FILE, LaunchPlan, train_lock

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _data(folder: Path) -> Path:
    from thinkj.export.llamafactory import write_sft_dataset
    from thinkj.synthetic.fruit_task import make_pairs
    from thinkj.synthetic.sft_examples import judge_sft_examples

    write_sft_dataset(folder, "thinkj_judge_sft", judge_sft_examples(make_pairs(16, seed=5)))
    return folder


def _train(run_dir: Path, model: Path, data: Path) -> subprocess.Popen:
    overrides = [f"model_name_or_path={model}", f"dataset_dir={data}", "max_steps=6", "per_device_train_batch_size=2",
                 "save_strategy=no", "logging_steps=1", "cutoff_len=512", "plot_loss=false", "report_to=none"]
    return subprocess.Popen([sys.executable, "-m", "thinkj.cli", "train", "sft", "judge_sft", "--model", "tiny",
                             "--device", "cpu", "--run-dir", str(run_dir), *overrides],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_second_launch_into_the_same_folder_waits_then_keeps_the_finished_run(tmp_path, tiny_model_dir):
    """Both start at once: whichever takes the folder first trains, the other waits for it and trains nothing."""
    run_dir, data = tmp_path / "run", _data(tmp_path / "data")
    out = run_dir / "judge_sft"
    launches = [_train(run_dir, tiny_model_dir, data) for _ in range(2)]
    outputs = [proc.communicate(timeout=500)[0] for proc in launches]
    assert [proc.returncode for proc in launches] == [0, 0], "\n".join(outputs)
    trained = [text for text in outputs if "global batch" in text]
    waited = [text for text in outputs if "global batch" not in text]
    assert len(trained) == 1 and len(waited) == 1, "\n".join(outputs)  # before: both trained into one folder
    assert f"holds {run_dir / '.locks' / 'judge_sft.lock'}; waiting for it to finish" in waited[0], waited[0]
    assert "is finished with this config" in waited[0], waited[0]
    assert json.loads((out / DONE_FILE).read_text())["kind"] == "sft"


def test_each_node_of_a_multi_node_stage_has_its_own_lock(tmp_path):
    """Every node runs the launch into the same folder; one lock would let node 0's torchrun wait for ever for node 1,
    which waits for node 0's lock."""
    plan = LaunchPlan("sft", {}, tmp_path / "judge_sft", "gpu", 16, ["torchrun"], {})
    assert train_lock(plan) == tmp_path / ".locks" / "judge_sft.lock"
    nodes = [train_lock(LaunchPlan("sft", {}, tmp_path / "judge_sft", "gpu", 16, ["torchrun"],
                                   {"LF_NNODES": "2", "NODE_RANK": rank})) for rank in "01"]
    assert nodes == [tmp_path / ".locks" / "judge_sft.node0.lock", tmp_path / ".locks" / "judge_sft.node1.lock"]


def _evaluate(out: Path, model: Path, pairs: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "thinkj.cli", "eval", "run", "synthetic", "--model", str(model),
                             "--data", str(pairs), "--max-new-tokens", "48", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_second_eval_of_the_same_benchmark_into_the_same_folder_waits_then_generates_nothing(tmp_path,
                                                                                                tiny_model_dir):
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, make_pairs(12, seed=3))
    out = tmp_path / "eval"
    runs = [_evaluate(out, tiny_model_dir, pairs) for _ in range(2)]
    outputs = [proc.communicate(timeout=500)[0] for proc in runs]
    assert [proc.returncode for proc in runs] == [0, 0], "\n".join(outputs)
    generated = [text for text in outputs if "synthetic: 0 answers from the cache, 24 generated" in text]
    reused = [text for text in outputs if "synthetic: 24 answers from the cache, 0 generated" in text]
    assert len(generated) == 1 and len(reused) == 1, "\n".join(outputs)  # before: both generated all 24
    assert f"holds {out / '.locks' / 'synthetic.lock'}; waiting for it to finish" in reused[0], reused[0]


def test_a_second_trl_launch_into_the_same_out_waits_then_keeps_the_finished_run(tmp_path, tiny_model_dir):
    """`thinkj train rl --engine trl` (and verl's launch, the same lock: ``thinkj.locks.output_lock``)."""
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(8, seed=4))
    out = tmp_path / "rl"
    runs = [subprocess.Popen([sys.executable, "-m", "thinkj.cli", "train", "rl", "--engine", "trl", "--model",
                              str(tiny_model_dir), "--data", str(data), "--out", str(out), "--steps", "2",
                              "--num-generations", "2", "--device", "cpu"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=500)[0] for proc in runs]
    assert [proc.returncode for proc in runs] == [0, 0], "\n".join(outputs)
    trained = [text for text in outputs if "# TRL step: " in text]
    assert len(trained) == 1, "\n".join(outputs)  # before: both trained into one folder's checkpoints
    waited = next(text for text in outputs if text is not trained[0])
    assert f"holds {tmp_path / '.locks' / 'rl.lock'}; waiting for it to finish" in waited, waited
    assert (out / "model").is_dir()


def test_a_verl_launch_takes_the_out_lock_before_it_reads_or_writes_out(tmp_path, tiny_model_dir, capsys):
    """While another launch holds ``--out``, a verl launch waits before its resume check and its launch record (here
    that check then refuses: the folder holds another launch's checkpoints), so no verl starts into it meanwhile."""
    import threading

    from thinkj.export.verl import write_verl_parquet
    from thinkj.locks import exclusive, output_lock
    from thinkj.online.verl_launch import LAUNCH_FILE, LaunchError, VerlLaunch, launch_record, run
    from thinkj.records import write_json
    from thinkj.synthetic.fruit_task import make_pairs

    write_verl_parquet(tmp_path / "train.parquet", make_pairs(6, seed=3))

    def spec(w_str: float) -> VerlLaunch:
        return VerlLaunch(algo="grpo", model=str(tiny_model_dir), train_files=str(tmp_path / "train.parquet"),
                          out_dir=str(tmp_path / "online"), device="cpu", weights={"w_str": w_str})

    out = tmp_path / "online"
    (out / "checkpoints" / "global_step_5" / "actor").mkdir(parents=True)
    write_json(out / LAUNCH_FILE, launch_record(spec(0.2)))
    raised: list[BaseException] = []

    def launch() -> None:
        try:
            run(spec(0.0))
        except BaseException as err:  # noqa: BLE001 - handed to the test's thread
            raised.append(err)

    said = ""
    with exclusive(output_lock(out), "the first launch"):
        waiter = threading.Thread(target=launch)
        waiter.start()
        while "waiting for it to finish" not in said and waiter.is_alive():
            waiter.join(timeout=0.2)
            said += capsys.readouterr().out
        time.sleep(1.0)
        assert waiter.is_alive() and not raised, raised  # held at the lock, its resume check not yet made
    waiter.join(timeout=120)
    assert f"holds {tmp_path / '.locks' / 'online.lock'}; waiting for it to finish" in said, said
    assert len(raised) == 1 and isinstance(raised[0], LaunchError) and "another launch" in str(raised[0])
