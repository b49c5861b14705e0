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
if str(ROOT / "scripts" / "speed") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts" / "speed"))  # worst_case: pathological inputs shared with the speed scripts

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


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked ``opt_in`` run only when the mark expression names them (``-m opt_in``): minutes of engine
    time each, kept out of ``make test`` so that CI stays within its budget."""
    if "opt_in" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="opt-in: minutes of engine time; select with -m opt_in")
    for item in items:
        if "opt_in" in item.keywords:
            item.add_marker(skip)


# A log line whose handler's stream is gone is dropped, not reported as a "--- Logging error ---" traceback into
# whatever stderr a later test captures (logging's production setting; the fixture below repoints what it can).
logging.raiseExceptions = False


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
            if isinstance(handler, logging.StreamHandler) and stream not in (sys.__stderr__, sys.__stdout__):
                handler.stream = sys.__stderr__  # not setStream: it flushes the old stream, which may be closed
