"""Table 1 (count after each filter) from the stage summaries of a run folder.

    python -m data_prep.table1 runs/limj
    python -m data_prep.table1 runs/cpu/tiny/data --initial 10000

Same as ``thinkj data table1``.
"""

from __future__ import annotations

from thinkj.data.cli import app
from thinkj.errors import exit_on_user_error

if __name__ == "__main__":
    exit_on_user_error(lambda: app(["table1", *__import__("sys").argv[1:]]))
