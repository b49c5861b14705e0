"""What a run prepares for itself before ``load``, from its settings alone (the CPU rehearsal's recipes use all of it):

* ``BUILD_MODEL=tiny``: a ``model`` stage builds the tiny model in ``<RUN_DIR>/model`` and writes its profile beside
  it (``<RUN_DIR>/model/tiny.yaml``: configs/models/tiny.yaml's settings, pointing at the built model); that profile
  is MODEL_PROFILE unless one is given.
* ``SYNTHETIC_TASK=fruit|facts|constraints``: a ``task`` stage writes the generated task's training and held-out
  pairs (``<RUN_DIR>/task/{train,test}.jsonl``, TASK_TRAIN / TASK_TEST / TASK_SEED); they are SOURCE_LOCATION and
  the ``synthetic`` benchmark's BENCHMARK_DATA unless given.
* ``SHARED_DATA=<folder>``: Auto-J and RM-Bench are evaluated too (added to a BENCHMARKS that the environment or
  ``--set`` did not give), read from ``<folder>/auto-j/testdata_pairwise.jsonl`` and ``<folder>/rm-bench``.
* ``TEACHER_URL=scripted``: the run serves the scripted R1 teacher for SYNTHETIC_TASK itself, on a free port of
  127.0.0.1, only while the ``traces`` stage is still to run, and stops it however the run ends.
* a profile naming a catalog model (``thinkj_model: smollm2``) is fetched before stage 1 (a no-op once fetched).

The defaults above are filled in by :func:`derive_defaults` when the settings are resolved, so a dry run prints the
paths a real run uses.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError

SCRIPTED = "scripted"  # TEACHER_URL's value for "serve the scripted teacher for this run"
# what a dry run prints for the scripted teacher (the port is chosen when a run starts it); records keep
# http://127.0.0.1:*/v1 either way (thinkj.pipeline.plan.record_value)
SCRIPTED_PLACEHOLDER = "http://127.0.0.1:PORT/v1"
BUILDABLE = ("tiny",)  # BUILD_MODEL's values: configs/models/<name>.yaml is the profile a built model copies
SHARED_BENCHMARKS = {"autoj": "auto-j/testdata_pairwise.jsonl", "rmbench": "rm-bench"}  # under SHARED_DATA


def task_files(run_dir: str | os.PathLike) -> tuple[Path, Path]:
    """The generated task's training and held-out pairs in a run folder."""
    folder = Path(run_dir) / "task"
    return folder / "train.jsonl", folder / "test.jsonl"


def built_profile_path(run_dir: str | os.PathLike, name: str) -> Path:
    return Path(run_dir) / "model" / f"{name}.yaml"


def derive_defaults(values: dict[str, str], given: Callable[[str], bool]) -> None:
    """Fill in what BUILD_MODEL, SYNTHETIC_TASK and SHARED_DATA imply where ``given(name)`` says the setting was not
    set (the run folder is already resolved)."""
    run = values["RUN_DIR"]
    if values["BUILD_MODEL"] and not given("MODEL_PROFILE"):
        values["MODEL_PROFILE"] = str(built_profile_path(run, values["BUILD_MODEL"]))
    benches = values["BENCHMARKS"].split()
    data = shlex.split(values["BENCHMARK_DATA"])  # a bad value is refused by validate, naming the setting
    if values["SHARED_DATA"] and not given("BENCHMARKS", outside_recipe=True):
        benches += [name for name in SHARED_BENCHMARKS if name not in benches]
        values["BENCHMARKS"] = shlex.join(benches)
    extra: dict[str, str] = {}
    if values["SYNTHETIC_TASK"]:
        train, test = task_files(run)
        if not given("SOURCE_LOCATION"):
            values["SOURCE_LOCATION"] = str(train)
        extra["synthetic"] = str(test)
    if values["SHARED_DATA"]:
        extra.update({name: f"{values['SHARED_DATA']}/{where}" for name, where in SHARED_BENCHMARKS.items()})
    named = {item.partition("=")[0] for item in data}
    data += [f"{name}={where}" for name, where in extra.items() if name in benches and name not in named]
    values["BENCHMARK_DATA"] = shlex.join(data)


def planned_files(s: Mapping[str, str]) -> set[Path]:
    """Files a planned stage writes before anything reads them: checked by the stages, not for existence first."""
    return set(task_files(s["RUN_DIR"])) if s["SYNTHETIC_TASK"] else set()


