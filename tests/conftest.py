"""Shared fixtures: project-owned caches, offline hub, the tiny model built once per session."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("THINKJ_SHARED_DATA", ROOT.parent / "shared" / "data"))

os.environ.setdefault("THINKJ_CACHE", str(ROOT / ".cache"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # each xdist worker its own Ray temp dir: a bare ray.init() joins the cluster named in its temp dir's
    # ray_current_cluster, so a test must never find the other worker's there
    os.environ["RAY_TMPDIR"] = os.path.join(os.environ.get("RAY_TMPDIR") or "/tmp/ray", os.environ["PYTEST_XDIST_WORKER"])
    # the cores shared out between the workers (their engines' subprocesses inherit it): two workers each running
    # torch's thread pool over every core only wait on each other
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
if str(ROOT / "scripts" / "speed") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts" / "speed"))  # worst_case: pathological inputs shared with the speed scripts

from xdist_groups import ENGINES, unit_of  # noqa: E402  (tests/ is on sys.path)

from thinkj.paths import setup_caches  # noqa: E402

setup_caches()


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with the reason when it is not there."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available: {path} (the shared data folder sits beside the checkout in CI)")
    return path


def load_script(relative_path: str) -> ModuleType:
    """Import a script of the repository that is not in a package (e.g. ``experiments/judge_reward_cpu.py``)."""
    path = ROOT / relative_path
    name = "_".join(Path(relative_path).with_suffix("").parts)  # experiments_judge_reward_cpu: no clash with a real module
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class body runs
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    from thinkj.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="session")
def judge(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny model after a short fine-tune on Think-J answers: it writes parsable verdicts (about 70 %), so a
    reward has variance. One per session: the verl and TRL engine tests read it, none writes into it."""
    from thinkj.models.tiny import finetune_tiny_judge

    return finetune_tiny_judge(tiny_model_dir, tmp_path_factory.mktemp("judge") / "model")


# pytest-xdist (make test: two workers): every test file is one unit of work, so a module's fixtures are built once;
# the files that start verl or Ray form one unit, those that start vLLM another (tests/xdist_groups.py), so no two
# of them ever run at once. (xdist's own --dist loadgroup cannot do this under pytest 9: it renames test ids through
# an attribute pytest no longer reads.)
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # keep the collection order below: the longest units first
    return FileUnits(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked ``opt_in`` run only when the mark expression names them (``-m opt_in``): minutes of engine
    time each, kept out of ``make test`` so that CI stays within its budget. Under xdist the engine group goes first,
    then the files with slow tests (the longest units start first, the short ones fill the end)."""
    if "opt_in" not in (config.option.markexpr or ""):
        skip = pytest.mark.skip(reason="opt-in: minutes of engine time; select with -m opt_in")
        for item in items:
            if "opt_in" in item.keywords:
                item.add_marker(skip)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files' own order
    rank: dict[str, int] = {}
    for item in items:
        unit = unit_of(item.nodeid)
        slow = item.get_closest_marker("slow") is not None and "opt_in" not in item.keywords
        rank[unit] = min(rank.get(unit, 2), 0 if unit == ENGINES else 1 if slow else 2)
    items.sort(key=lambda item: rank[unit_of(item.nodeid)])  # stable: a file's tests stay together, in their order


def pytest_configure(config) -> None:
    global _TIMELINE
    # the controller of an xdist run reports its workers' tests again: only the processes that run tests write
    distributed = getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER")
    _TIMELINE = None if distributed else os.environ.get("THINKJ_TEST_TIMELINE")


_TIMELINE: str | None = None


@pytest.hookimpl(trylast=True)
def pytest_runtest_logstart(nodeid, location) -> None:
    _timeline("start", nodeid)


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location) -> None:
    _timeline("end", nodeid)


def _timeline(event: str, nodeid: str) -> None:
    """With THINKJ_TEST_TIMELINE=FILE, one line per test start and end (time, worker, id): where a run's wall time
    went, worker by worker (scripts/speed/test_timeline.py sums it up)."""
    if _TIMELINE:
        import time

        with open(_TIMELINE, "a") as out:
            out.write(f"{time.time():.1f}\t{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{event}\t{nodeid}\n")


# A log line whose handler's stream is gone is dropped, not reported as a "--- Logging error ---" traceback into
# whatever stderr a later test captures (logging's production setting; the fixture below repoints what it can).
logging.raiseExceptions = False


# Their own stream on the process's file descriptor 2, not sys.__stderr__ itself: a library that closes its handler's
# stream would otherwise close the interpreter's stderr for every later test (under xdist, a worker's
# test_stage_runner.py then failed to flush sys.stderr: "I/O operation on closed file").
_HANDLER_STDERR = open(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115


@pytest.fixture(autouse=True)
def _logging_back_to_the_real_stderr():
    """After each test, point every logging handler made during it at the process's real stderr. A library that
    builds its handler inside an in-process engine run (transformers, LlamaFactory) binds it to that test's captured
    stream, which pytest closes afterwards; every later log line was then a "Logging error" traceback in the next
    tests' captured stderr, where the one-line-error checks read it."""
    yield
    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if type(handler).__module__.startswith("_pytest") or isinstance(handler, logging.FileHandler) \
                    or type(handler).__name__ == "_StderrHandler":  # logging's last resort follows sys.stderr itself
                continue
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and stream not in (_HANDLER_STDERR, sys.__stdout__):
                handler.stream = _HANDLER_STDERR  # not setStream: it flushes the old stream, which may be closed
