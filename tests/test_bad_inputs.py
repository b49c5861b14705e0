"""Bad inputs to every entry point: exit 2, one ``error: …`` line naming the file / row / option / variable, no
traceback, and no output left behind. Ctrl-C on ``thinkj …`` prints the promised interrupt line.

Most cases run in-process through the real entry points (``thinkj.cli``, ``python -m thinkj.pipeline``,
``data_prep.*``) under ``exit_on_user_error`` -- what ``main`` runs -- so the table stays fast; the interrupt and
the failed pipeline stage run as real subprocesses.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from thinkj.errors import exit_on_user_error, run_typer
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = str(Path(sys.executable).parent)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _files(tmp: Path) -> dict[str, Path]:
    """Inputs the cases point at: good pairs, a binary file, a file with a lone surrogate, a bad YAML spec, …"""
    pairs = tmp / "pairs.jsonl"
    write_jsonl(pairs, make_pairs(3, seed=0))
    binary = tmp / "binary.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    surrogate = tmp / "surrogate.jsonl"
    surrogate.write_text('{"pair": {"id": "x"}, "reasoning": "bad \\ud800 text"}\n')
    spec = tmp / "spec.yaml"
    spec.write_text("name: s\nsteps:\n  - echo {w}\n  results: [x\n")
    folder = tmp / "a_folder"
    folder.mkdir()
    a_file = tmp / "a_file"
    a_file.write_text("x")
    bad_rl = tmp / "bad_rl.jsonl"
    bad_rl.write_text(json.dumps({**make_pairs(1, seed=1)[0].to_dict(), "label": "c"}) + "\n")
    from thinkj.prompts import judge_output

    pair = make_pairs(1, seed=0)[0]
    clipped = tmp / "clipped.jsonl"
    write_jsonl(clipped, [{"pair": pair.to_dict(), "explanation": "x", "target": judge_output("x", pair.label, 2),
                           "verdict": pair.label, "strength": 2}])
    hh = tmp / "hh_bad.jsonl"
    hh.write_text(json.dumps({"chosen": "no turns at all", "rejected": 3}) + "\n")
    return {"pairs": pairs, "binary": binary, "surrogate": surrogate, "spec": spec, "folder": folder, "file": a_file,
            "bad_rl": bad_rl, "clipped": clipped, "hh": hh, "out": tmp / "out" / "o.jsonl", "outdir": tmp / "outdir"}


# (case id, entry point, argv (with {name} for _files), env, text the error line must hold, path that must not exist)
CASES = [
    # settings of the reproduction pipeline, checked before stage 1
    ("pipeline DRY_RUN=yes", "pipeline", [], {"DRY_RUN": "yes"}, "DRY_RUN='yes'", "{outdir}"),
    ("pipeline TP not a number", "pipeline", [], {"TP": "two"}, "TP='two'", "{outdir}"),
    ("pipeline unknown preset", "pipeline", [], {"REWARD_PRESET": "thinkj_qwn"}, "REWARD_PRESET='thinkj_qwn'", "{outdir}"),
    ("pipeline unknown benchmark", "pipeline", [], {"BENCHMARKS": "rewardbnch"}, "BENCHMARKS='rewardbnch'", "{outdir}"),
    ("pipeline unknown algorithm", "pipeline", [], {"RL_ALGO": "dpo"}, "RL_ALGO='dpo'", "{outdir}"),
    ("pipeline unknown table", "pipeline", [], {"TABLES": "4 99"}, "TABLES='4 99'", "{outdir}"),
    ("pipeline unknown source", "pipeline", [], {"TRAIN_SOURCE": "reddit"}, "TRAIN_SOURCE='reddit'", "{outdir}"),
    ("pipeline non-finite weight", "pipeline", [], {"W_STR": "inf"}, "W_STR='inf'", "{outdir}"),
    ("pipeline weight the preset lacks", "pipeline", [], {"REWARD_PRESET": "cot_binary", "W_STR": "0.1"}, "W_STR='0.1'",
     "{outdir}"),
    ("pipeline bad limit", "pipeline", [], {"EVAL_LIMIT": "-5"}, "EVAL_LIMIT='-5'", "{outdir}"),
    ("pipeline bad dedup threshold", "pipeline", [], {"DEDUP_THRESHOLD": "0"}, "DEDUP_THRESHOLD='0'", "{outdir}"),
    ("pipeline teacher key not set", "pipeline", [], {"TEACHER_KEY_ENV": "THINKJ_NO_SUCH_KEY"},
     "TEACHER_KEY_ENV=THINKJ_NO_SUCH_KEY: the variable THINKJ_NO_SUCH_KEY", "{outdir}"),
    # sweeps
    ("sweep unknown --set key", "thinkj", ["sweep", "experiments/table8.yaml", "--set", "w_sttr=0.5", "--sweep-dir",
                                           "{outdir}"], {}, "--set w_sttr", "{outdir}"),
    ("sweep bad --set value", "thinkj", ["sweep", "experiments/table8.yaml", "--set", "w_str=high", "--sweep-dir",
                                         "{outdir}"], {}, "--set w_str='high': must be a number", "{outdir}"),
    ("sweep malformed --set", "thinkj", ["sweep", "experiments/table8.yaml", "--set", "w_str", "--sweep-dir", "{outdir}"],
     {}, "--set 'w_str': expected key=value", "{outdir}"),
    ("sweep --only matches nothing", "thinkj", ["sweep", "experiments/table8.yaml", "--only", "nope", "--sweep-dir",
                                                "{outdir}"], {}, "--only 'nope' matches no run", "{outdir}"),
    ("sweep ray without a cluster", "thinkj", ["sweep", "experiments/table8.yaml", "--launcher", "ray", "--ray-address",
                                               "127.0.0.1:{port}", "--sweep-dir", "{outdir}"], {},
     "no Ray cluster answers", "{outdir}"),
    ("sweep bad YAML", "thinkj", ["sweep", "{spec}", "--sweep-dir", "{outdir}"], {}, "spec.yaml, line 4: not valid YAML",
     "{outdir}"),
    # numeric options
    ("difficulty --k 0", "difficulty", ["--in", "{pairs}", "--out", "{out}", "--model", "m", "--k", "0"], {},
     "--k must be >= 1", "{out}"),
    ("difficulty --min-failures > k", "difficulty", ["--in", "{pairs}", "--out", "{out}", "--model", "m", "--k", "3",
                                                     "--min-failures", "4"], {}, "--min-failures must be <= 3", "{out}"),
    ("difficulty negative temperature", "difficulty", ["--in", "{pairs}", "--out", "{out}", "--model", "m",
                                                       "--temperature", "-0.5"], {}, "--temperature must be >= 0", "{out}"),
    ("difficulty --in X --out X", "difficulty", ["--in", "{pairs}", "--out", "{pairs}", "--model", "m"], {},
     "is the same file as --in", "{out}"),
    ("dedup --threshold above 1", "dedup", ["--in", "{pairs}", "--out", "{out}", "--threshold", "1.5"], {},
     "--threshold must be <= 1", "{out}"),
    ("dedup --threshold 0", "dedup", ["--in", "{pairs}", "--out", "{out}", "--threshold", "0"], {},
     "--threshold must be > 0", "{out}"),
    ("dedup unknown --device", "dedup", ["--in", "{pairs}", "--out", "{out}", "--device", "tpu"], {},
     "--device 'tpu': unknown device", "{out}"),
    ("dedup --in X --out X", "dedup", ["--in", "{pairs}", "--out", "{pairs}"], {}, "is the same file as --in", "{out}"),
    ("eval --limit 0", "thinkj", ["eval", "run", "rewardbench", "--model", "m", "--limit", "0", "--out", "{outdir}"], {},
     "--limit must be >= 1", "{outdir}"),
    ("eval --chunk 0", "thinkj", ["eval", "run", "rewardbench", "--model", "m", "--chunk", "0", "--out", "{outdir}"], {},
     "--chunk must be >= 1", "{outdir}"),
    ("eval --max-new-tokens 0", "thinkj", ["eval", "run", "rewardbench", "--model", "m", "--max-new-tokens", "0", "--out",
                                           "{outdir}"], {}, "--max-new-tokens must be >= 1", "{outdir}"),
    ("eval negative temperature", "thinkj", ["eval", "run", "rewardbench", "--model", "m", "--temperature", "-1",
                                             "--out", "{outdir}"], {}, "--temperature must be >= 0", "{outdir}"),
    ("rl --steps 0", "thinkj", ["train", "rl", "--model", "m", "--data", "{pairs}", "--steps", "0", "--out", "{outdir}"],
     {}, "--steps must be >= 1", "{outdir}"),
    ("rl non-finite weight", "thinkj", ["train", "rl", "--model", "m", "--data", "{pairs}", "--weight", "w_str=nan",
                                        "--out", "{outdir}"], {}, "--weight w_str must be a finite number", "{outdir}"),
    ("sft --global-batch 0", "thinkj", ["train", "sft", "judge_sft", "--global-batch", "0", "--run-dir", "{outdir}"], {},
     "--global-batch must be >= 1", "{outdir}"),
    ("sft unknown --device", "thinkj", ["train", "sft", "judge_sft", "--device", "tpu", "--run-dir", "{outdir}"], {},
     "--device 'tpu'", "{outdir}"),
    ("rewards non-finite weight", "thinkj", ["rewards", "score", "thinkj_qwen", "--gt", "a", "--text", "x", "--set",
                                             "w_str=NaN"], {}, "--set w_str must be a finite number", "{outdir}"),
    # one error style
    ("binary input file", "thinkj", ["data", "clip", "{binary}", "{out}"], {}, "binary.jsonl, line 1: not UTF-8", "{out}"),
    ("folder where a file is expected", "thinkj", ["data", "clip", "{folder}", "{out}"], {}, "a_folder: is a folder",
     "{out}"),
    ("file where a folder is expected", "thinkj", ["data", "seed-set", "{clipped}", "{file}"], {},
     "a_file: OUT_DIR is an existing file, expected a folder", "{outdir}"),
    ("lone surrogate caught at read", "thinkj", ["data", "clip", "{surrogate}", "{out}"], {},
     "surrogate.jsonl, line 1: holds a lone surrogate", "{out}"),
    ("missing local model folder", "thinkj", ["eval", "run", "rewardbench", "--model", "{outdir}/no/model", "--out",
                                              "{outdir}"], {}, "no/model: model folder does not exist", "{outdir}"),
    ("hub unreachable offline", "difficulty", ["--in", "{pairs}", "--out", "{out}", "--model", "no-org/no-model"],
     {"HF_HUB_OFFLINE": "1"}, "no-org/no-model: model is not a local folder and not in the hub cache", "{out}"),
    ("benchmark on the hub, hub offline", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--out",
                                                    "{outdir}"], {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
     "Couldn't reach 'allenai/reward-bench' on the Hub", "{outdir}"),
    ("template of the wrong kind", "thinkj", ["eval", "run", "rewardbench", "--model", "m", "--template",
                                              "critic_strength_v1", "--out", "{outdir}"], {},
     "--template critic_strength_v1: a critic template", "{outdir}"),
    ("unknown --backend-arg", "thinkj", ["eval", "run", "rewardbench", "--model", "m", "--backend-arg", "tp=2", "--out",
                                         "{outdir}"], {}, "--backend-arg tp: the hf backend takes no such argument",
     "{outdir}"),
    ("malformed --backend-arg", "difficulty", ["--in", "{pairs}", "--out", "{out}", "--model", "m", "--backend-arg", "tp"],
     {}, "--backend-arg 'tp': expected key=value", "{out}"),
    ("malformed --gt", "thinkj", ["rewards", "score", "thinkj_qwen", "--gt", "{{\"label\": ", "--text", "x"], {},
     "--gt '{\"label\": ': not valid JSON", "{outdir}"),
    ("--gt that does not fit the reward", "thinkj", ["rewards", "score", "thinkj_qwen", "--gt", "{{\"label\": \"q\"}}",
                                                     "--text", "x"], {}, "--gt '{\"label\": \"q\"}': ground_truth.label",
     "{outdir}"),
    ("malformed --set", "thinkj", ["rewards", "score", "thinkj_qwen", "--gt", "a", "--text", "x", "--set", "w_str"], {},
     "--set 'w_str': expected key=value", "{outdir}"),
    ("port out of range", "thinkj", ["data", "teacher-serve", "--port", "70000"], {}, "--port must be <= 65535",
     "{outdir}"),
    ("usage error is one line too", "thinkj", ["eval", "run", "rewardbench", "--limit", "many"], {},
     "Invalid value for '--limit'", "{outdir}"),
    ("argparse usage error is one line", "dedup", ["--in", "{pairs}", "--out", "{out}", "--threshold", "high"], {},
     "argument --threshold: invalid float value: 'high'", "{out}"),
    ("clip --in X --out X", "thinkj", ["data", "clip", "{clipped}", "{clipped}"], {}, "is the same file as TRACES",
     "{out}"),
    ("seed-set bad --rl-pairs writes nothing", "thinkj", ["data", "seed-set", "{clipped}", "{outdir}", "--rl-pairs",
                                                          "{bad_rl}"], {}, "bad_rl.jsonl, line 1, field 'label'",
     "{outdir}"),
]


def _entry(kind: str, argv: list[str]):
    if kind == "thinkj":
        from thinkj.cli import _register_subcommands, app

        if not any(g.name == "train" for g in app.registered_groups):
            _register_subcommands()
        sys.argv = ["thinkj", *argv]
        return lambda: run_typer(app)
    if kind == "pipeline":
        from thinkj.pipeline.run import main
        return lambda: main(argv)
    module = {"difficulty": "data_prep.difficulty", "dedup": "data_prep.dedup"}[kind]
    import importlib

    return lambda: importlib.import_module(module).main(argv)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(case, tmp_path, monkeypatch, capsys):
    name, kind, argv, env, expected, leftover = case
    files = _files(tmp_path)
    fill = {**{k: str(v) for k, v in files.items()}, "port": str(_closed_port())}
    argv = [a.format(**fill) for a in argv]
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("RUN_DIR", str(files["outdir"]))
    monkeypatch.setenv("PATH", f"{VENV_BIN}:{os.environ['PATH']}")
    monkeypatch.delenv("THINKJ_TRACEBACK", raising=False)
    for var in ("W_ACC", "W_FMT", "W_STR", "DRY_RUN"):
        monkeypatch.delenv(var, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit) as stop:
        exit_on_user_error(_entry(kind, argv))
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert stop.value.code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert expected in lines[0], lines[0]
    assert not Path(leftover.format(**fill)).exists()


def test_failed_pipeline_stage_names_the_stage_and_its_log(tmp_path):
    files = _files(tmp_path)
    env = {**os.environ, "RUN_DIR": str(files["outdir"]), "TRAIN_SOURCE": "hh_rlhf", "SOURCE_LOCATION": str(files["hh"]),
           "PYTHONPATH": str(ROOT), "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "DEEPSEEK_API_KEY": "unused-here",
           "NNODES": "1"}  # NNODES=2 without a Ray cluster is refused before stage 1
    env.pop("THINKJ_TRACEBACK", None)
    proc = subprocess.run([sys.executable, "-m", "thinkj.pipeline"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    log = files["outdir"] / "logs" / "load.log"
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"error: stage load failed (exit 2); its log: {log}"
    assert "hh_bad.jsonl" in log.read_text()  # the stage's own one-line error is in its log
    assert not (files["outdir"] / "data" / "source.jsonl").exists() and not list(files["outdir"].rglob("*.done.json"))


def test_ctrl_c_prints_the_interrupt_line(tmp_path):
    from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer

    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, make_pairs(2, seed=0))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with TeacherServer(TeacherConfig(delay=8.0)) as server:  # every answer takes 8 s: the command is mid-call
        proc = subprocess.Popen([sys.executable, "-m", "thinkj.cli", "data", "traces", str(pairs),
                                 str(tmp_path / "traces.jsonl"), "--base-url", server.base_url, "--api-key-env", "",
                                 "--model", "r1-scripted"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                # a shell that starts the suite in the background leaves SIGINT ignored, and the child
                                # would inherit that: give it the default disposition a terminal's Ctrl-C meets
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 60
        while not server.counts()["requests"] and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted — rerun the same command to resume"), err
    assert "Traceback" not in err
