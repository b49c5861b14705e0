"""Summaries and other JSON outputs are written atomically: a writer that fails before its rename leaves the
previous file as it was and no temp file behind, and two writers of one file never mix their bytes.

Every ``*.summary.json`` writer goes through :func:`thinkj.records.write_json` (or ``write_jsonl``), which use
:mod:`thinkj.atomic`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from thinkj.atomic import write_text_atomic
from thinkj.records import write_json, write_jsonl


def _failing_replace(monkeypatch, only: str | None = None):
    real = os.replace

    def replace(src, dst):
        if only is None or Path(dst).name == only:
            raise OSError("disk went away before the rename")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_failed_rename_keeps_the_previous_summary_and_leaves_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "clip.summary.json"
    write_json(path, {"stage": "clip", "n_in": 3, "n_out": 2})
    before = path.read_text()
    _failing_replace(monkeypatch)
    with pytest.raises(OSError, match="before the rename"):
        write_json(path, {"stage": "clip", "n_in": 30, "n_out": 20})
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.summary.json"]  # no temp file left over


def test_unserialisable_document_changes_nothing(tmp_path):
    path = tmp_path / "seed_set.summary.json"
    write_json(path, {"n_out": 1})
    loop: dict = {}
    loop["self"] = loop  # json.dumps raises on a circular document
    with pytest.raises(ValueError):
        write_json(path, loop)
    assert json.loads(path.read_text()) == {"n_out": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["seed_set.summary.json"]


def test_rows_failing_midway_leave_the_previous_file_and_no_partial_one(tmp_path):
    path = tmp_path / "kept.jsonl"
    write_jsonl(path, [{"i": 0}, {"i": 1}])

    def rows():
        yield {"i": 10}
        raise RuntimeError("row 2 could not be made")

    with pytest.raises(RuntimeError, match="row 2"):
        write_jsonl(path, rows())
    assert path.read_text() == '{"i": 0}\n{"i": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["kept.jsonl"]


def test_two_writers_of_one_file_never_mix(tmp_path):
    """A second writer finishing while the first is still writing (two processes on one run folder): each
    writes its own temp file, so the file is always one writer's whole content -- here the last one's."""
    path = tmp_path / "pairs_log.jsonl"

    def first():
        yield {"writer": 1, "row": 0}
        write_jsonl(path, [{"writer": 2, "row": r} for r in range(3)])  # the other writer, start to finish
        assert [json.loads(x)["writer"] for x in path.read_text().splitlines()] == [2, 2, 2]
        yield {"writer": 1, "row": 1}

    assert write_jsonl(path, first()) == 2
    assert [json.loads(x) for x in path.read_text().splitlines()] == [{"writer": 1, "row": 0}, {"writer": 1, "row": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["pairs_log.jsonl"]


def test_written_file_has_the_usual_permissions(tmp_path):
    path = write_text_atomic(tmp_path / "x.json", "{}\n")
    umask = os.umask(0)
    os.umask(umask)
    assert path.read_text() == "{}\n" and (path.stat().st_mode & 0o777) == (0o666 & ~umask)


