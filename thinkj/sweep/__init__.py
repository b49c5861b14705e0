"""Experiment sweeps: ``experiments/*.yaml`` -> named runs -> launched, resumable -> results JSON -> table.

Modules: ``spec`` (reading specs, grid expansion, stable run names), ``runner`` (launchers, state file, done
markers), ``table`` (filling the table through ``thinkj.tables``), ``cli`` (``thinkj sweep``).
"""

from thinkj.sweep.runner import DONE_FILE, LAUNCHERS, is_done, run_sweep
from thinkj.sweep.sweep_file import Run, SweepSpec, expand, load_spec

__all__ = ["DONE_FILE", "LAUNCHERS", "Run", "SweepSpec", "expand", "is_done", "load_spec", "run_sweep"]
