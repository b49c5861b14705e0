"""A data stage that could not do all its work says so with a non-zero exit, never an empty or partial "success".

``thinkj data traces`` runs against the project's scripted teacher served over real HTTP on 127.0.0.1. On the
old code a missing key, a dead teacher or failed calls all exited 0 (an empty or short ``traces.jsonl``) and the
pipeline marked the stage done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from thinkj.prompts import get_template
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs
from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer, prompt_key

ROOT = Path(__file__).resolve().parent.parent


def _thinkj(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("THINKJ_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "thinkj.cli", *args], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=300)


def _traces(pairs: Path, out: Path, base_url: str, *extra: str, env=None) -> subprocess.CompletedProcess:
    return _thinkj("data", "traces", str(pairs), str(out), "--model", "r1-scripted", "--base-url", base_url,
                   "--max-retries", "0", "--timeout", "5", "--concurrency", "4", *extra, env=env)


def test_missing_key_fails_before_the_first_call(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, make_pairs(4, seed=2))
    with TeacherServer(TeacherConfig()) as server:
        proc = _traces(pairs, tmp_path / "t" / "traces.jsonl", server.base_url, "--api-key-env", "THINKJ_NO_SUCH_KEY")
        asked = server.counts()["requests"]
    assert proc.returncode == 2 and not asked
    assert proc.stderr.strip().splitlines() == ["error: --api-key-env THINKJ_NO_SUCH_KEY: the environment variable "
                                                "THINKJ_NO_SUCH_KEY holding the teacher's API key is not set (pass "
                                                "--api-key-env '' for a server that needs no key)"]
    assert not (tmp_path / "t").exists()


def test_failed_calls_exit_nonzero_and_a_rerun_asks_only_for_them(tmp_path):
    pairs = make_pairs(30, seed=8)
    src, out = tmp_path / "pairs.jsonl", tmp_path / "traces" / "traces.jsonl"
    write_jsonl(src, pairs)
    convs = {p.id: prompt_key(get_template("judge_strength_v2").render(p)) for p in pairs}
    # A teacher that dies on some prompts (500 on every try): those calls fail, the others succeed.
    with TeacherServer(TeacherConfig(poison_rate=0.3, fault_seed=2, error_rate=0.0)) as sick:
        first = _traces(src, out, sick.base_url, "--api-key-env", "")
        answered = {k for k, v in sick.counts()["answered"].items() if v}
    failed = set(convs.values()) - answered
    assert 0 < len(failed) < len(pairs)
    assert first.returncode == 1, first.stderr[-2000:]
    assert first.stderr.strip().splitlines()[-1].startswith(f"error: {out}: {len(failed)} of 30 teacher calls failed")
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["failed_calls"] == len(failed) and len(out.read_text().splitlines()) == summary["n_out"] > 0
    # the teacher is back at the same endpoint (the cache keys on it: another --base-url is another teacher)
    with TeacherServer(TeacherConfig(error_rate=0.0), port=sick.port) as healthy:
        second = _traces(src, out, healthy.base_url, "--api-key-env", "")
        asked = set(healthy.counts()["requests"])
    assert second.returncode == 0, second.stderr[-2000:]
    assert asked == failed  # only the failed items were asked again
    assert len(out.read_text().splitlines()) == 30


def test_dead_teacher_writes_nothing_useful_and_exits_nonzero(tmp_path):
    src, out = tmp_path / "pairs.jsonl", tmp_path / "traces.jsonl"
    write_jsonl(src, make_pairs(3, seed=1))
    with TeacherServer(TeacherConfig()) as server:
        url = server.base_url
    proc = _traces(src, out, url, "--api-key-env", "")  # nothing listens on that port any more
    assert proc.returncode == 1 and "3 of 3 teacher calls failed" in proc.stderr and "Traceback" not in proc.stderr


def test_clip_refuses_empty_input(tmp_path):
    empty = tmp_path / "traces.jsonl"
    empty.write_text("")
    proc = _thinkj("data", "clip", str(empty), str(tmp_path / "clipped.jsonl"))
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: {empty}: no traces to clip (the file is empty)"
    assert not (tmp_path / "clipped.jsonl").exists()


def test_seed_set_writes_nothing_before_a_bad_rl_pairs_file_is_read(tmp_path):
    from thinkj.prompts import judge_output

    pair = make_pairs(1, seed=0)[0]
    clipped = tmp_path / "clipped.jsonl"
    write_jsonl(clipped, [{"pair": pair.to_dict(), "explanation": "x", "target": judge_output("x", pair.label, 2),
                           "verdict": pair.label, "strength": 2}])
    bad = tmp_path / "rl.jsonl"
    bad.write_text(json.dumps({**pair.to_dict(), "label": "c"}) + "\n")
    out = tmp_path / "seed"
    proc = _thinkj("data", "seed-set", str(clipped), str(out), "--rl-pairs", str(bad))
    assert proc.returncode == 2 and proc.stderr.strip().startswith(f"error: {bad}, line 1, field 'label'")
    assert not out.exists()