def check(s: Mapping[str, str]) -> None:
    """The preparation settings' values and rules, in one line naming the setting."""
    from thinkj.synthetic.tasks import TASKS

    if s["SYNTHETIC_TASK"] and s["SYNTHETIC_TASK"] not in TASKS:
        raise ThinkJError(f"SYNTHETIC_TASK={s['SYNTHETIC_TASK']!r}: must be one of {', '.join(TASKS)} or empty (none)")
    for name in ("TASK_TRAIN", "TASK_TEST"):
        if not s[name].isdigit() or int(s[name]) < 1:
            raise ThinkJError(f"{name}={s[name]!r}: must be a whole number >= 1")
    if not s["TASK_SEED"].isdigit():
        raise ThinkJError(f"TASK_SEED={s['TASK_SEED']!r}: must be a whole number >= 0")
    if s["BUILD_MODEL"] and s["BUILD_MODEL"] not in BUILDABLE:
        raise ThinkJError(f"BUILD_MODEL={s['BUILD_MODEL']!r}: must be one of {', '.join(BUILDABLE)} or empty (none)")
    if s["TEACHER_URL"] == SCRIPTED and not s["SYNTHETIC_TASK"]:
        raise ThinkJError("TEACHER_URL='scripted': the scripted teacher knows only a generated task's rules: set "
                          "SYNTHETIC_TASK")
    if s["SHARED_DATA"] and s["DRY_RUN"] != "1" and not Path(s["SHARED_DATA"]).is_dir():
        raise ThinkJError(f"SHARED_DATA={s['SHARED_DATA']!r}: no such folder")


def built_profile(s: Mapping[str, str]) -> dict[str, Any] | None:
    """The profile the ``model`` stage will write, when MODEL_PROFILE is it; else ``None``."""
    if not s["BUILD_MODEL"] or Path(s["MODEL_PROFILE"]) != built_profile_path(s["RUN_DIR"], s["BUILD_MODEL"]):
        return None
    from thinkj.models.profiles import CONFIGS
    from thinkj.yaml_strict import read_yaml

    profile = dict(read_yaml(CONFIGS / "models" / f"{s['BUILD_MODEL']}.yaml"))
    profile["model_name_or_path"] = str(Path(s["MODEL_PROFILE"]).parent.resolve())
    return profile


def stages(s: Mapping[str, str]) -> list:
    """The ``model`` and ``task`` stages (each only when its setting asks for it)."""
    from thinkj.pipeline.stage import Stage

    out = []
    if s["BUILD_MODEL"]:
        profile = built_profile_path(s["RUN_DIR"], s["BUILD_MODEL"])
        out.append(Stage("model", ["python", "-m", "thinkj.pipeline", "build-model", s["BUILD_MODEL"],
                                   str(profile.parent)], profile))
    if s["SYNTHETIC_TASK"]:
        train, test = task_files(s["RUN_DIR"])
        out.append(Stage("task", ["thinkj", "data", "task", s["SYNTHETIC_TASK"], str(test.parent), "--train",
                                  s["TASK_TRAIN"], "--test", s["TASK_TEST"], "--seed", s["TASK_SEED"]], test))
    return out


def build_model(name: str, folder: Path) -> None:
    """The ``model`` stage: build the model, then (last, so it means "built") its profile beside it."""
    import yaml

    from thinkj.atomic import write_text_atomic
    from thinkj.models.profiles import CONFIGS
    from thinkj.models.tiny import build_tiny_model
    from thinkj.yaml_strict import read_yaml

    if name not in BUILDABLE:
        raise ThinkJError(f"BUILD_MODEL={name!r}: must be one of {', '.join(BUILDABLE)}")
    build_tiny_model(folder)
    profile = dict(read_yaml(CONFIGS / "models" / f"{name}.yaml"))
    profile["model_name_or_path"] = str(folder.resolve())
    write_text_atomic(built_profile_path(folder.parent, name), yaml.safe_dump(profile, sort_keys=False))


def fetch_catalog_model(s: Mapping[str, str], out) -> None:
    """Fetch the profile's catalog model (``thinkj_model:``) before stage 1, as ``thinkj models fetch`` does."""
    if built_profile(s):
        return
    from thinkj.models.profiles import profile_path
    from thinkj.yaml_strict import read_yaml

    data = read_yaml(profile_path(s["MODEL_PROFILE"]))
    if isinstance(data, dict) and isinstance(data.get("thinkj_model"), str):
        from thinkj.models.fetch import fetch_model

        fetch_model(data["thinkj_model"], log=lambda line: print(f"# {line}", file=out, flush=True))


@contextlib.contextmanager
def scripted_teacher(s: Mapping[str, str], needed: bool, out) -> Iterator[dict[str, str]]:
    """The settings with TEACHER_URL the scripted teacher's address: served on a free 127.0.0.1 port while the
    ``with`` block runs when ``needed`` (a real run whose traces are not done), else the dry run's placeholder. The
    teacher takes any API key: TEACHER_KEY_ENV's variable gets one when unset."""
    if s["TEACHER_URL"] != SCRIPTED:
        yield dict(s)
        return
    os.environ.setdefault(s["TEACHER_KEY_ENV"], "none")
    if not needed:
        yield {**s, "TEACHER_URL": SCRIPTED_PLACEHOLDER}
        return
    from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer

    server = TeacherServer(TeacherConfig(task=s["SYNTHETIC_TASK"]), model=s["TEACHER_MODEL"]).start()
    print(f"# scripted teacher for the {s['SYNTHETIC_TASK']} task on {server.base_url}", file=out, flush=True)
    try:
        yield {**s, "TEACHER_URL": server.base_url}
    finally:
        server.stop()
