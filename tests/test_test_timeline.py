"""scripts/speed/test_timeline.py: per-worker busy time and idle tail from conftest's timeline lines."""

from __future__ import annotations

import pytest
from conftest import load_script

timeline = load_script("scripts/speed/test_timeline.py")


def test_busy_time_idle_tail_and_a_test_without_its_end(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("100.0\tgw0\tstart\ttests/a.py::x\n100.0\tgw1\tstart\ttests/b.py::y\n"
                    "130.0\tgw0\tend\ttests/a.py::x\n110.0\tgw1\tend\ttests/b.py::y\n"
                    "130.0\tgw0\tstart\ttests/a.py::z\n")  # z never ended: left out, not counted as busy
    spans = timeline.read_timeline(path)
    assert sorted(s[1] for s in spans) == ["tests/a.py::x", "tests/b.py::y"]
    text = timeline.summary(spans, top=5)
    assert "wall 30 s, 2 tests" in text
    assert "gw0: busy 30 s, idle tail 0 s" in text and "gw1: busy 10 s, idle tail 20 s" in text


def test_a_malformed_line_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("100.0\tgw0\tstart\ttests/a.py::x\nnot a timeline line\n")
    with pytest.raises(SystemExit, match=r"t\.tsv:2: expected"):
        timeline.read_timeline(path)
