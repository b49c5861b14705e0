"""Worst-case time of every reward preset (and the parsers behind them) on ~100 KB pathological completions.

    python scripts/speed/worst_case_inputs.py            # one line per preset: worst ms and the input behind it
    python scripts/speed/worst_case_inputs.py --size 200000

Target: every reward and parser runs in linear time, <= 50 ms on any 100 KB input, never raises and never
returns a non-finite number. The inputs are in ``scripts/speed/worst_case/reward.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent  # worst_case/ sits beside this script


def _time(fn, text: str) -> float:
    start = time.perf_counter()
    fn(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="characters per input")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    sys.path.insert(0, str(HERE))
    from worst_case.reward import ground_truth, worst_case_inputs

    from thinkj.rewards import PRESETS, get_preset
    from thinkj.rewards.designs.multi_objective import parse_scores
    from thinkj.rewards.designs.xml_judge import parse_xml_judgement
    from thinkj.verdict_parser import parse_verdict

    inputs = worst_case_inputs(args.size)
    targets = {f"preset {name}": (lambda t, p=get_preset(name), g=ground_truth(name): p(t, g)) for name in sorted(PRESETS)}
    targets.update({"parse_verdict strict": lambda t: parse_verdict(t, strict=True),
                    "parse_verdict lenient": lambda t: parse_verdict(t, strict=False),
                    "parse_xml_judgement": parse_xml_judgement, "parse_scores": parse_scores})
    print(f"inputs: {len(inputs)} of ~{args.size:,} characters each")
    for name, fn in targets.items():
        worst, which = max((_time(fn, text), label) for label, text in inputs.items())
        out = fn(inputs["huge integer"])
        finite = all(math.isfinite(v) for v in (out.values() if isinstance(out, dict) else [])
                     if isinstance(v, float))
        print(f"{name:26s} worst {worst * 1000:8.1f} ms  ({which}){'' if finite else '  NON-FINITE'}")


if __name__ == "__main__":
    main()
