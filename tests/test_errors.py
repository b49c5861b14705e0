"""Entry points report a user's mistake in one line naming file, row and field, never with a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thinkj.errors import ThinkJError, UnknownNameError, exit_on_user_error
from thinkj.rewards import get_preset

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "THINKJ_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    env.pop("THINKJ_TRACEBACK", None)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _bad_pairs(tmp_path: Path) -> Path:
    good = {"id": "p0", "source": "t", "messages": [{"role": "user", "content": "Name a fruit."}],
            "response_a": "Apple.", "response_b": "Chair.", "label": "a", "strength": 2}
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "p1", "label": "c"}) + "\n")
    return path


def test_data_prep_stage_names_file_line_and_field(tmp_path: Path) -> None:
    pairs = _bad_pairs(tmp_path)
    proc = _run(["-m", "data_prep.dedup", "--in", str(pairs), "--out", str(tmp_path / "out.jsonl")], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"error: {pairs}, line 2, field 'label'" in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_thinkj_cli_missing_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    proc = _run(["-m", "thinkj.cli", "data", "clip", str(missing), str(tmp_path / "clipped.jsonl")], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(missing) in proc.stderr.strip().splitlines()[-1]


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as err:
        get_preset("thinkj_qwn")
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    assert str(err.value).startswith("unknown reward preset 'thinkj_qwn'; registered: ")
    assert "thinkj_qwen" in str(err.value)


def test_exit_codes(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THINKJ_TRACEBACK", raising=False)

    def bad() -> None:
        raise ThinkJError("runs/x.yaml: key 'lr' must be a number")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stop:
        exit_on_user_error(bad)
    assert stop.value.code == 2
    assert capsys.readouterr().err == "error: runs/x.yaml: key 'lr' must be a number\n"
    with pytest.raises(SystemExit) as stop:
        exit_on_user_error(interrupted)
    assert stop.value.code == 130
    assert "rerun the same command to resume" in capsys.readouterr().err
    assert exit_on_user_error(lambda: 7) == 7
    # A programming error is not a user error: it keeps its traceback.
    with pytest.raises(ZeroDivisionError):
        exit_on_user_error(lambda: 1 / 0)
    monkeypatch.setenv("THINKJ_TRACEBACK", "1")
    with pytest.raises(ThinkJError):
        exit_on_user_error(bad)
