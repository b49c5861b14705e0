"""Decontamination on the real Auto-J and RM-Bench slices with planted overlaps; every plant caught, no clean row.

The clean rows are generated: random sentences over the benchmarks' own vocabulary, plus near-misses that copy
12 consecutive words of a long benchmark prompt (one word short of the 13-gram rule) into other text. Fails
before: with the n-gram rule off (``n`` larger than any prompt) the in-longer-prompt and truncated plants pass
unnoticed; with the exact rule's normalisation reduced to ``str.split`` the case/whitespace plant passes.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conftest import shared_data
from typer.testing import CliRunner

from thinkj.data.cli import app
from thinkj.data.decontaminate import BenchmarkPrompts, Checker, nearest, pair_fields, read_benchmark, run_decontaminate
from thinkj.data.ngrams import normalised, words
from thinkj.data.table1 import render_table1
from thinkj.errors import ThinkJError
from thinkj.records import PreferencePair, load_pairs, write_jsonl


def _against():
    autoj = shared_data("auto-j", "testdata_pairwise.jsonl")
    rmbench = shared_data("rm-bench")
    return [f"autoj={autoj}", f"rmbench={rmbench}"]


def _pair(pid: str, prompt: str, a: str = "A short answer here.", b: str = "Another reply entirely.") -> PreferencePair:
    return PreferencePair(pid, "test", [{"role": "user", "content": prompt}], a, b, "a")


def _prompts(name: str, data: str) -> list[tuple[str, str]]:
    return read_benchmark(name, data).items


def _sized(items, low: int, high: int) -> list[tuple[str, str]]:
    return [(i, p) for i, p in items if low <= len(words(p)) <= high]


def _plants(against: list[str]) -> tuple[list[PreferencePair], dict[str, tuple[str, str, str, str]]]:
    """Training pairs holding benchmark items, and what each must be caught as: (benchmark, item, rule, field)."""
    autoj = _prompts("autoj", against[0].split("=", 1)[1])
    rmbench = _prompts("rmbench", against[1].split("=", 1)[1])
    long_a = _sized(autoj, 40, 120)
    long_r = _sized(rmbench, 20, 80)
    short_r = _sized(rmbench, 8, 12)
    exact_item, exact = long_a[0]
    case_item, case = long_r[0]
    inside_item, inside = long_a[1]
    trunc_item, trunc = long_a[2]
    resp_item, resp = long_r[1]
    short_item, short = short_r[0]
    recase = "  ".join(w.upper() if k % 2 else w.lower() for k, w in enumerate(case.split())) + " \n\t "
    head = " ".join(trunc.split()[: int(len(trunc.split()) * 0.6)])
    pairs = [
        _pair("plant-exact", exact),
        _pair("plant-case", recase),
        _pair("plant-inside", f"My teacher gave us this task, please help.\n\n{inside}\n\nAnswer in two paragraphs."),
        _pair("plant-truncated", head),
        _pair("plant-response", "Tell me what the following request asks for.", b=resp),
        _pair("plant-short-inside", f"I saw this question online yesterday: {short} What would you say?"),
    ]
    expect = {"plant-exact": ("autoj", exact_item, "exact", "prompt"),
              "plant-case": ("rmbench", case_item, "exact", "prompt"),
              "plant-inside": ("autoj", inside_item, "ngram", "prompt"),
              "plant-truncated": ("autoj", trunc_item, "ngram", "prompt"),
              "plant-response": ("rmbench", resp_item, "exact", "response_b"),
              "plant-short-inside": ("rmbench", short_item, "ngram", "prompt")}
    return pairs, expect


def _clean(against: list[str], n: int = 300, seed: int = 0) -> list[PreferencePair]:
    """Random text over the benchmarks' vocabulary, and 12-word near-misses of long prompts: none holds an item."""
    autoj = _prompts("autoj", against[0].split("=", 1)[1])
    vocab = sorted({w for _, p in autoj for w in p.split()})
    rng = random.Random(seed)
    pairs = []
    for k in range(n):
        text = lambda m: " ".join(rng.choice(vocab) for _ in range(m))  # noqa: E731
        pairs.append(_pair(f"clean-{k}", text(rng.randint(5, 60)), text(rng.randint(5, 80)), text(rng.randint(5, 80))))
    for k, (_, prompt) in enumerate(_sized(autoj, 40, 120)[:40]):
        twelve = " ".join(words(prompt)[10:22])  # bounded by words no prompt holds: one short of a 13-gram
        pairs.append(_pair(f"near-{k}", f"Here is zzfirst. {twelve} zzthen more unrelated text."))
    return pairs


