"""Errors a user can fix (a bad row, a wrong name, a missing file) and how entry points report them.

Every such error derives from ``ThinkJError`` (a ``ValueError``). Entry points run under
``exit_on_user_error``: these errors print one ``error: …`` line naming the file, row or setting and exit
with status 2, instead of a traceback; ``THINKJ_TRACEBACK=1`` shows the traceback for debugging. An
interrupt (Ctrl-C) exits with 130 and says that rerunning the same command resumes: inference, evaluation,
sweeps and the reproduction scripts keep their finished work (result cache, per-stage outputs); a training
stage starts over.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ThinkJError(ValueError):
    """Bad input or settings; the message says where and what."""


class UnknownNameError(ThinkJError, KeyError):
    """A name (template, preset, backend …) that is not registered; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


def exit_on_user_error(fn: Callable[[], T]) -> T:
    """Run an entry point; a user error or an interrupt ends it with a one-line message, not a traceback."""
    try:
        return fn()
    except (ThinkJError, FileNotFoundError) as err:
        if os.environ.get("THINKJ_TRACEBACK"):
            raise
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("\ninterrupted: cached results and finished stages are kept; rerun the same command to resume "
              "(a training stage starts over)", file=sys.stderr)
        raise SystemExit(130) from None
