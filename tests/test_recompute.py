"""Learning results recomputed from kept judgment records, clustered by held-out question.

On hand-made records experiments/recompute.py's pooled test must count one question in two seeds' held-out sets
once; the experiment reports (position_consistent_report.py, offline_report.py) cluster the same way, and
judge_as_reward.py clusters the phrasings of one fact. Real files on disk, the scripts' own entry points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_script

RESULTS = Path(__file__).resolve().parents[1] / "experiments" / "results"
recompute = load_script("experiments/recompute.py")
pc_report = load_script("experiments/position_consistent_report.py")


def _record(item: str, order: str, ok: bool) -> dict:
    gold = "a" if order == "original" else "b"
    return {"item_id": item, "order": order, "gold": gold, "verdict": gold if ok else ("b" if gold == "a" else "a"),
            "correct": ok, "well_formed": True, "sample": 0}


def _pairs(path: Path, items: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"id": item, "source": "facts", "messages": [{"role": "user", "content": q}],
                                        "response_a": "right", "response_b": "wrong", "label": "a"}) + "\n"
                            for item, q in items.items()))
    return path


def _judgments(path: Path, items: list[str], ok: bool) -> Path:
    path.write_text("".join(json.dumps(_record(i, o, ok)) + "\n" for i in items for o in ("original", "swapped")))
    return path


@pytest.mark.parametrize(("folder", "args"), [
    ("tiny_fruit", []),
    # the pre-registered confirmatory run (LOG, session 18): its primary test is the one --compare names
    ("confirmatory_seed3", ["--compare", "plain:init"]),
    # make demo's four rows from a fresh clone (experiments/keep_records.py)
    ("demo_seed0_xeon_bf16", []),
    ("demo_seed0_xeon_fp32", []),  # the README's table
    ("demo_seed0_xeon207_bf16", []),  # another Xeon model's bf16 kernels (docs/demo.md)
])
def test_the_committed_table_recomputes_from_the_committed_records(folder, args, capsys):
    assert recompute.main([str(RESULTS / folder), *args, "--check"]) == 0
    assert capsys.readouterr().out.endswith("table.md: recomputed, identical\n")


@pytest.mark.parametrize(("folder", "rows", "n_pairs", "n_questions"), [
    ("confirmatory_seed3", ("init", "plain"), 300, 43),  # the registered design (LOG, session 15)
    ("demo_seed0_xeon_bf16", ("base", "init", "offline", "online"), 30, 24),  # docs/demo.md's held-out set
    ("demo_seed0_xeon_fp32", ("base", "init", "offline", "online"), 30, 24),
    ("demo_seed0_xeon207_bf16", ("base", "init", "offline", "online"), 30, 24),
])
def test_the_kept_records_hold_their_design(folder, rows, n_pairs, n_questions):
    """Distinct comparisons over so many questions, both orders, every judgment of every row on the same items."""
    from thinkj.evaluation.judgment_records import load_records
    from thinkj.evaluation.row_compare import pair_questions
    from thinkj.records import read_jsonl
    from thinkj.synthetic.distinct import comparison_key

    folder = RESULTS / folder
    questions = pair_questions(folder / "pairs.jsonl")
    pairs = [p for _, p in read_jsonl(folder / "pairs.jsonl")]
    keys = {comparison_key(questions[p["id"]], p["response_a"], p["response_b"]) for p in pairs}
    assert len(pairs) == len(keys) == n_pairs
    assert len(set(questions.values())) == n_questions
    for arm in rows:
        rows = load_records(folder / f"{arm}.judgments.jsonl")
        assert sorted((r["item_id"], r["order"]) for r in rows) == sorted(
            (p["id"], o) for p in pairs for o in ("original", "swapped"))


def test_sides_show_a_change_of_lean_and_the_questions_moved(tmp_path, capsys):
    # Q1 (item x): earlier says (b) in both orders, later right in both; Q2 (item y): earlier says (b), later (a)
    _pairs(tmp_path / "pairs.jsonl", {"x": "Q1?", "y": "Q2?"})
    verdicts = {"init": {"x": "bb", "y": "bb"}, "online": {"x": "ab", "y": "aa"}}
    for row, items in verdicts.items():
        (tmp_path / f"{row}.judgments.jsonl").write_text("".join(
            json.dumps({"item_id": item, "order": order, "gold": gold, "verdict": v, "correct": v == gold,
                        "sample": 0}) + "\n"
            for item, vs in items.items() for order, gold, v in zip(("original", "swapped"), "ab", vs)))
    assert recompute.main([str(tmp_path), "--sides"]) == 0
    out = capsys.readouterr().out
    assert "| init | 0.0 | 0.0 | 0.0 | 100.0 |" in out  # never consistent, always (b)
    assert "| online | 50.0 | 75.0 | 100.0 | 50.0 |" in out
    # Q1: 2 right against 1, gained; Q2: 1 right against 1 (another order), unchanged
    assert "| online vs init | 2 | 1 | 1 | 0 |" in out


def test_pooled_seeds_count_a_question_once(tmp_path, capsys):
    # two seeds, each two items asking Q1 and Q2; later right everywhere, earlier wrong everywhere
    for s in (0, 1):
        seed = tmp_path / f"s{s}"
        seed.mkdir()
        items = {f"s{s}-0": "Q1?", f"s{s}-1": "Q2?"}
        _pairs(seed / "pairs.jsonl", items)
        _judgments(seed / "init.judgments.jsonl", list(items), False)
        _judgments(seed / "online.judgments.jsonl", list(items), True)
    assert recompute.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # per seed: two questions at +2 each, 2 of 4 sign patterns reach |4|: p = 0.5. Pooled: the same two questions
    # (+4 each), p = 0.5 again; per comparison it would be 2/16, and McNemar on 8 vs 0 judgments 2/2**8 = 0.0078
    assert "| online vs init | s0 | 4 | 4 | 0 | +100.0 [+100.0, +100.0] | 0.5 (cluster_sign_flip, 2) | 0.125 |" in out
    assert "| online vs init | pooled | 8 | 8 | 0 | +100.0 [+100.0, +100.0] | 0.5 (cluster_sign_flip, 2) | 0.00781 |" \
        in out


def test_recompute_refuses_bad_records_naming_the_file(tmp_path, capsys):
    _pairs(tmp_path / "pairs.jsonl", {"x": "Q?"})
    _judgments(tmp_path / "init.judgments.jsonl", ["x"], True)
    (tmp_path / "online.judgments.jsonl").write_text(json.dumps(_record("y", "original", True)) + "\n"
                                                     + json.dumps(_record("y", "swapped", True)) + "\n")
    assert recompute.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "online.judgments.jsonl" in err and "'y' is not in" in err and "item_id" in err
    assert recompute.main([str(tmp_path / "none")]) == 2
    assert "no pairs.jsonl" in capsys.readouterr().err
    assert recompute.main([str(tmp_path), "--compare", "online"]) == 2
    assert "LATER:EARLIER" in capsys.readouterr().err


def _pc_run(root: Path, pairs_exist: bool = True) -> Path:
    """position_consistent.sh's layout for seeds 0 and 1: each seed's held-out set asks Q1 and Q2 once."""
    for s in (0, 1):
        items = {f"test-{s}-0": "Q1?", f"test-{s}-1": "Q2?"}
        source = _pairs(root / f"data-s{s}.jsonl", items) if pairs_exist else root / f"gone-s{s}.jsonl"
        for arm, ok in (("init", False), ("plain", True), ("consistent", True)):
            folder = root / f"facts-s{s}" / f"eval-{arm}"
            folder.mkdir(parents=True)
            _judgments(folder / "synthetic.judgments.jsonl", list(items), ok)
            (folder / "synthetic.results.json").write_text(json.dumps(
                {"complete": True, "provenance": {"data": {"source": str(source)}}}))
    return root


@pytest.mark.parametrize("pairs_exist", [True, False])
def test_the_experiment_report_clusters_by_question_across_seeds(tmp_path, capsys, pairs_exist):
    assert pc_report.main([str(_pc_run(tmp_path, pairs_exist)), "--seeds", "0", "1"]) == 0
    out = capsys.readouterr().out
    pooled = next(line for line in out.splitlines() if line.startswith("| consistent vs init | primary | pooled"))
    if pairs_exist:  # two questions, each +4 over its 4 judgments in two seeds: 2 of 4 patterns, p = 0.5
        assert pooled.endswith("| +100.0 [+100.0, +100.0] | 0.5 (cluster_sign_flip, 2 questions) |")
        assert "clustered by comparison" not in out
    else:  # the pairs files are gone: four comparisons of +2 each, 2/16; said under the table
        assert pooled.endswith("| 0.125 (cluster_sign_flip, 4 comparisons) |")
        assert "clustered by comparison" in out


def test_design_effects_from_the_held_out_pairs(tmp_path, capsys):
    script = load_script("experiments/design_effect.py")
    pairs = tmp_path / "s0.jsonl"
    rows = [("Q1?", "right", "wrong"), ("Q1?", "wrong", "right"), ("Q2?", "right", "other")]  # Q1's drawn twice
    pairs.write_text("".join(json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": q}],
                                         "response_a": a, "response_b": b, "label": "a"}) + "\n"
                             for i, (q, a, b) in enumerate(rows)))
    report = tmp_path / "report.json"
    counts = {"only_first": 4, "only_second": 0, "n": 6}
    report.write_text(json.dumps({"per_seed": [counts], "pooled": counts}))
    assert script.main([str(report), "--pairs", str(pairs)]) == 0
    out = capsys.readouterr().out
    # units: Q1's comparison (4 judgments) and Q2's (2): sum m^2 / sum m = (16 + 4) / 6 = 3.33; 6 / 2 units = 3.
    # 4 vs 0: exact 2/16; z = 4 / sqrt(4) = 2 -> 0.0455; / sqrt(3) -> 0.248; / sqrt(3.33) -> 0.273
    assert "| seed 0 | 6 | 2 | 2 | 4 | 3.33 | 3.33 |" in out
    assert "| offline vs init | pooled | 4 | 0 | 0.12 | 0.046 | 0.25 | 0.27 | 0.27 |" in out
    counts["n"] = 8
    report.write_text(json.dumps({"per_seed": [counts], "pooled": counts}))
    assert script.main([str(report), "--pairs", str(pairs)]) == 2
    assert "8 judgments in the report, 6 in the pairs given" in capsys.readouterr().err


def test_judge_as_reward_clusters_the_phrasings_of_a_fact():
    experiment = load_script("experiments/judge_as_reward.py")
    # two facts in two phrasings each, phrasing-major as items_of writes them: A, B, A, B
    items = [{"family": "capital", "entity": e, "value": "x", "prompt": f"{e} {k}"} for k in (1, 2) for e in "AB"]
    before = [False] * 4
    # both of A's phrasings gained, B unchanged: one cluster moved (+2), its two sign patterns both reach |2|: p = 1;
    # McNemar over the 4 prompts would say 2 vs 0, p = 0.5
    r = experiment.paired_record(items, before, [True, False, True, False])
    assert (r["test"], r["clusters"], r["p"], r["mcnemar_p"], r["only_after"]) == ("cluster_sign_flip", 2, 1.0, 0.5, 2)
    # every prompt gained: clusters (+2, +2), 2 of 4 patterns reach |4|: p = 0.5 (McNemar 4 vs 0: 0.125)
    r = experiment.paired_record(items, before, [True] * 4)
    assert (r["p"], r["mcnemar_p"], r["change_ci95"]) == (0.5, 0.125, [1.0, 1.0])


def test_the_offline_report_clusters_by_question_across_seeds(tmp_path, capsys):
    report = load_script("experiments/offline_report.py")
    runs = []
    for s in (0, 1):
        run = tmp_path / f"run{s}"
        items = {f"test-{s}-0": "Q1?", f"test-{s}-1": "Q2?"}
        source = _pairs(tmp_path / f"test-s{s}.jsonl", items)
        for folder, ok in (("eval/judge_sft", False), ("eval/offline_iter_1_model", True)):
            bench = run / folder / "synthetic"
            bench.mkdir(parents=True)
            _judgments(bench / "synthetic.judgments.jsonl", list(items), ok)
            (bench / "synthetic.results.json").write_text(json.dumps(
                {"metrics": {"missing": []}, "provenance": {"n_items": 2, "data": {"source": str(source)}}}))
        runs.append(str(run))
    assert report.main(runs) == 0
    out = capsys.readouterr().out
    # per seed two questions at +2: 2 of 4 patterns reach |4|, p = 0.5; pooled the same two questions at +4: 0.5
    assert out.count("| +100.0 [+100.0, +100.0] | 0.5 (cluster_sign_flip, 2 questions) |") == 3
