"""thinkj.locks.exclusive with real processes: a second holder waits for the first, and a killed holder's lock is
released by the kernel (no stale lock)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from thinkj.locks import exclusive

HOLD = """
import sys, time
from thinkj.locks import exclusive
with exclusive(sys.argv[1], "holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(lock: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"  # the lock is taken before we go on
    return proc


def test_second_holder_waits_for_the_first_and_says_so(tmp_path):
    lock = tmp_path / "cache" / ".model.lock"
    first = _holder(lock, 1.5)
    said: list[str] = []
    start = time.monotonic()
    with exclusive(lock, "fetch smollm2", said.append):
        waited = time.monotonic() - start  # the first holder slept 1.5 s after taking the lock
    first.wait()
    assert waited > 1.0 and len(said) == 1 and "waiting" in said[0] and str(lock) in said[0]


def test_killed_holder_leaves_no_stale_lock(tmp_path):
    lock = tmp_path / ".model.lock"
    holder = _holder(lock, 60)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    said: list[str] = []
    with exclusive(lock, "fetch", said.append):
        pass
    assert said == []  # free at once


def test_uncontended_lock_is_silent_and_reentrant_across_calls(tmp_path):
    said: list[str] = []
    for _ in range(2):
        with exclusive(tmp_path / "x.lock", "fetch", said.append):
            pass
    assert said == []