def test_every_plant_caught_and_no_clean_row(tmp_path):
    against = _against()
    plants, expect = _plants(against)
    clean = _clean(against)
    rows = clean[:150] + plants + clean[150:]
    write_jsonl(tmp_path / "train.jsonl", rows)
    summary = run_decontaminate(tmp_path / "train.jsonl", tmp_path / "out" / "kept.jsonl", against, encoder="none")
    report = [json.loads(line) for line in (tmp_path / "out" / "kept.contamination.jsonl").read_text().splitlines()]
    caught = {m["row"] for m in report}
    assert caught == set(expect), f"missed {set(expect) - caught}, wrongly caught {caught - set(expect)}"
    for row, (bench, item, rule, field) in expect.items():
        assert any((m["benchmark"], m["item"], m["rule"], m["field"]) == (bench, item, rule, field)
                   for m in report if m["row"] == row), (row, [m for m in report if m["row"] == row])
    truncated = next(m for m in report if m["row"] == "plant-truncated" and m["item"] == expect["plant-truncated"][1])
    assert 0 < truncated["overlap"] < 1 and truncated["shared_ngrams"] > 0  # part of the item's 13-grams
    kept = [p.id for p in load_pairs(tmp_path / "out" / "kept.jsonl")]
    assert kept == [p.id for p in rows if p.id not in expect]
    assert (summary["n_in"], summary["n_out"], summary["removed"]) == (len(rows), len(rows) - 6, 6)
    by_name = {b["name"]: b for b in summary["benchmarks"]}
    assert by_name["autoj"]["fingerprint"].startswith("sha256:") and by_name["autoj"]["items"] > 1000
    assert by_name["rmbench"]["rows_matched"] == 3
    assert by_name["autoj"]["rows_by_rule"] == {"exact": 1, "ngram": 2, "embedding": 0}
    saved = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
    assert saved["stage"] == "decontaminate" and saved["removed"] == 6
    assert (f"| - filtered by benchmark overlap (decontamination): 6 removed, checked against autoj, rmbench "
            f"| {len(rows) - 6} | -- |") in render_table1(tmp_path)


def test_report_only_keeps_every_row(tmp_path):
    against = _against()
    plants, expect = _plants(against)
    write_jsonl(tmp_path / "train.jsonl", plants)
    result = CliRunner().invoke(app, ["decontaminate", str(tmp_path / "train.jsonl"), str(tmp_path / "kept.jsonl"),
                                      "--against", against[0], "--against", against[1], "--report-only",
                                      "--encoder", "none", "--report", str(tmp_path / "report.jsonl")])
    assert result.exit_code == 0, result.output
    assert [p.id for p in load_pairs(tmp_path / "kept.jsonl")] == [p.id for p in plants]
    assert {json.loads(line)["row"] for line in (tmp_path / "report.jsonl").read_text().splitlines()} == set(expect)
    summary = json.loads(result.output)
    assert summary["report_only"] and summary["removed"] == 0 and summary["rows_matched"] == len(expect)


def test_unreadable_benchmark_is_an_error_naming_it(tmp_path):
    against = _against()
    write_jsonl(tmp_path / "train.jsonl", [_pair("x", "hello there")])
    broken = tmp_path / "autoj.jsonl"
    broken.write_text('{"scenario": "chitchat", "label": 0, "prompt": "hi", "response 1": "a"}\n')
    for bad, words_in in ((f"autoj={tmp_path / 'missing.jsonl'}", ("autoj", "missing.jsonl")),
                          (f"autoj={broken}", ("autoj", "line 1", "response 2")),
                          ("rewardbench", ("rewardbench", "allenai/reward-bench"))):  # offline: the hub set is unreadable
        with pytest.raises(ThinkJError) as err:
            run_decontaminate(tmp_path / "train.jsonl", tmp_path / "kept.jsonl", [against[1], bad], encoder="none")
        assert all(w in str(err.value) for w in words_in), str(err.value)
        assert not (tmp_path / "kept.jsonl").exists()  # nothing written before every benchmark was read
    result = CliRunner().invoke(app, ["decontaminate", str(tmp_path / "train.jsonl"), str(tmp_path / "kept.jsonl"),
                                      "--against", "autoj=/nonexistent/autoj.jsonl", "--encoder", "none"])
    assert result.exit_code != 0 and "--against autoj" in str(result.exception)
    with pytest.raises(ThinkJError, match="unknown benchmark 'autoJ'"):
        run_decontaminate(tmp_path / "train.jsonl", tmp_path / "kept.jsonl", ["autoJ"], encoder="none")


