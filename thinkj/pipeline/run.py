"""Running the stage list: each stage's command, its completion record, the run's logs and timings; and the
entries ``thinkj run RECIPE`` (:func:`run_recipe`) and ``python -m thinkj.pipeline`` (:func:`main`).

The loop, the records and the logs are :mod:`thinkj.pipeline.stage_runner`'s; this module hands it the planned
stages (:func:`thinkj.pipeline.plan.plan`) and serves what a stage needs around its command (the scripted teacher,
a fetched catalog model, the Ray cluster's preflight).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.folder_swap import promote
from thinkj.paths import PROJECT_ROOT
from thinkj.pipeline import prep, stage_runner
from thinkj.pipeline.plan import ALWAYS_RUN, STAGE_SEEDS, plan, validate
from thinkj.pipeline.settings import BY_NAME, DEFAULTS, env_settings, resolve
from thinkj.pipeline.stage import Stage
from thinkj.pipeline.stage_runner import fingerprints
from thinkj.records import write_json


class StageFailed(ThinkJError):
    """A stage's command failed; the message names the stage and its log."""


class StageStopped(StageFailed, stage_runner.StageStopped):
    """A stage's command was stopped by SIGINT or SIGTERM: a process waiting for the stage runs it (no failure note)."""


def merge_verl(checkpoints: Path, out: Path) -> None:
    """Merge verl's newest actor checkpoint (``latest_checkpointed_iteration.txt``) into an HF model folder."""
    marker = checkpoints / "latest_checkpointed_iteration.txt"
    if not marker.exists():
        raise FileNotFoundError(f"{marker} missing: the verl run did not save a checkpoint")
    actor = checkpoints / f"global_step_{marker.read_text().strip()}" / "actor"
    script = PROJECT_ROOT / "scripts" / "merge_verl_checkpoint.sh"
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.run(["bash", str(script), str(actor), str(tmp)])
    if proc.returncode != 0:
        raise StageFailed(f"merging {actor} into {out} failed (exit {proc.returncode})")
    promote(tmp, out)  # a half-merged folder never sits under the final name; the old one goes only after the swap


def _counts(output: Path) -> dict[str, object]:
    """What the completion record says the stage made: lines of a JSONL, files of a folder, the stage summary."""
    counts: dict[str, object] = {}
    if output.is_file() and output.suffix == ".jsonl":
        with open(output, "rb") as handle:
            counts["rows"] = sum(1 for line in handle if line.strip())
    elif output.is_dir():
        counts["files"] = sum(1 for p in output.rglob("*") if p.is_file())
    summary = output.with_suffix(".summary.json") if output.suffix else output / f"{output.name}.summary.json"
    if summary.is_file():
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
            counts.update({k: data[k] for k in ("n_in", "n_out") if k in data})
        except ValueError:
            pass
    return counts


def input_fingerprints(stage: Stage) -> dict[str, str | None]:
    """What each local input of the stage holds (:func:`thinkj.pipeline.stage_runner.fingerprints`); a local source folder
    with all its files."""
    return fingerprints(stage.inputs, recursive=("source",))


def write_record(stage: Stage, inputs: dict[str, str | None] | None = None) -> Path:
    """The stage's last act: its completion record (settings, inputs' content, command, counts), by temp file +
    rename, through the one record writer (:func:`thinkj.pipeline.stage_runner.write_record`). ``inputs`` are the
    fingerprints taken when the stage started (now, when not given)."""
    return stage_runner.write_record(stage.record, stage.name, stage.settings,
                                     input_fingerprints(stage) if inputs is None else inputs, stage.inputs,
                                     **_details(stage))


def _details(stage: Stage) -> dict[str, object]:
    return {"argv": stage.argv, "output": str(stage.output), "counts": _counts(stage.output)}


# A record made with other settings or on other input content stops the run with this advice.
REDO_HINT = "use another RUN_DIR, or delete that record to redo the stage and everything after it"


def _program(name: str) -> str:
    """A stage's program from this installation: ``python`` is this interpreter, a console script (``thinkj``) the one
    beside it when there is one (a run started as ``.venv/bin/thinkj run`` without the venv on PATH finds it)."""
    if name == "python":
        return sys.executable
    local = Path(sys.executable).parent / name
    return str(local) if "/" not in name and local.is_file() else name


def _step(stage: Stage, in_process: bool = False) -> stage_runner.Step:
    """The stage as the shared loop runs it: its command, output shown and logged (or, ``in_process``, run inside
    this process with its output in the log), then the output checked."""

    def work(log: Path) -> dict[str, object]:
        command = [_program(stage.argv[0]), *stage.argv[1:]]  # the same program in process or as a child
        status = (stage_runner.run_in_process if in_process else stage_runner.run_logged)(command, log)
        if status != 0:
            failure = StageStopped if status in stage_runner.STOP_STATUSES else StageFailed
            raise failure(f"stage {stage.name} failed (exit {status}); its log: {log}")
        if not stage.output.exists():
            raise StageFailed(f"stage {stage.name} exited 0 but did not write {stage.output}; its log: {log}")
        return _details(stage)

    return stage_runner.Step(stage.name, stage.record, stage.settings, work, inputs=lambda: stage.inputs,
                             recursive=("source",), always=stage.name in ALWAYS_RUN, log=stage.log,
                             brief=lambda record: " ".join(f"{k}={v}" for k, v in (record.get("counts") or {}).items()))


def is_done(stage: Stage) -> bool:
    """True when the stage's completion record exists and was made with the same settings on the same input
    content; a record made otherwise is an error naming the difference (reusing it would hand later stages
    another experiment's output). A damaged record is not a completion record."""
    return _step(stage).check(REDO_HINT)[0] is not None


