"""Worst-case CPU time of the verdict parser (strict and lenient, every answer format) on ~100 KB inputs.

    python scripts/speed/parser_worst_case.py [--size 100000] [--repeat 3]

Target: every parse <= 50 ms on any 100 KB input; no non-finite strength or score. The inputs are in
``scripts/speed/worst_case/verdict.py``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent  # worst_case/ sits beside this script


def main() -> None:
    from thinkj.prompts import AnswerFormat
    from thinkj.verdict_parser import parse_verdict
    sys.path.insert(0, str(HERE))
    from worst_case.verdict import LIMIT_S, SIZE, pathological_inputs

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs per input")
    args = parser.parse_args()
    formats = {"strength": AnswerFormat(), "cot": AnswerFormat(strength="forbidden"),
               "scores": AnswerFormat(strength="forbidden", scores=True), "direct": AnswerFormat(think=False)}
    worst: list[tuple[float, str]] = []
    for name, text in pathological_inputs(args.size).items():
        for fmt_name, fmt in formats.items():
            for strict in (True, False):
                best = math.inf
                for _ in range(args.repeat):
                    start = time.process_time()
                    verdict = parse_verdict(text, fmt, strict=strict)
                    best = min(best, time.process_time() - start)
                finite = all(math.isfinite(x) for x in (verdict.scores or ()))
                worst.append((best, f"{name} [{fmt_name}, {'strict' if strict else 'lenient'}]"
                                    + ("" if finite else " NON-FINITE")))
    worst.sort(reverse=True)
    print(f"{len(worst)} parses of ~{args.size} characters; slowest (best of {args.repeat}):")
    for seconds, what in worst[:8]:
        print(f"  {1000 * seconds:8.2f} ms  {what}")
    verdict = "within" if worst[0][0] <= LIMIT_S else "OVER"
    print(f"worst {1000 * worst[0][0]:.2f} ms: {verdict} the {1000 * LIMIT_S:.0f} ms bound")


if __name__ == "__main__":
    main()
