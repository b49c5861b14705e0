from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinkj.records import PreferencePair, RecordError, load_pairs, write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

ROW = {"id": "x1", "source": "t", "messages": [{"role": "user", "content": "hi"}], "response_a": "A",
       "response_b": "B", "label": "a", "strength": 2, "meta": {}}


def write(tmp_path, rows):
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize("change,field", [
    ({"label": "c"}, "label"), ({"strength": 5}, "strength"), ({"strength": "big"}, "strength"),
    ({"messages": []}, "messages"), ({"messages": [{"role": "bot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "messages"),
    ({"response_b": "  "}, "response_b"), ({"meta": [1]}, "meta"),
])
def test_bad_rows_name_file_line_and_field(tmp_path, change, field):
    path = write(tmp_path, [ROW, {**ROW, "id": "x2", **change}])
    with pytest.raises(RecordError) as err:
        load_pairs(path)
    assert str(path) in str(err.value) and "line 2" in str(err.value) and f"field '{field}'" in str(err.value)


def test_missing_field_invalid_json_and_duplicates(tmp_path):
    row = dict(ROW)
    del row["label"]
    with pytest.raises(RecordError, match="line 1, field 'label': missing"):
        load_pairs(write(tmp_path, [row]))
    with pytest.raises(RecordError, match="line 2: invalid JSON"):
        load_pairs(write(tmp_path, [ROW, "{oops"]))
    with pytest.raises(RecordError, match="duplicate id"):
        load_pairs(write(tmp_path, [ROW, ROW]))


def test_skip_invalid_counts_what_it_drops(tmp_path):
    errors: list[str] = []
    pairs = load_pairs(write(tmp_path, [ROW, {**ROW, "id": "x2", "label": "?"}]), skip_invalid=True, errors=errors)
    assert [p.id for p in pairs] == ["x1"] and len(errors) == 1 and "line 2" in errors[0]


def test_round_trip_and_swap(tmp_path):
    pairs = make_pairs(10, seed=3)
    write_jsonl(tmp_path / "p.jsonl", pairs)
    assert load_pairs(tmp_path / "p.jsonl") == pairs
    p = PreferencePair.from_dict(ROW)
    s = p.swapped()
    assert (s.response_a, s.response_b, s.label) == ("B", "A", "b") and s.swapped() == p


def test_synthetic_is_balanced_and_deterministic():
    pairs = make_pairs(100, seed=1)
    assert sum(p.label == "a" for p in pairs) == 50
    assert pairs == make_pairs(100, seed=1) and pairs != make_pairs(100, seed=2)


def test_write_json_replaces_the_file_whole_and_leaves_no_temp_file(tmp_path):
    from thinkj.records import write_json

    path = tmp_path / "sub" / "x.summary.json"
    write_json(path, {"n_in": 3, "where": Path("a/b"), "text": "é"})
    write_json(path, {"n_in": 4})
    assert json.loads(path.read_text(encoding="utf-8")) == {"n_in": 4}
    assert [p.name for p in path.parent.iterdir()] == ["x.summary.json"]
