"""One stage of the reproduction pipeline (a shell command, what it makes, what its output depends on), and the
pieces every phase builds its commands from.

Below every phase (:mod:`thinkj.pipeline.prep`, :mod:`~thinkj.pipeline.learn`, :mod:`~thinkj.pipeline.evaluate`) and
the stage list (:mod:`thinkj.pipeline.plan`), so that none of them imports another to build a stage.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Stage:
    name: str
    argv: list[str]
    output: Path          # what the stage makes (checked to exist before its completion record is written)
    settings: dict[str, str] = field(default_factory=dict)  # what the output depends on (this stage and earlier)
    inputs: dict[str, Path] = field(default_factory=dict)  # role -> local file or folder it reads (content in its record)
    cell: str = ""        # the settings-named online run it belongs to (its folder's name; "" = shared by every run)

    @property
    def log(self) -> str:
        """Its log under ``<RUN_DIR>/logs``: ``<stage>.log``, or ``<cell>/<stage>.log`` for a stage of one online run,
        so that runs sharing a RUN_DIR (a sweep's cells) keep their online stages' output apart."""
        return f"{self.cell}/{self.name}.log" if self.cell else f"{self.name}.log"

    @property
    def line(self) -> str:
        return shlex.join(self.argv)

    @property
    def record(self) -> Path:
        """The completion record: the only thing that means this stage is done."""
        folder = self.output if not self.output.suffix else self.output.parent
        return folder / f"{self.name}.done.json"


@dataclass(frozen=True)
class Where:
    """What the data stages made and how the learning stages reach the model (from :func:`thinkj.pipeline.plan.plan`)."""

    run: Path
    source: Path          # the loaded training pairs
    seed: Path            # the seed set's folder
    hub: str              # the base model (hub id or local folder)
    profile: Path         # the model profile file
    planned: frozenset    # files a planned stage writes (inputs before they exist)
    base_local: bool      # the base model is a local folder (built by the model stage, or fetched): an input


def opt(flag: str, value: str) -> list[str]:
    """``[flag, value]``, or nothing for an unset (empty) setting."""
    return [flag, value] if value else []


def bf16(s: Mapping[str, str]) -> bool:
    """CPU_BF16 asked for, on the CPU, and native there (emulated bf16 is slower than fp32)."""
    if s["CPU_BF16"] != "1" or s["DEVICE"] != "cpu":
        return False
    from thinkj.train.config import cpu_has_bf16

    return cpu_has_bf16()


def hf_args(s: Mapping[str, str], batch: str) -> list[str]:
    """``--backend-arg`` items of an hf inference stage: its batch size, and bf16 weights with CPU_BF16."""
    if s["JUDGE_BACKEND"] != "hf":
        return []
    items = ([f"batch_size={batch}"] if batch else []) + (["dtype=bfloat16"] if bf16(s) else [])
    return [x for item in items for x in ("--backend-arg", item)]
