"""Errors a user can fix (a bad row, a wrong name, a missing file) and how entry points report them.

Every such error derives from ``ThinkJError`` (a ``ValueError``). Entry points run under
``exit_on_user_error``: these errors -- and the operating system's "no such file", "is a directory",
"not a directory", undecodable (non-UTF-8) input, a write the file system refuses (full disk, quota,
read-only) -- print one ``error: …`` line naming the file, row or setting and exit with status 2 (1 for
``StageIncomplete``: a stage that wrote what it could but is not complete), instead of a traceback;
``THINKJ_TRACEBACK=1`` shows the traceback for debugging. An interrupt (Ctrl-C) exits with 130 and says that
rerunning the same command resumes: what "done", "resume" and "cache" mean is in docs/runs.md.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

INTERRUPTED = ("interrupted — rerun the same command to resume (cached results and finished stages are kept; "
               "a training stage restarts from its last checkpoint or from scratch; see docs/runs.md)")
# ConnectionError: the hub or a server cannot be reached (``datasets`` raises it offline with a clear message).
_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError, ConnectionError)
# A full disk, quota or read-only file system met by a writer that does not name its file itself (thinkj.atomic's
# writers do): still one line, not a traceback.
_WRITE_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG, errno.EROFS) if e)


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
    if isinstance(err, OSError) and err.errno in _WRITE_ERRNOS:
        return f"a write failed: {err.strerror or err}"
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
    except OSError as err:
        if err.errno not in _WRITE_ERRNOS or os.environ.get("THINKJ_TRACEBACK"):
            raise
        print(f"error: {_one_line(err)}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        raise _interrupted() from None
    except SystemExit as stop:
        if stop.code == 130 and _from_interrupt(stop):
            raise _interrupted() from None
        raise


def _script_name() -> str | None:
    """The console script's name for usage lines, or None (click's own guess) under ``python file.py`` / ``-m`` /
    ``-c``: click would otherwise name ``python -m <pkg>`` when the command runs in process under another module's
    __main__ (the pipeline's stages under ``python -m pytest``)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return None if not name or name.endswith(".py") or name.startswith("-") else name


def run_typer(app: Callable[..., object]) -> None:
    """Run a Typer app so that its usage errors, too, are one ``error: …`` line (exit 2), and Ctrl-C prints the
    interrupt line: click's standalone mode would print a usage box, and Typer turns KeyboardInterrupt into
    ``Exit(130)`` before any handler of ours sees it. Call it under :func:`exit_on_user_error`."""
    try:  # Typer >= 0.20 vendors click as typer._click
        from typer._click.exceptions import ClickException, NoArgsIsHelpError
        from typer.exceptions import Abort
    except ImportError:  # pragma: no cover - older Typer on the real click
        from click.exceptions import Abort, ClickException, NoArgsIsHelpError

    try:
        status = app(standalone_mode=False, prog_name=_script_name())
    except Abort:
        raise _interrupted() from None
    except NoArgsIsHelpError as err:  # a bare group: its help, as standalone mode prints it
        err.show()
        raise SystemExit(err.exit_code) from None
    except ClickException as err:
        print(f"error: {' '.join(err.format_message().split())}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    if status == 130:
        raise _interrupted()
    if isinstance(status, int) and not isinstance(status, bool) and status:
        raise SystemExit(status)
