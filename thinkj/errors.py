"""Errors a user can fix (a bad row, a wrong name, a missing file) and how entry points report them.

Every such error derives from ``ThinkJError`` (a ``ValueError``). Entry points run under
``exit_on_user_error``: these errors -- and the operating system's "no such file", "is a directory",
"not a directory", undecodable (non-UTF-8) input -- print one ``error: …`` line naming the file, row or
setting and exit with status 2 (1 for ``StageIncomplete``: a stage that wrote what it could but is not
complete), instead of a traceback; ``THINKJ_TRACEBACK=1`` shows the traceback for debugging. An interrupt
(Ctrl-C) exits with 130 and says that rerunning the same command resumes: what "done", "resume" and
"cache" mean is in docs/runs.md.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

INTERRUPTED = ("interrupted — rerun the same command to resume (cached results and finished stages are kept; "
               "a training stage restarts from its last checkpoint or from scratch; see docs/runs.md)")
_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError)


class ThinkJError(ValueError):
    """Bad input or settings; the message says where and what."""


class UnknownNameError(ThinkJError, KeyError):
    """A name (template, preset, backend …) that is not registered; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class StageIncomplete(ThinkJError):
    """A stage wrote what it could but is not complete (failed calls, empty output): exit non-zero, rerun."""


def _one_line(err: BaseException) -> str:
    if isinstance(err, OSError) and not isinstance(err, ThinkJError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, UnicodeDecodeError):
        return f"input is not UTF-8 text (byte {err.start}: {err.reason}); is it a binary file?"
    return " ".join(str(err).split("\n")) if "\n" in str(err) else str(err)


def _from_interrupt(err: BaseException) -> bool:
    """Typer turns KeyboardInterrupt into ``Exit(130)`` -> ``SystemExit(130)``: look down the chain."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _interrupted() -> SystemExit:
    print(f"\n{INTERRUPTED}", file=sys.stderr)
    return SystemExit(130)


def exit_on_user_error(fn: Callable[[], T]) -> T:
    """Run an entry point; a user error or an interrupt ends it with a one-line message, not a traceback."""
    try:
        return fn()
    except (ThinkJError, UnicodeDecodeError, *_OS_ERRORS) as err:
        if os.environ.get("THINKJ_TRACEBACK"):
            raise
        print(f"error: {_one_line(err)}", file=sys.stderr)
        raise SystemExit(1 if isinstance(err, StageIncomplete) else 2) from None
    except KeyboardInterrupt:
        raise _interrupted() from None
    except SystemExit as stop:
        if stop.code == 130 and _from_interrupt(stop):
            raise _interrupted() from None
        raise


# -- checks shared by the entry points (one line naming the option, exit 2 through exit_on_user_error) -------

def check_range(name: str, value: float | int | None, *, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False) -> None:
    """``name`` must be a finite number within [low, high] (open ends where asked); ``None`` passes."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ThinkJError(f"{name} must be a finite number, got {value}")
    if low is not None and (value <= low if low_open else value < low):
        raise ThinkJError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value}")
    if high is not None and (value >= high if high_open else value > high):
        raise ThinkJError(f"{name} must be {'<' if high_open else '<='} {high:g}, got {value}")


def check_distinct_paths(src_name: str, src: str | os.PathLike, dst_name: str, dst: str | os.PathLike) -> None:
    """Refuse writing an output over its own input (``--in X --out X`` would destroy the input)."""
    if Path(src).resolve() == Path(dst).resolve():
        raise ThinkJError(f"{dst_name} {dst} is the same file as {src_name}: write the output elsewhere")


def check_input_file(name: str, path: str | os.PathLike) -> None:
    """An input that must be an existing file (not a folder)."""
    p = Path(path)
    if p.is_dir():
        raise ThinkJError(f"{path}: {name} is a folder, expected a file")
    if not p.exists():
        raise ThinkJError(f"{path}: {name} does not exist")


def _parents_are_folders(name: str, path: Path) -> None:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ThinkJError(f"{path}: {name}'s parent {parent} is a file, expected a folder")
            return


def check_output_file(name: str, path: str | os.PathLike) -> None:
    """An output file whose path must not be a folder, nor sit under a file."""
    p = Path(path)
    if p.is_dir():
        raise ThinkJError(f"{path}: {name} is an existing folder, expected a file path")
    _parents_are_folders(name, p)


def check_output_dir(name: str, path: str | os.PathLike) -> None:
    """An output folder whose path must not be an existing file, nor sit under a file."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ThinkJError(f"{path}: {name} is an existing file, expected a folder")
    _parents_are_folders(name, p)