def test_embedding_rule_with_minilm_catches_a_reworded_copy(tmp_path):
    """A copy with a changed word every 8 words shares no 13-gram and is not equal, yet MiniLM puts it near the
    item; ``--encoder none`` lets it through. Unrelated generated rows stay below the threshold."""
    against = _against()
    chat = [f"rmbench={shared_data('rm-bench', 'chat_filtered.json')}"]  # 129 items: embedded in seconds
    item, prompt = _sized(_prompts("rmbench", chat[0].split("=", 1)[1]), 40, 120)[0]
    reworded = " ".join(f"{w}s" if k % 8 == 4 else w for k, w in enumerate(prompt.split()))
    rows = [_pair("reworded", reworded)] + _clean(against, n=40, seed=1)
    write_jsonl(tmp_path / "train.jsonl", rows)
    summary = run_decontaminate(tmp_path / "train.jsonl", tmp_path / "kept.jsonl", chat, encoder="minilm")
    report = [json.loads(line) for line in (tmp_path / "kept.contamination.jsonl").read_text().splitlines()]
    assert [(m["row"], m["item"], m["rule"], m["field"]) for m in report] == [("reworded", item, "embedding", "prompt")]
    assert report[0]["overlap"] >= 0.95 and summary["rules"]["embedding"]["threshold"] == 0.95
    off = run_decontaminate(tmp_path / "train.jsonl", tmp_path / "kept_off.jsonl", chat, encoder="none")
    assert off["removed"] == 0 and off["rules"]["embedding"] is None


def test_normalisation_and_short_prompts():
    assert normalised("  What's  THE capital,\nof France?! ") == normalised("whats the Capital of france")
    bench = BenchmarkPrompts("synthetic", "mem", None, [
        ("short", "how are you today"),  # 4 words: the exact rule only
        ("eight", "name three rivers that flow through central european capitals"),  # 9 words: whole
        ("long", " ".join(f"w{k}" for k in range(30)))])
    checker = Checker([bench], encoder="none")
    rows = [("r1", 1, {"prompt": "Hi! How are you today, friend?"}),  # holds the 4-word prompt: not a match
            ("r2", 2, {"prompt": "How are you today"}),  # equal: exact
            ("r3", 3, {"prompt": "Quiz: name three rivers that flow through central European capitals."}),
            ("r4", 4, {"prompt": "name three rivers that flow through central capitals"}),  # a word short
            ("r5", 5, {"prompt": " ".join(f"w{k}" for k in range(5, 18))}),  # exactly 13 words of it
            ("r6", 6, {"prompt": " ".join(f"w{k}" for k in range(5, 17))})]  # 12: below the rule
    got = [(m.row, m.item, m.rule) for m in checker.check(rows)]
    assert got == [("r2", "short", "exact"), ("r3", "eight", "ngram"), ("r5", "long", "ngram")]


def test_hash_collisions_are_confirmed_on_words(monkeypatch):
    """Every window hashed to one value (a collision everywhere): the words still decide. Fails with the
    confirmation (``shared_ngrams``) skipped: the clean row is reported."""
    from thinkj.data import ngrams

    monkeypatch.setattr(ngrams, "window_hashes", lambda h, n: np.zeros(max(h.size - n + 1, 0), dtype=np.uint64))
    checker = Checker([BenchmarkPrompts("synthetic", "mem", None, [("i", "a b c d e f g h i j k l m")])],
                      encoder="none")
    rows = [("clean", 1, {"prompt": "n o p q r s t u v w x y z a"}),
            ("dirty", 2, {"prompt": "a b c d e f g h i j k l m n"})]
    assert [(m.row, m.rule) for m in checker.check(rows)] == [("dirty", "ngram")]


def test_nearest_is_exact_across_blocks():
    rng = np.random.default_rng(0)
    q, r = rng.standard_normal((37, 8)), rng.standard_normal((53, 8))
    best, where = nearest(q, r, block=5, chunk=7)
    qn, rn = q / np.linalg.norm(q, axis=1, keepdims=True), r / np.linalg.norm(r, axis=1, keepdims=True)
    full = qn @ rn.T
    assert np.array_equal(where, full.argmax(axis=1)) and np.allclose(best, full.max(axis=1), atol=1e-6)


def test_pair_fields_cover_every_turn():
    pair = PreferencePair("p", "s", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"}],
                          "x", "y", "a")
    assert pair_fields(pair) == {"prompt": "Be brief.\nQ?", "response_a": "x", "response_b": "y"}