def run_pipeline(s: dict[str, str], out=sys.stdout) -> list[str]:
    """Run (or with DRY_RUN=1 print) the stages in order; returns the names of the stages that ran. The loop,
    the records and the logs are :mod:`thinkj.pipeline.stage_runner`'s."""
    dry = s.get("DRY_RUN") == "1"
    if not dry:  # before validate, which reads the fetched folder
        prep.check(s)
        prep.fetch_catalog_model(s, out)
    validate(s)
    stages = plan(s)
    teacher_needed = not dry and not all(is_done(st) for st in stages if st.name == "traces")
    with prep.scripted_teacher(s, teacher_needed, out) as served:  # stopped however the run ends
        return _run_stages(served, out)


def _run_stages(s: dict[str, str], out) -> list[str]:
    dry = s["DRY_RUN"] == "1"
    stages = plan(s)
    key = s["TEACHER_KEY_ENV"]
    if not dry and not os.environ.get(key) and not all(is_done(st) for st in stages if st.name == "traces"):
        # Checked now, not hours later when the difficulty filter is done and the traces stage starts.
        raise ThinkJError(f"TEACHER_KEY_ENV={key}: the variable {key} holding the teacher's API key is not set "
                          "(the traces stage needs it; any value for a local teacher that takes none)")
    if not dry and s["RL_ENGINE"] == "verl" and any(st.name == "online" and not is_done(st) for st in stages):
        # now, not after the data stages: a missing node or no cluster at all is found in seconds
        from thinkj.online.ray_cluster import preflight

        print(f"# {preflight(int(s['NNODES']), int(s['GPUS_PER_NODE']), s['DEVICE'])}", file=out, flush=True)
    by_name = {stage.name: stage for stage in stages}

    def announce(step: stage_runner.Step, event: str) -> None:
        stage = by_name[step.name]
        if event == "skip":
            print(f"# skip {stage.name}: done ({stage.record})", file=out, flush=True)
        else:
            print(f"# stage {stage.name} -> {stage.output}", file=out, flush=True)
            print(stage.line, file=out, flush=True)

    logs = Path(s["RUN_DIR"]) / "logs"
    steps = [_step(stage, in_process=s["IN_PROCESS"] == "1") for stage in stages]
    compared: list[dict] = []  # read while the compare stage holds its lock (a run with these settings may rewrite it)
    for step, stage in zip(steps, stages, strict=True):
        if stage.name == "compare":
            step.done = lambda record, skipped, path=stage.output: compared.append(
                json.loads(path.read_text(encoding="utf-8")))
    outcome = stage_runner.run_steps(steps, hint=REDO_HINT, logs=logs, out=out, dry=dry, announce=announce)
    if not dry:  # every stage's wall and CPU seconds (a skipped one's as recorded)
        times = stage_runner.timings_record(outcome.seconds, outcome.cpu_seconds, ran=outcome.ran,
                                            skipped=outcome.skipped)
        cells = sorted({stage.cell for stage in stages if stage.cell})  # one at most: this run's online run
        # beside the online run's logs: runs that share a RUN_DIR with other online settings each keep their own
        timings = write_json(logs.joinpath(*cells) / "stage_times.json", times)
        if compared:  # the rows' table on the terminal (the stage's own output went to its log)
            from thinkj.evaluation.row_compare import print_results

            print_results(compared[-1])
        table = next((f"; the rows' table: {stage.output}" for stage in stages if stage.name == "compare"), "")
        print(f"\nstage time {times['total_seconds']:.0f} s wall, {times['total_cpu_seconds']:.0f} s CPU ({timings}); "
              f"stage logs: {logs}/<stage>.log" + "".join(f", the online run's: {logs}/{c}/<stage>.log" for c in cells)
              + table, file=out, flush=True)
    return outcome.ran


def run_recipe(recipe: str | os.PathLike | None, sets: Iterable[str] = (), *, dry_run: bool = False) -> list[str]:
    """``thinkj run RECIPE``: resolve the settings, then validate and run (or print) the pipeline. A value the
    pipeline refuses is named with where it came from (``TP='0': ... (from configs/recipes/x.yaml: tp)``)."""
    if recipe is not None and not Path(recipe).is_file():
        raise ThinkJError(f"{recipe}: no such recipe file (the recipes: configs/recipes/*.yaml)")
    if dry_run:  # --dry-run wins over a dry_run= item (one key, given once to the parser)
        sets = [item for item in sets if item.partition("=")[0].strip() != "dry_run"] + ["dry_run=1"]
    resolved = resolve(recipe, sets=list(sets))
    try:
        return run_pipeline(resolved.values)
    except ThinkJError as exc:
        name = re.match(r"[A-Z][A-Z0-9_]*", str(exc))
        suffix = resolved.where(name.group(0)) if name and name.group(0) in BY_NAME else ""
        if not suffix:
            raise
        raise ThinkJError(f"{exc}{suffix}") from None


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge-verl"] and len(argv) == 3:
        merge_verl(Path(argv[1]), Path(argv[2]))
    elif argv[:1] == ["build-model"] and len(argv) == 3:
        prep.build_model(argv[1], Path(argv[2]))
    elif argv == ["--print-env"]:
        for name, value in env_settings().items():
            print(f"{name}={value}    # {DEFAULTS[name][1]}")
            if name == "SEED":
                print("\n".join(f"#   {stage}: {seed}" for stage, seed in STAGE_SEEDS.items()))
    elif not argv:
        run_pipeline(env_settings())
    else:
        sys.exit("usage: python -m thinkj.pipeline [--print-env | merge-verl CHECKPOINTS OUT | build-model NAME DIR]")
