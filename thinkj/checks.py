"""Checks the entry points run on their options and paths before any work: one ``ThinkJError`` line naming the
option (exit 2 through :func:`thinkj.errors.exit_on_user_error`), never a traceback or a half-written output.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path
from typing import NoReturn

from thinkj.errors import ThinkJError

_DEVICE = re.compile(r"^(auto|cpu|gpu|mps|cuda(:\d+)?)$")


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


def check_sampling(temperature: float | None = None, top_p: float | None = None, max_new_tokens: int | None = None,
                   k: int | None = None) -> None:
    check_range("--temperature", temperature, low=0)
    check_range("--top-p", top_p, low=0, low_open=True, high=1)
    check_range("--max-new-tokens", max_new_tokens, low=1)
    check_range("--k", k, low=1)


def check_device(option: str, device: str | None) -> None:
    if device is not None and not _DEVICE.match(device):
        raise ThinkJError(f"{option} {device!r}: unknown device; use auto, cpu, gpu, cuda, cuda:N or mps")


def check_template_kind(option: str, name: str, kinds: tuple[str, ...]) -> None:
    """A prompt template must exist and be of a kind the command can use (a critic prompt cannot judge)."""
    from thinkj.prompts import get_template

    kind = get_template(name).kind
    if kind not in kinds:
        raise ThinkJError(f"{option} {name}: a {kind} template; this command needs a {' or '.join(kinds)} template")


class OneLineParser(argparse.ArgumentParser):
    """argparse for the thin entry points, with the project's error style: one ``error: …`` line, exit 2
    (argparse's own prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {' '.join(message.split())} (see {self.prog} --help)\n")
