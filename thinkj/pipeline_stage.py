"""One stage of the reproduction pipeline: a shell command, what it makes, and what its output depends on.

Its own module, below :mod:`thinkj.pipeline` (which plans and runs the stages) and :mod:`thinkj.pipeline_prep`
(which adds the CPU scale's model and task stages), so that neither imports the other to build one.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Stage:
    name: str
    argv: list[str]
    output: Path          # what the stage makes (checked to exist before its completion record is written)
    settings: dict[str, str] = field(default_factory=dict)  # what the output depends on (this stage and earlier)
    inputs: dict[str, Path] = field(default_factory=dict)  # role -> local file or folder it reads (content in its record)

    @property
    def line(self) -> str:
        return shlex.join(self.argv)

    @property
    def record(self) -> Path:
        """The completion record: the only thing that means this stage is done."""
        folder = self.output if not self.output.suffix else self.output.parent
        return folder / f"{self.name}.done.json"
