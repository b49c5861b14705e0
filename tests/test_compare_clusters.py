"""`thinkj eval compare` names the paired test it ran and the clusters it counted: the cluster sign-flip test when
judgments share a question (both orders, a comparison drawn twice), McNemar's exact test on independent items.
Real records and pairs files on disk, the real command line; nothing mocked."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from thinkj.evaluation.cli import app

runner = CliRunner()


def _row(folder, source, rights, orders=("original", "swapped")):
    """An evaluation folder of the generated task: one judgment per (item, order), right where ``rights`` says."""
    bench = folder / "synthetic"
    bench.mkdir(parents=True)
    records = []
    for k, ok in enumerate(rights):
        item, order = f"p{k // len(orders)}", orders[k % len(orders)]
        records.append({"item_id": item, "order": order, "sample": 0, "gold": "a", "correct": ok,
                        "verdict": "a" if ok else "b"})
    (bench / "synthetic.judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (bench / "synthetic.results.json").write_text(json.dumps({"provenance": {"data": {"source": str(source)}}}))
    return folder


def _pairs(path, questions):
    path.write_text("".join(json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": q}],
                                        "response_a": f"right {i}", "response_b": f"wrong {i}", "label": "a"}) + "\n"
                            for i, q in enumerate(questions)))
    return path


def test_repeated_questions_run_the_cluster_test_and_print_the_cluster_count(tmp_path):
    # 8 items drawn from 4 questions (each question twice), both orders: 16 judgments, 4 clusters
    source = _pairs(tmp_path / "pairs.jsonl", [f"What is {q}?" for q in "ABCDABCD"])
    init = _row(tmp_path / "init", source, [False] * 16)
    online = _row(tmp_path / "online", source, [True] * 12 + [False] * 4)  # p0..p5 right in both orders
    result = runner.invoke(app, ["compare", f"init={init}", f"online={online}", "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    c = json.loads((tmp_path / "cmp" / "compare.json").read_text())["comparisons"]["online_vs_init"]
    # question differences: A (p0, p4) 4, B (p1, p5) 4, C (p2) 2, D (p3) 2; sum 12 reached only by all-plus: 1/16,
    # two-sided 2/16. McNemar over the 16 judgments would say 2 / 2**12.
    assert (c["test"], c["clusters"], c["cluster_by"], c["p"]) == ("cluster_sign_flip", 4, "question", 0.125)
    assert "cluster sign-flip p = 0.12, 4 questions: 16 judgments share 4 distinct questions" in result.output


def test_independent_items_keep_mcnemar(tmp_path):
    source = _pairs(tmp_path / "pairs.jsonl", [f"Question {i}?" for i in range(10)])
    init = _row(tmp_path / "init", source, [False] * 10, orders=("original",))
    online = _row(tmp_path / "online", source, [True] * 9 + [False], orders=("original",))
    result = runner.invoke(app, ["compare", f"init={init}", f"online={online}", "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    c = json.loads((tmp_path / "cmp" / "compare.json").read_text())["comparisons"]["online_vs_init"]
    assert (c["test"], c["clusters"], c["p"]) == ("mcnemar_exact", 10, float(f"{2 / 2 ** 9:.3g}"))
    assert "McNemar exact p = 0.0039, 10 questions: each of the 10 judgments is its own question" in result.output


def test_pairs_option_names_the_questions_when_the_results_do_not(tmp_path):
    # the results name a pairs file that is gone (records copied elsewhere): by comparison, unless --pairs is given
    source = _pairs(tmp_path / "pairs.jsonl", [f"What is {q}?" for q in "ABCDABCD"])
    init = _row(tmp_path / "init", tmp_path / "gone.jsonl", [False] * 16)
    online = _row(tmp_path / "online", tmp_path / "gone.jsonl", [True] * 12 + [False] * 4)
    args = ["compare", f"init={init}", f"online={online}", "--out", str(tmp_path / "cmp")]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0, plain.output
    assert "8 comparisons: 16 judgments share 8 distinct comparisons" in plain.output
    # 6 comparisons at +2, 2 at 0: only the all-plus and all-minus of 2**6 patterns reach |12|: 2/64
    assert "cluster sign-flip p = 0.031" in plain.output
    with_pairs = runner.invoke(app, [*args, "--pairs", str(source)])
    assert with_pairs.exit_code == 0, with_pairs.output
    assert "cluster sign-flip p = 0.12, 4 questions" in with_pairs.output
    # four questions of 4 judgments each, changes A 4/4, B 4/4, C 2/4 (p2 right, p6 not), D 2/4: a resample's change
    # is 0.5 + 0.5 j/4 with j ~ Binomial(4, 1/2) draws of A or B; j = 0 and j = 4 have chance 1/16 > 2.5 % each
    assert "+75.0 points [+50.0, +100.0] (cluster bootstrap)" in with_pairs.output
    missing = runner.invoke(app, [*args, "--pairs", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code != 0 and "nope.jsonl" in str(missing.exception) and "--pairs" in str(missing.exception)
