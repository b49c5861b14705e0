"""The pipeline's checks of settings: list-valued ones (LlamaFactory and verl overrides, BENCHMARK_DATA) and the
small value rules (a whole number, a finite number, one of a list). Each fails in one line naming the setting,
before stage 1; :mod:`thinkj.pipeline.plan` (``validate``, ``plan``) and :mod:`thinkj.pipeline.learn` call them."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.pipeline.prep import planned_files


def _split(name: str, value: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise ThinkJError(f"{name}={value!r}: {exc}") from None


def _check_lf_overrides(name: str, value: str) -> None:
    """LlamaFactory ``key=value`` items: known keys and sensible values, checked before stage 1."""
    from thinkj.train.config import check_keys, check_values, parse_overrides

    try:
        overrides = parse_overrides(_split(name, value))
        check_keys(overrides, dict.fromkeys(overrides, name))
        check_values(overrides, dict.fromkeys(overrides, name))
    except ThinkJError as exc:
        raise ThinkJError(f"{name}: {exc}") from None


def _check_verl_overrides(value: str) -> None:
    from thinkj.online.verl_launch import check_override

    for item in _split("VERL_OVERRIDES", value):
        try:
            check_override(item)
        except ThinkJError as exc:
            raise ThinkJError(f"VERL_OVERRIDES: {exc}") from None


def benchmark_data(s: Mapping[str, str]) -> dict[str, str]:
    """``BENCHMARK_DATA`` as benchmark -> location; a benchmark named twice, one that is not in BENCHMARKS or an
    item that is not ``name=location`` is an error (it would be ignored)."""
    out: dict[str, str] = {}
    benches = s["BENCHMARKS"].split()
    from thinkj.overrides import parse_key_values

    for bench, where in parse_key_values(_split("BENCHMARK_DATA", s["BENCHMARK_DATA"]), "BENCHMARK_DATA",
                                         example="benchmark=location").items():
        if not where:
            raise ThinkJError(f"BENCHMARK_DATA {bench}: no location (benchmark=location)")
        if bench not in benches:
            raise ThinkJError(f"BENCHMARK_DATA: {bench!r} is not among BENCHMARKS={s['BENCHMARKS']!r}")
        local = bench == "synthetic" or "/" in where  # a hub name has one slash too: only a real run can tell
        if s["DRY_RUN"] != "1" and local and "://" not in where and not Path(where).exists() \
                and Path(where) not in planned_files(s):  # a planned stage writes it (the generated task's pairs)
            raise ThinkJError(f"BENCHMARK_DATA: {bench}={where}: no such file or folder")
        out[bench] = where
    return out


def decontaminate_against(s: Mapping[str, str], record: Path) -> list[str]:
    """What the decontamination stage checks, as ``NAME`` or ``NAME=DATA`` items: every benchmark of BENCHMARKS with
    its BENCHMARK_DATA entry (else its hub set). When the stage's record already covers all of them (a rerun that
    evaluates fewer benchmarks), the recorded items: the data was checked against those, and stays valid."""
    data = benchmark_data(s)
    now = [f"{bench}={data[bench]}" if bench in data else bench for bench in s["BENCHMARKS"].split()]
    from thinkj.pipeline.stage_runner import read_record

    argv = (read_record(record) or {}).get("argv") or []
    done = [a for i, a in enumerate(argv) if i and argv[i - 1] == "--against"]
    return done if done and set(now) <= set(done) else now


def benchmark_inputs(items: list[str], planned: set[Path] = frozenset()) -> dict[str, Path]:
    """The local benchmark data of ``NAME=DATA`` items as stage inputs (``benchmark_<name>``), so the stage's record
    keeps their content; a file an earlier stage will write (``planned``) counts as local."""
    pairs = [item.partition("=") for item in items]
    return {f"benchmark_{name}": Path(where) for name, _, where in pairs
            if where and (Path(where).exists() or Path(where) in planned)}


def _positive_int(name: str, value: str) -> None:
    if not value.isdigit() or int(value) < 1:
        raise ThinkJError(f"{name}={value!r}: must be a whole number >= 1")


def _finite(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ThinkJError(f"{name}={value!r}: must be a number") from None
    if not math.isfinite(number):
        raise ThinkJError(f"{name}={value!r}: must be a finite number")
    return number


def _one_of(name: str, value: str, allowed) -> None:
    if value not in allowed:
        raise ThinkJError(f"{name}={value!r}: must be one of {', '.join(allowed)}")