def test_pipeline_stage_checks_the_run_benchmarks_and_records_their_data(tmp_path, monkeypatch):
    """The pipeline's decontaminate stage, run by the shared stage loop on a planted dedup output: the traces stage
    reads what it kept, and its completion record names the benchmark data it checked by content."""
    import os
    import sys
    from pathlib import Path

    from thinkj.pipeline import stage_runner
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.run import REDO_HINT, _step
    from thinkj.pipeline.settings import env_settings

    against = _against()
    data = " ".join(against)
    s = env_settings({"RUN_DIR": str(tmp_path / "run"), "BENCHMARKS": "autoj rmbench", "BENCHMARK_DATA": data,
                  "DECONTAM_ENCODER": "none", "DRY_RUN": "1"})
    stages = {st.name: st for st in plan(s)}
    stage = stages["decontaminate"]
    assert stages["traces"].argv[3] == str(stage.output)  # the teacher sees only decontaminated pairs
    assert stage.argv[stage.argv.index("--encoder") + 1] == "none"
    assert [stage.argv[i + 1] for i, a in enumerate(stage.argv) if a == "--against"] == against
    plants, expect = _plants(against)
    kept = Path(stage.argv[3])
    write_jsonl(kept, _clean(against, n=20) + plants)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # the stage runs `thinkj`
    with open(tmp_path / "progress.txt", "w") as progress:
        outcome = stage_runner.run_steps([_step(stage)], hint=REDO_HINT,
                                         logs=tmp_path / "logs", out=progress)
    assert outcome.ran == ["decontaminate"]
    record = json.loads(stage.record.read_text())
    assert record["settings"]["DECONTAM_AGAINST"] == data and record["settings"]["DECONTAM_ENCODER"] == "none"
    assert record["paths"]["benchmark_autoj"] == against[0].split("=", 1)[1]
    assert all(record["inputs"][f"benchmark_{b}"].startswith("sha256:") for b in ("autoj", "rmbench"))
    n_clean = 20 + 40  # random rows + near-misses
    assert record["counts"] == {"rows": n_clean, "n_in": n_clean + len(plants), "n_out": n_clean}
    assert not set(expect) & {p.id for p in load_pairs(stage.output)}


def test_pipeline_reuses_the_stage_for_fewer_benchmarks_and_refuses_a_new_one(tmp_path):
    """A rerun that evaluates a subset of the checked benchmarks keeps the stage (and the teacher traces after it);
    one that adds a benchmark stops, naming what the data was checked against: it was never checked against it."""
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.run import is_done, write_record
    from thinkj.pipeline.settings import env_settings

    against = _against()
    run = {"RUN_DIR": str(tmp_path / "run"), "DECONTAM_ENCODER": "none", "DRY_RUN": "1"}
    first = {st.name: st for st in plan(env_settings({**run, "BENCHMARKS": "autoj rmbench",
                                                  "BENCHMARK_DATA": " ".join(against)}))}
    for name in ("load", "difficulty", "dedup", "decontaminate", "traces"):
        first[name].output.parent.mkdir(parents=True, exist_ok=True)
        first[name].output.write_text("{}\n")
        write_record(first[name])
    fewer = {st.name: st for st in plan(env_settings({**run, "BENCHMARKS": "autoj", "BENCHMARK_DATA": against[0]}))}
    assert fewer["decontaminate"].argv == first["decontaminate"].argv
    assert is_done(fewer["decontaminate"]) and is_done(fewer["traces"])
    more = {st.name: st for st in plan(env_settings({**run, "BENCHMARKS": "autoj rmbench synthetic",
                                                 "BENCHMARK_DATA": " ".join(against) + f" synthetic={tmp_path}/t.jsonl"}))}
    with pytest.raises(ThinkJError, match="stage decontaminate was done with other settings .DECONTAM_AGAINST="):
        is_done(more["decontaminate"])
    report = {st.name: st for st in plan(env_settings({**run, "DECONTAMINATE": "report", "BENCHMARKS": "autoj",
                                                   "BENCHMARK_DATA": against[0]}))}
    assert report["decontaminate"].argv[-1] == "--report-only"  # the CPU rehearsal's fruit task: report, keep all
    from thinkj.pipeline.plan import validate

    with pytest.raises(ThinkJError, match="DECONTAMINATE='keep': must be one of drop, report"):
        validate(env_settings({**run, "DECONTAMINATE": "keep"}))
