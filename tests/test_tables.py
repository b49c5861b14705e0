"""`thinkj tables` from hand-made results JSON: matching, ours vs paper, Markdown, LaTeX, PNG, smoke report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thinkj.records import RecordError
from thinkj.tables import SPECS, render_table
from thinkj.tables.cli import app
from thinkj.tables.grid import build_grid
from thinkj.tables.results import collect_results, load_result


def rb(chat, hard, safety, reasoning, **extra):
    sections = {"Chat": chat, "Chat Hard": hard, "Safety": safety, "Reasoning": reasoning}
    return {"subsets": {}, "sections": sections, "overall": sum(sections.values()) / 4, **extra}


def write_result(folder: Path, name: str, benchmark: str, metrics: dict, time: str = "2026-01-01T00:00:00",
                 complete: bool | None = True, **tags) -> Path:
    path = folder / f"{name}.json"
    document = {"benchmark": benchmark, "metrics": metrics, "tags": tags,
                "provenance": {"time": time, "model_path": f"/models/{name}"}}
    if complete is not None:
        document["complete"] = complete
    path.write_text(json.dumps(document))
    return path


def cells_of(markdown: str, row_label: str) -> list[str]:
    for line in markdown.splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and row_label in parts:
            return parts
    raise AssertionError(f"row {row_label!r} not in\n{markdown}")


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    d = tmp_path / "results"
    d.mkdir()
    write_result(d, "llama_grpo", "rewardbench", rb(90.0, 70.0, 85.0, 80.0),
                 model="meta-llama/Meta-Llama-3-8B-Instruct", method="online (GRPO)")
    write_result(d, "llama_base", "rewardbench", rb(90.4, 44.7, 70.0, 60.0), model="Llama-3-8B-Instruct", method="base")
    write_result(d, "thinkj32_rm", "rmbench", {"domains": {}, "hard": 1, "normal": 2, "easy": 3, "overall": 77.7},
                 model="Think-J-Qwen-2.5-32B")
    (d / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"]}))  # not a result: skipped
    return d


def test_filled_cell_shows_ours_paper_and_difference(results_dir):
    results = collect_results([results_dir])
    assert len(results) == 3
    md = render_table(4, results).markdown
    row = cells_of(md, "online (GRPO)")
    assert row[5] == "81.2 / 84.1 (-2.9)"          # Llama overall: (90+70+85+80)/4 = 81.25
    assert row[1] == "90.0 / 93.9 (-3.9)"
    assert row[10] == "— / 85.3"                   # Qwen not run: paper only, never in our place
    assert cells_of(md, "baseline")[5] == "66.3 / 68.8 (-2.5)"  # 'base' is an alias of the paper's 'baseline'
    assert cells_of(md, "online (PPO)")[1:] == ["— / " + c.split(" / ")[1] for c in cells_of(md, "online (PPO)")[1:]]


@pytest.mark.parametrize("key", [k for k, spec in SPECS.items() if spec.paper])
def test_paper_values_never_fill_our_column(key):
    grid = build_grid(SPECS[key], [])
    assert all(cell.ours is None for row in grid.cells for cell in row)
    assert any(cell.paper is not None for row in grid.cells for cell in row)
    md = render_table(key, []).markdown
    table_lines = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(table_lines) == len(grid.rows)
    for line in table_lines:
        for cell in line.strip("| ").split(" | ")[len(SPECS[key].row_keys):]:
            assert cell.split(" / ")[0] == "—", (key, line)


def test_pooled_chat_and_fixed_model(tmp_path):
    write_result(tmp_path, "base", "rewardbench", rb(90.4, 44.7, 76.5, 63.4), model="Llama-3-8B-Instruct", selection="base")
    write_result(tmp_path, "qwen", "rewardbench", rb(61, 61, 61, 61), model="Qwen2.5-7B-Instruct", selection="base")
    grid = build_grid(SPECS["5"], collect_results([tmp_path]))
    base = grid.cells[0]
    assert base[0].ours == pytest.approx((90.4 * 358 + 44.7 * 456) / 814)
    assert f"{base[0].ours:.1f}" == "64.8" == f"{base[0].paper:.1f}"
    assert all(c.ours is None for row in grid.cells[1:] for c in row)  # Qwen is not Table 5's model


def test_table8_rows_vary_one_weight_from_the_model_default(tmp_path):
    write_result(tmp_path, "q_default", "rewardbench", rb(96, 83, 90, 92), model="Qwen2.5-32B-Instruct", w_fmt=1.0, w_str=0.2)
    write_result(tmp_path, "q_fmt05", "rewardbench", rb(50, 50, 50, 50), model="Qwen2.5-32B-Instruct", w_fmt="0.5")
    write_result(tmp_path, "l_str02", "rewardbench", rb(60, 60, 60, 60), model="Meta-Llama-3-8B-Instruct", w_str=0.2)
    write_result(tmp_path, "l_base", "rewardbench", rb(70, 70, 70, 70), model="Meta-Llama-3-8B-Instruct", method="base")
    grid = build_grid(SPECS["8"], collect_results([tmp_path]))
    qwen_overall = [row[4].ours for row in grid.cells]
    llama_overall = [row[9].ours for row in grid.cells]
    assert grid.rows == [("w_fmt", "1.0"), ("w_fmt", "0.5"), ("w_fmt", "0.0"),
                         ("w_str", "0.5"), ("w_str", "0.2"), ("w_str", "0.0")]
    assert qwen_overall == [90.25, 50.0, None, None, 90.25, None]
    assert llama_overall == [None, None, None, None, 60.0, None]


def test_table2_benchmarks_and_missing_paper_values(tmp_path):
    write_result(tmp_path, "synrm", "autoj", {"agreement": 70.0, "strict_agreement": 60.0, "consistency": 80.0},
                 model="SynRM-Command-R-35B")
    md = render_table(2, collect_results([tmp_path])).markdown
    row = cells_of(md, "SynRM-Command-R-35B")
    assert row[-1] == "70.0 / —"   # the paper has no Auto-J number for SynRM
    assert row[-2] == "— / —"


def test_several_matches_take_the_newest_and_warn(tmp_path):
    qwen = {"model": "Qwen2.5-7B-Instruct", "method": "online"}
    write_result(tmp_path, "old", "rewardbench", rb(10, 10, 10, 10), "2026-01-01T00:00:00", **qwen)
    write_result(tmp_path, "new", "rewardbench", rb(20, 20, 20, 20), "2026-02-01T00:00:00", **qwen)
    grid = build_grid(SPECS["4"], collect_results([tmp_path]))
    row = grid.rows.index(("online (GRPO)",))
    assert grid.cells[row][9].ours == 20.0 and grid.cells[row][9].source.name == "new.json"
    assert grid.warnings and "new.json" in grid.warnings[0]


def test_bad_results_name_file_and_field(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmark": "rewardbench", "metrics": [1, 2]}))
    with pytest.raises(RecordError, match="bad.json.*metrics"):
        load_result(bad)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(RecordError, match="broken.json"):
        collect_results([tmp_path / "broken.json"])
    with pytest.raises(FileNotFoundError):
        collect_results([tmp_path / "missing.json"])


def test_latex_output(results_dir):
    tex = render_table(8, collect_results([results_dir]), formats=("latex",)).latex
    assert r"\begin{tabular}{ll" in tex and r"\multicolumn{5}{c}{Qwen2.5-32B-Instruct}" in tex
    assert r"w\_fmt" in tex and r"\cmidrule(lr){3-7}" in tex
    body = [line for line in tex.splitlines() if line.startswith("w\\_")]
    assert len(body) == 6 and all(line.count("&") == 11 for line in body)
    tex4 = render_table(4, collect_results([results_dir])).latex
    assert r"81.2 / 84.1 {\scriptsize(-2.9)}" in tex4 and "--- / 85.3" in tex4


def test_cli_writes_markdown_latex_and_png(results_dir, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["4", "2", "10", "--results", str(results_dir), "--out", str(out), "--format", "both"])
    assert result.exit_code == 0, result.output
    assert "81.2 / 84.1 (-2.9)" in result.output and "5.00E-06" in result.output
    names = sorted(p.name for p in out.iterdir())
    assert {"table4.md", "table4.tex", "table2.md", "table10.md", "table4_rewardbench.png", "table2_rmbench.png"} <= set(names)
    png = (out / "table4_rewardbench.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    bad = CliRunner().invoke(app, ["12", "--results", str(results_dir)])
    assert bad.exit_code != 0


def demo_results(folder: Path) -> dict[str, Path]:
    base = {"accuracy": 50.0, "accuracy_ci95": [37.5, 62.5], "position_consistency": 12.5}
    init = {"accuracy": 62.5, "position_consistency": 40.0}
    paths = {"base": write_result(folder, "base", "synthetic", base, model="tiny", method="base"),
             "init": write_result(folder, "init", "synthetic", init, model="tiny", method="init")}
    write_result(folder, "init_rm", "rmbench", {"overall": 48.0}, model="tiny", method="init")
    return paths


def test_demo_layout(tmp_path):
    demo_results(tmp_path)
    rendered = render_table("demo", collect_results([tmp_path]), tmp_path / "out")
    md = rendered.markdown
    assert cells_of(md, "base")[1:] == ["50.0 [37.5, 62.5]", "12.5", "—", "—"]
    assert cells_of(md, "init")[1:] == ["62.5", "40.0", "—", "48.0"]
    assert cells_of(md, "online")[1:] == ["—", "—", "—", "—"]
    assert "RM-Bench slice Overall" in md and "Auto-J" not in md and " / " not in md.split("|---")[1]
    assert (tmp_path / "out" / "tabledemo_synthetic.png").exists()


def scored(benchmark: str, records: list[dict], unparsed_half: bool = False, protocol: str = "single", **tags) -> dict:
    """The results document ``thinkj eval run`` writes for these judgment records (its own scorer and wrapper)."""
    from thinkj.evaluation.run import EvalConfig, results_document

    cfg = EvalConfig(benchmark=benchmark, model=f"/models/{tags.get('model', 'judge')}", tags=tags,
                     unparsed_half=unparsed_half, protocol=protocol)
    return results_document(cfg, records, None)


def write_document(folder: Path, name: str, document: dict) -> Path:
    path = folder / f"{name}.results.json"
    path.write_text(json.dumps(document))
    return path


def test_demo_from_the_evaluation_scorer(tmp_path):
    """The demo reads what `thinkj eval run` writes."""
    records = []
    for i in range(8):
        gold = "a" if i % 2 else "b"
        records.append({"item_id": f"t{i}", "order": "original", "gold": gold, "verdict": "a", "benchmark": "synthetic"})
        records.append({"item_id": f"t{i}", "order": "swapped", "gold": "b" if gold == "a" else "a", "verdict": "a",
                        "benchmark": "synthetic"})
    path = write_document(tmp_path, "online", scored("synthetic", records, model="tiny", method="online"))
    row = cells_of(render_table("demo", [load_result(path)]).markdown, "online")
    # always "a": half right (Wilson 95% interval over the 16 judgments), never the same response in both orders
    assert row[1:] == ["50.0 [28.0, 72.0]", "0.0", "0.0"]


def test_one_base_model_result_fills_every_baseline_row(tmp_path):
    write_result(tmp_path, "llama_base", "rewardbench", rb(90.4, 44.7, 76.5, 63.4), model="Llama-3-8B-Instruct", method="base")
    write_result(tmp_path, "llama_sft", "rewardbench", rb(50, 50, 50, 50), model="Llama3-8B-Instruct",
                 method="SFT (w/o CoT)", train_data="HH-RLHF")
    results = collect_results([tmp_path])
    for key in ("5", "6", "7"):
        grid = build_grid(SPECS[key], results)
        assert f"{grid.cells[0][3].ours:.1f}" == "68.8" and f"{grid.cells[0][0].ours:.1f}" == "64.8", key
        assert all(c.ours is None for row in grid.cells[1:] for c in row), key
    grid3 = build_grid(SPECS["3"], results)
    direct = grid3.rows.index(("Llama3-8B-Instruct", "Direct Prompt (w/o CoT)"))
    sft = grid3.rows.index(("Llama3-8B-Instruct", "SFT (w/o CoT)"))
    assert [grid3.cells[direct][i].ours for i in (4, 9)] == [pytest.approx(68.75)] * 2   # no train_data: both groups
    assert [grid3.cells[sft][i].ours for i in (4, 9)] == [50.0, None]                    # trained on HH-RLHF only
    assert build_grid(SPECS["4"], results).cells[0][4].ours == pytest.approx(68.75)


# ------------------------------------------------------------------------------------------ partial runs, bad values

def test_partial_result_is_marked_with_a_footnote_and_a_complete_one_is_not(tmp_path):
    # A Chat-only RewardBench run: officially Safety, Chat Hard and Reasoning count 0, and the cell is marked.
    records = [r for k in range(3) for r in (
        {"item_id": str(k), "order": "original", "gold": "a", "verdict": "a", "subset": "alpacaeval-easy"},
        {"item_id": str(k), "order": "swapped", "gold": "b", "verdict": "b" if k else "a", "subset": "alpacaeval-easy"})]
    write_document(tmp_path, "partial", scored("rewardbench", records, model="Think-J-Qwen-2.5-32B"))
    md = render_table(2, collect_results([tmp_path])).markdown
    row = cells_of(md, "Think-J-Qwen-2.5-32B")
    # Chat (5 of 6 judgments right) = 83.33; overall = 83.33 / 4 = 20.83, the old mean of the present sections: 83.3
    assert row[1].startswith("83.3* / ") and row[5].startswith("20.8* / ")
    assert "| — / " in md.split("Think-J-Qwen-2.5-32B")[1].split("\n")[0]  # Chat Hard: not run, no number
    note = [line for line in md.splitlines() if line.startswith("* Think-J-Qwen-2.5-32B [RewardBench Overall]")]
    assert note and "incomplete: section Chat Hard; section Safety; section Reasoning" in note[0]
    assert "partial.results.json" in note[0]

    full = tmp_path / "full"
    full.mkdir()
    write_result(full, "done", "rewardbench", rb(90, 80, 85, 75, protocol="single"), model="Think-J-Qwen-2.5-32B")
    md = render_table(2, collect_results([full])).markdown
    assert "*" not in "".join(cells_of(md, "Think-J-Qwen-2.5-32B")) and "\n* " not in md


def test_limit_protocol_and_unknown_completeness_are_marked(tmp_path):
    path = write_result(tmp_path, "lim", "rmbench", {"overall": 70.0, "protocol": "pair"}, complete=False,
                        model="Think-J-Qwen-2.5-32B")
    document = json.loads(path.read_text())
    document["provenance"]["data"] = {"limit": 8}
    path.write_text(json.dumps(document))
    write_result(tmp_path, "old", "autoj", {"agreement": 70.0}, complete=None, model="Think-J-Qwen-2.5-32B")
    md = render_table(2, collect_results([tmp_path])).markdown
    row = cells_of(md, "Think-J-Qwen-2.5-32B")
    assert row[6].startswith("70.0* / ") and row[7].startswith("70.0* / ")
    assert "incomplete: --limit 8; --protocol pair (the paper's is taken to be single)" in md
    assert "completeness not recorded (older results file)" in md
    assert "Agreement (both orders)" in md  # Table 2's Auto-J column is Auto-J's official agreement


def full_rewardbench_records(unparsed_every: int = 0) -> list[dict]:
    """Both orders of every pair of the filtered split (a complete run); every ``unparsed_every``-th pair's
    original order has no verdict."""
    from thinkj.evaluation.scoring_rules import REWARDBENCH_ROWS

    records, n = [], 0
    for subset, rows in REWARDBENCH_ROWS.items():
        for k in range(rows):
            n += 1
            unparsed = unparsed_every and n % unparsed_every == 0
            records += [{"item_id": f"{subset}-{k}", "order": "original", "gold": "a", "verdict": None if unparsed else "a",
                         "subset": subset},
                        {"item_id": f"{subset}-{k}", "order": "swapped", "gold": "b", "verdict": "b", "subset": subset}]
    return records


def test_unparsed_half_is_marked_in_every_renderer(tmp_path):
    """A complete run scored with --unparsed-half (an unparsable verdict 0.5, not 0) is marked like another
    protocol, in Markdown, LaTeX and the chart; the same run scored by default is not marked."""
    from thinkj.tables.charts import series, value_label

    records = full_rewardbench_records(unparsed_every=4)
    half = scored("rewardbench", records, unparsed_half=True, model="Think-J-Qwen-2.5-32B")
    zero = scored("rewardbench", records, model="Think-J-Qwen-2.5-32B")
    # what the results carry: the convention in metrics.unparsed (and metrics.unparsed_rule), nothing at the top
    assert half["complete"] is True and (half["metrics"]["unparsed"], zero["metrics"]["unparsed"]) == ("half", "wrong")
    assert half["metrics"]["subsets"]["alpacaeval-easy"] == 93.75 and zero["metrics"]["subsets"]["alpacaeval-easy"] == 87.5
    write_document(tmp_path, "half", half)
    rendered = render_table(2, collect_results([tmp_path]), tmp_path / "out", formats=("md", "latex"))
    row = cells_of(rendered.markdown, "Think-J-Qwen-2.5-32B")
    assert all(cell.split(" / ")[0].endswith("*") for cell in row[1:6])
    notes = [line for line in rendered.markdown.splitlines() if line.startswith("* Think-J-Qwen-2.5-32B [RewardBench")]
    assert len(notes) == 5
    assert all(": --unparsed-half (a verdict naming neither response scored 0.5, not 0) (" in n for n in notes)
    assert "Marked (*)" in rendered.markdown
    assert "--unparsed-half (a verdict naming neither response scored 0.5, not 0)" in rendered.latex
    assert "Marked (*)" in rendered.latex and r"* / 90.5 {\scriptsize" in rendered.latex
    overall = next(s for s in series(rendered.grid, "rewardbench") if s[2])   # ours, the headline column
    assert overall[4][rendered.grid.rows.index(("Think-J-Qwen-2.5-32B",))] is True
    assert value_label(23.4, True, True) == "23.4*" and value_label(23.4, True) == "23.4"
    assert (tmp_path / "out" / "table2_rewardbench.png").exists()

    default = tmp_path / "default"
    default.mkdir()
    write_document(default, "zero", zero)
    md = render_table(2, collect_results([default])).markdown
    assert "*" not in "".join(cells_of(md, "Think-J-Qwen-2.5-32B")) and "\n* " not in md and "Marked" not in md


def test_auto_j_numbers_are_not_marked_for_rules_they_ignore(tmp_path):
    """Auto-J's scorer applies its own both-orders rule: --protocol / --unparsed-half change none of its numbers."""
    records = [r for k in range(4) for r in (
        {"item_id": str(k), "order": "original", "gold": "a", "verdict": None, "scenario": "default"},
        {"item_id": str(k), "order": "swapped", "gold": "b", "verdict": "b", "scenario": "default"})]
    other = scored("autoj", records, unparsed_half=True, protocol="pair", model="Think-J-Qwen-2.5-32B")
    assert (other["metrics"]["unparsed"], other["metrics"]["protocol"]) == ("half", "pair")
    assert other["metrics"]["agreement"] == scored("autoj", records)["metrics"]["agreement"]
    write_document(tmp_path, "autoj", other)
    md = render_table(2, collect_results([tmp_path])).markdown
    note = [line for line in md.splitlines() if line.startswith("* Think-J-Qwen-2.5-32B [Auto-J")]
    assert note and note[0].split(": ", 1)[1].startswith("incomplete: 4 of 1392 items (")
    assert "--unparsed-half" not in note[0] and "--protocol" not in note[0]


