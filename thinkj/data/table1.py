"""Table 1 of the paper (count after each filter while building LIMJ707), regenerated from stage summaries.

    thinkj data table1 runs/limj
    thinkj data table1 runs/cpu/tiny/data --initial 10000

Every data-selection stage writes a ``*.summary.json`` with ``"stage"``, ``"n_in"`` and ``"n_out"``. This
module finds them under the run folder (any depth), takes the initial count from the difficulty stage's
input (or ``--initial``), and prints the paper's layout with our counts beside the paper's (Skywork-Reward-
Preference-v0.2: 10K, 1496, 870, 707; the paper has no clipping row, so that cell is empty). The decontamination
row (ours, not the paper's) also says how many pairs it removed and which benchmarks it checked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thinkj.records import read_json

# (row label, stage whose n_out it reports, the paper's count)
ROWS: list[tuple[str, str, str]] = [
    ("initially selected", "", "10K"),
    ("filtered by difficulty", "difficulty", "1496"),
    ("filtered by diversity", "dedup", "870"),
    # not in the paper: training pairs holding a benchmark item dropped (thinkj/data/decontaminate.py)
    ("filtered by benchmark overlap (decontamination)", "decontaminate", "--"),
    ("filtered by accuracy", "traces", "707"),
    ("after trace clipping (empty explanations dropped)", "clip", "--"),
]


def find_summaries(run_dir: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """stage name -> summary, from every ``*.summary.json`` under ``run_dir`` (the newest one wins)."""
    found: dict[str, tuple[float, dict[str, Any]]] = {}
    for path in sorted(Path(run_dir).rglob("*.summary.json")):
        data = read_json(path)  # a damaged summary is one line naming it
        stage = data.get("stage") if isinstance(data, dict) else None
        if not stage or "n_out" not in data:
            continue
        mtime = path.stat().st_mtime
        if stage not in found or mtime >= found[stage][0]:
            found[stage] = (mtime, {**data, "_path": str(path)})
    return {stage: data for stage, (_, data) in found.items()}


def table1_counts(run_dir: str | os.PathLike, initial: int | None = None) -> list[tuple[str, int | None, str]]:
    """(row label, our count or None when that stage has not run, the paper's count)."""
    summaries = find_summaries(run_dir)
    if initial is None:
        first = next((summaries[s] for s in ("difficulty", "dedup", "decontaminate", "traces", "clip")
                      if s in summaries), None)
        initial = None if first is None else int(first["n_in"])
    rows = []
    for label, stage, paper in ROWS:
        ours = initial if not stage else (int(summaries[stage]["n_out"]) if stage in summaries else None)
        if stage == "decontaminate" and stage in summaries:  # the count removed, and against what
            found = summaries[stage]
            names = ", ".join(b["name"] for b in found.get("benchmarks", []))
            label = f"{label}: {found.get('removed', 0)} removed, checked against {names or 'no benchmark'}"
        rows.append((label, ours, paper))
    return rows


def render_table1(run_dir: str | os.PathLike, initial: int | None = None) -> str:
    """Markdown in the paper's Table 1 layout: our counts, and the paper's labelled as such."""
    lines = ["| Data (ours: this run; paper: Skywork-Reward-Preference-v0.2) | Data Num (ours) | Data Num (paper, Table 1) |",
             "|---|---:|---:|"]
    for label, ours, paper in table1_counts(run_dir, initial):
        lines.append(f"| - {label} | {'not run' if ours is None else ours} | {paper} |")
    return "\n".join(lines)
