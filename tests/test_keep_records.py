"""experiments/keep_records.py: a run's compare.json becomes a records folder whose table recomputes.

The run is made on disk the way the demo lays it out (relative paths, from the run's folder), its compare.json by
``thinkj eval compare``'s own function; the folder is then read back by experiments/recompute.py --check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_script

keep_records = load_script("experiments/keep_records.py")
recompute = load_script("experiments/recompute.py")

QUESTIONS = {"test-0": "Capital of France?", "test-1": "Capital of France?", "test-2": "What does a cow say?"}
RIGHT = {"base": set(), "init": {("test-0", "original"), ("test-0", "swapped"), ("test-2", "original")}}


def _run(root: Path, monkeypatch, complete: bool = True) -> Path:
    """runs/demo/{task/test.jsonl, eval/<row>/synthetic/*, compare/compare.json} under root, paths relative."""
    from thinkj.evaluation.row_compare import compare_rows

    root.mkdir(exist_ok=True)
    monkeypatch.chdir(root)
    task = Path("runs/demo/task")
    task.mkdir(parents=True)
    (task / "test.jsonl").write_text("".join(
        json.dumps({"id": i, "source": "facts", "messages": [{"role": "user", "content": q}], "response_a": "right",
                    "response_b": "wrong", "label": "a"}) + "\n" for i, q in QUESTIONS.items()))
    folders = {}
    for row, right in RIGHT.items():
        folder = Path("runs/demo/eval") / row
        (folder / "synthetic").mkdir(parents=True)
        lines = []
        for item in QUESTIONS:
            for order, gold in (("original", "a"), ("swapped", "b")):
                ok = (item, order) in right
                lines.append(json.dumps({"item_id": item, "order": order, "gold": gold, "correct": ok,
                                         "verdict": gold if ok else None, "well_formed": ok, "sample": 0,
                                         "output": "Response (a) is better." if ok else "I cannot tell."}))
        (folder / "synthetic" / "synthetic.judgments.jsonl").write_text("\n".join(lines) + "\n")
        (folder / "synthetic" / "synthetic.results.json").write_text(json.dumps(
            {"complete": complete or row == "base", "metrics": {"missing": [] if complete else ["test-2"]},
             "provenance": {"model_path": f"models/{row}", "data": {"source": str(task / "test.jsonl")}}}))
        folders[row] = folder
    compare_rows(folders, "runs/demo/compare")
    return root / "runs/demo/compare/compare.json"


def test_the_kept_folder_recomputes_to_the_runs_own_rows(tmp_path, monkeypatch, capsys):
    compare_json = _run(tmp_path / "clone", monkeypatch)
    monkeypatch.chdir(tmp_path)  # keep from another folder: the run's relative paths resolve from compare.json
    out = tmp_path / "results" / "demo_seed0"
    assert keep_records.main([str(compare_json), str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["base.judgments.jsonl", "init.judgments.jsonl", "pairs.jsonl",
                                                   "provenance.json", "table.md"]
    table = (out / "table.md").read_text()
    assert "| init | 6 | 50.0 [18.8, 81.2] | 33.3 | 50.0 |" in table  # 3 of 6 right; one item right in both orders
    # three judgments right only in init, over two questions (+2 and +1): 2 of 4 sign patterns reach |3|
    assert "| init vs base | - | 6 | 3 | 0 | +50.0" in table and "| 0.5 (cluster_sign_flip, 2) |" in table
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["rows"]["init"]["model_path"] == "models/init"
    capsys.readouterr()
    assert recompute.main([str(out), "--check"]) == 0
    assert capsys.readouterr().out.endswith("table.md: recomputed, identical\n")


def test_an_incomplete_evaluation_is_refused_and_nothing_written(tmp_path, monkeypatch, capsys):
    compare_json = _run(tmp_path, monkeypatch, complete=False)
    assert keep_records.main([str(compare_json), str(tmp_path / "kept")]) == 2
    err = capsys.readouterr().err
    assert "init: the evaluation is incomplete (missing ['test-2'])" in err and "synthetic.results.json" in err
    assert not (tmp_path / "kept").exists()


@pytest.mark.parametrize("fault", ["metrics", "item", "missing"])
def test_a_copy_that_is_not_the_run_is_refused(tmp_path, monkeypatch, capsys, fault):
    compare_json = _run(tmp_path, monkeypatch)
    document = json.loads(compare_json.read_text())
    judgments = tmp_path / document["judgments"]["init"]
    if fault == "metrics":  # compare.json's row is not what its records give
        document["rows"]["init"]["accuracy"] = 66.7
        compare_json.write_text(json.dumps(document))
        expected = "row init: the copied records give"
    elif fault == "item":  # a judgment of an item the pairs file does not hold
        judgments.write_text(judgments.read_text().replace('"test-2"', '"test-9"'))
        expected = "'test-9' is not in"
    else:
        judgments.with_name("synthetic.results.json").unlink()
        expected = "synthetic.results.json: no such file"
    assert keep_records.main([str(compare_json), str(tmp_path / "kept")]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "kept").exists() and not (tmp_path / "kept.partial").exists()
