"""Training curves of online learning: reward, accuracy, response length and KL per step (paper Figures 5-8).

    thinkj train curves runs/qwen7b/online_grpo/logs --out runs/qwen7b/online_grpo/curves.png
    thinkj train curves runs/cpu/online_trl/trainer_state.json --out curves.png

Reads, from a file or everything under a folder:
* verl's ``file`` logger: ``<VERL_FILE_LOGGER_ROOT>/<project>/<experiment>.jsonl``, one ``{"step", "data"}``
  object per line (verl/utils/tracking.py, FileLogger);
* verl's ``tensorboard`` logger: ``events.out.tfevents.*`` scalars (under ``TENSORBOARD_DIR``);
* TRL / transformers: ``trainer_state.json`` and its ``log_history``.

When the run validated on a held-out set in both orders (``thinkj.online.heldout``: verl's
``val-judge/<data_source>/<name>``, TRL's ``eval_judge/<name>``), a fifth panel shows its accuracy in each order,
pair accuracy and share of "(a)" verdicts per validation step.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path

from thinkj.errors import ThinkJError

Series = dict[str, list[tuple[int, float]]]

# Panel -> metric-name patterns, first match wins. verl names come from verl/trainer/ppo/metric_utils.py and
# core_algos.py; training accuracy is only in verl's validation metrics (val-core/<data_source>/acc/mean@N).
PANELS: dict[str, tuple[str, ...]] = {
    "reward": (r"critic/score/mean", r"reward", r"critic/rewards/mean"),
    "accuracy": (r"val-core/.+/acc/mean@\d+", r"val-aux/.+/acc/mean@\d+", r"rewards/acc/mean", r"(.+/)?acc(/mean)?"),
    "response length": (r"response_length/mean", r"completions/mean_length"),
    "KL": (r"actor/kl_loss", r"kl", r"actor/reward_kl_penalty", r"actor/ppo_kl"),
}


# Held-out judge series (thinkj.online.heldout), one line each in the "held-out judge" panel
HELD_OUT = ("acc_original", "acc_swapped", "pair_acc", "a_share")
HELD_OUT_PANEL = "held-out judge (both orders)"
_HELD_OUT_KEY = re.compile(r"(?:val-judge/.+|eval_judge)/(" + "|".join(HELD_OUT) + ")")


class CurveError(ThinkJError):
    pass


def _add(series: Series, key: str, step, value) -> None:
    try:
        series[key].append((int(step), float(value)))
    except (TypeError, ValueError):
        return  # strings and nested values (e.g. verl's timing dicts) are not curves


def read_verl_jsonl(path: Path) -> Series:
    series: Series = defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise CurveError(f"{path}, line {n}: not JSON ({err.msg})") from None
            if not isinstance(rec, dict) or "step" not in rec or not isinstance(rec.get("data"), dict):
                raise CurveError(f"{path}, line {n}: expected verl's file-logger record {{'step', 'data'}}")
            for key, value in rec["data"].items():
                _add(series, key, rec["step"], value)
    return series


def read_trainer_state(path: Path) -> Series:
    state = json.loads(Path(path).read_text())
    if "log_history" not in state:
        raise CurveError(f"{path}: no 'log_history' (not a transformers trainer_state.json)")
    series: Series = defaultdict(list)
    for rec in state["log_history"]:
        for key, value in rec.items():
            if key != "step":
                _add(series, key, rec.get("step", 0), value)
    return series


def read_tensorboard(path: Path) -> Series:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    series: Series = defaultdict(list)
    for tag in acc.Tags().get("scalars", []):
        for event in acc.Scalars(tag):
            _add(series, tag, event.step, event.value)
    return series


def _reader(path: Path):
    if path.name == "trainer_state.json":
        return read_trainer_state
    if path.name.startswith("events.out.tfevents"):
        return read_tensorboard
    if path.suffix == ".jsonl":
        return read_verl_jsonl
    return None


def load_metrics(path: str | os.PathLike) -> Series:
    """Every metric found at ``path`` as ``{name: [(step, value), ...]}`` sorted by step (last value per step wins)."""
    root = Path(path)
    if not root.exists():
        raise CurveError(f"{root}: no such file or folder")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and _reader(p))
    if not files or (root.is_file() and _reader(root) is None):
        raise CurveError(f"{root}: no metric logs (verl *.jsonl, events.out.tfevents.*, trainer_state.json)")
    merged: dict[str, dict[int, float]] = defaultdict(dict)
    for file in files:
        for key, points in _reader(file)(file).items():
            merged[key].update(points)
    return {key: sorted(points.items()) for key, points in merged.items() if points}


def pick(metrics: Series, panel: str) -> tuple[str, list[tuple[int, float]]] | None:
    """The metric shown in ``panel``: the first of PANELS[panel]'s patterns that some logged name matches."""
    for pattern in PANELS[panel]:
        for key in sorted(metrics):
            if re.fullmatch(pattern, key):
                return key, metrics[key]
    return None


def held_out(metrics: Series) -> dict[str, tuple[str, list[tuple[int, float]]]]:
    """The held-out judge series logged (:data:`HELD_OUT` name -> (metric key, points)); the first data source's
    where verl validated on several."""
    found: dict[str, tuple[str, list[tuple[int, float]]]] = {}
    for key in sorted(metrics):
        match = _HELD_OUT_KEY.fullmatch(key)
        if match and match.group(1) not in found:
            found[match.group(1)] = (key, metrics[key])
    return {name: found[name] for name in HELD_OUT if name in found}


def plot_curves(metrics: Series, out: str | os.PathLike, title: str = "") -> Path:
    """A 2 x 2 PNG of the four panels (2 x 3 with the held-out judge panel when its series were logged); a panel
    with no matching metric says so instead of staying blank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    validation = held_out(metrics)
    if not validation and not any(pick(metrics, p) for p in PANELS):
        raise CurveError(f"none of the plotted metrics were logged; found: {', '.join(sorted(metrics)[:20])}")
    fig, axes = plt.subplots(2, 3 if validation else 2, figsize=(15 if validation else 10, 7))
    if validation:
        ax = axes.flat[4]
        ax.set_title(HELD_OUT_PANEL)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for name, (_, points) in validation.items():
            steps, values = zip(*points)
            ax.plot(steps, values, marker="o" if len(points) < 30 else None, markersize=3, label=name)
        ax.set_ylim(-0.05, 1.05)
        ax.axhline(0.5, color="gray", lw=0.5, ls=":")  # a_share of a judge without position preference
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        axes.flat[5].axis("off")
    for ax, panel in zip(axes.flat, PANELS):
        chosen = pick(metrics, panel)
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if chosen is None:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="gray")
            continue
        key, points = chosen
        steps, values = zip(*points)
        ax.plot(steps, values, marker="o" if len(points) < 30 else None, markersize=3)
        ax.set_ylabel(key, fontsize=8)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
