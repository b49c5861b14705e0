"""Experiment sweeps: ``experiments/*.yaml`` -> named runs -> launched, resumable -> results JSON -> table.

Modules: ``sweep_file`` (reading specs, grid expansion, stable run names), ``recipe_runs`` (a recipe sweep's runs:
``thinkj run RECIPE --set ...``, fields checked against the run settings), ``runner`` (launchers, state file, done
markers), ``table`` (filling the table through ``thinkj.tables``), ``cli`` (``thinkj sweep``).
"""

from thinkj.sweep.runner import DONE_FILE, LAUNCHERS, is_done, run_sweep
from thinkj.sweep.sweep_file import Run, SweepSpec, expand, load_spec

__all__ = ["DONE_FILE", "LAUNCHERS", "Run", "SweepSpec", "expand", "is_done", "load_spec", "run_sweep"]
