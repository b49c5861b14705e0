"""Where a test run's wall time went, worker by worker, from the timeline tests/conftest.py writes.

    THINKJ_TEST_TIMELINE=/tmp/timeline.tsv make test
    python scripts/speed/test_timeline.py /tmp/timeline.tsv [--top 30]

Prints the wall time, each worker's busy seconds and its idle tail (the time it waited at the end for the other
worker: the cost of a poor split), the files by total seconds, and the slowest tests (setup, call and teardown
together, as one test occupies its worker).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path


def read_timeline(path: Path) -> list[tuple[str, str, float, float]]:
    """(worker, test id, start, end) of every finished test; a test without its end line (a killed run) is left
    out and counted in the message."""
    starts: dict[tuple[str, str], float] = {}
    spans = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 4 or fields[2] not in ("start", "end"):
            raise SystemExit(f"{path}:{number}: expected 'time<TAB>worker<TAB>start|end<TAB>test id', got {line!r}")
        when, worker, event, test = float(fields[0]), fields[1], fields[2], fields[3]
        if event == "start":
            starts[(worker, test)] = when
        elif (worker, test) in starts:
            spans.append((worker, test, starts.pop((worker, test)), when))
    if starts:
        print(f"{len(starts)} test(s) started without an end line (a killed or running test): left out")
    return spans


def summary(spans: list[tuple[str, str, float, float]], top: int) -> str:
    begin, finish = min(s[2] for s in spans), max(s[3] for s in spans)
    lines = [f"wall {finish - begin:.0f} s, {len(spans)} tests"]
    by_worker: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_file: dict[str, float] = defaultdict(float)
    for worker, test, start, end in spans:
        by_worker[worker].append((start, end))
        by_file[test.split("::", 1)[0]] += end - start
    for worker, times in sorted(by_worker.items()):
        busy = sum(end - start for start, end in times)
        lines.append(f"  {worker}: busy {busy:.0f} s, idle tail {finish - max(e for _, e in times):.0f} s")
    lines.append(f"files by seconds (top {top}):")
    lines += [f"  {sec:7.1f}  {name}" for name, sec in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]]
    lines.append(f"tests by seconds (top {top}):")
    slowest = sorted(spans, key=lambda s: s[2] - s[3])[:top]
    lines += [f"  {end - start:7.1f}  {worker}  {test}" for worker, test, start, end in slowest]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    spans = read_timeline(args.timeline)
    if not spans:
        raise SystemExit(f"{args.timeline}: no finished test in it")
    print(summary(spans, args.top))


if __name__ == "__main__":
    main()