@pytest.mark.parametrize("value", [950.0, -5.0, float("nan"), float("inf")])
def test_values_that_are_not_percentages_are_refused(tmp_path, value):
    write_result(tmp_path, "bad", "rmbench", {"overall": value}, model="Think-J-Qwen-2.5-32B")
    with pytest.raises(RecordError, match=r"bad\.json, field 'metrics\.overall': .* is not a percentage in 0-100"):
        render_table(2, collect_results([tmp_path]))


def test_results_that_fill_no_cell_are_reported(tmp_path):
    write_result(tmp_path, "untagged", "rmbench", {"overall": 70.0})
    write_result(tmp_path, "stranger", "rmbench", {"overall": 70.0}, model="Some-Other-Judge")
    md = render_table(2, collect_results([tmp_path])).markdown
    assert "untagged.json (rmbench) fills no cell: it has no tags" in md
    assert "stranger.json (rmbench) fills no cell: its tags {'model': 'Some-Other-Judge'} match no row" in md


def test_a_broken_results_file_in_a_folder_is_not_skipped(tmp_path):
    (tmp_path / "autoj.results.json").write_text('{"benchmark": "autoj", "metrics": ')
    (tmp_path / "config.json").write_text("{not json")  # not a results file: skipped
    with pytest.raises(RecordError, match=r"autoj\.results\.json: not valid JSON"):
        collect_results([tmp_path])
