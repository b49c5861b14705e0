"""Difficulty stage: judge every pair k=3 times, keep the pairs judged wrong (or unparsably) at least once.

    # CPU, tiny model, HF transformers backend
    python -m data_prep.difficulty --in runs/limj/source/skywork.jsonl --out runs/limj/difficulty/kept.jsonl \
        --model runs/tiny/model --backend hf --max-new-tokens 64
    # GPU node: vLLM, tensor parallel over 4 GPUs, the judge being filtered for (e.g. Qwen2.5-7B-Instruct)
    python -m data_prep.difficulty --in runs/limj/source/skywork.jsonl --out runs/limj/difficulty/kept.jsonl \
        --model Qwen/Qwen2.5-7B-Instruct --backend vllm --tp 4 --max-model-len 8192 --temperature 1.0 --k 3
    # every GPU of an 8-GPU node: 8 vLLM workers of TP 1, each over an eighth of the pairs
    python -m data_prep.difficulty ... --backend vllm --tp 1 --data-parallel 8

Writes the kept pairs, ``<out>.judgments.jsonl`` (every sample), ``<out>.summary.json`` (counts in/out,
failure histogram, per-pair failure counts, calls and failed calls) and a result cache ``<out>.cache.sqlite``:
rerunning after an interruption only generates what is missing.

Exit status 1 when generation calls failed after retries (server down, 5xx, garbage, timeout) past
--max-failure-rate (default 0: any; a pair with a failed call is never kept, and a rerun asks only for the failed
calls), or when nothing was kept (every pair too long for the judge's context, or none judged wrong); 2 for bad
input or settings.
"""

from __future__ import annotations

import argparse
import json

from thinkj.checks import OneLineParser
from thinkj.data.difficulty import run_difficulty
from thinkj.errors import exit_on_user_error


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in", dest="inp", required=True, help="PreferencePair JSONL")
    parser.add_argument("--out", required=True, help="kept pairs JSONL")
    parser.add_argument("--model", required=True, help="judge model path or hub name")
    parser.add_argument("--backend", default="hf", help="inference backend: hf | vllm (or any registered name)")
    parser.add_argument("--template", default="judge_strength_v2")
    parser.add_argument("--k", type=int, default=3, help="judgments per pair (paper: 3)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0 makes the k samples equal)")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="generation budget [the main model profile's max_new_tokens, 4096]")
    parser.add_argument("--context-length", type=int, default=None,
                        help="judge context for the too-long check [--max-model-len, else the model config's]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-failures", type=int, default=1, help="keep pairs with at least this many failed samples")
    parser.add_argument("--strict", action="store_true", help="strict verdict parsing (malformed answers count as failures)")
    parser.add_argument("--cache", default=None, help="result cache (default: <out>.cache.sqlite)")
    parser.add_argument("--limit", type=int, default=None, help="judge only the first N pairs")
    parser.add_argument("--tp", type=int, default=None, help="vLLM tensor_parallel_size")
    parser.add_argument("--max-model-len", type=int, default=None, help="vLLM max_model_len")
    parser.add_argument("--batch-size", type=int, default=None, help="HF backend batch size")
    parser.add_argument("--backend-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="extra backend keyword (value parsed as JSON when possible), repeatable")
    parser.add_argument("--data-parallel", type=int, default=1,
                        help="worker processes, each on its own TP GPUs over a contiguous shard of the pairs, "
                             "merged in input order; a rerun resumes (thinkj.inference.data_parallel) [1]")
    parser.add_argument("--max-failure-rate", type=float, default=0.0,
                        help="share of generation calls that may fail after retries with exit status 0 [0]")
    args = parser.parse_args(argv)
    from thinkj.paths import setup_caches

    setup_caches()
    from thinkj.overrides import json_or_text, parse_key_values

    kwargs: dict = parse_key_values(args.backend_arg, "--backend-arg", json_or_text)
    for key, value in (("tensor_parallel_size", args.tp), ("max_model_len", args.max_model_len),
                       ("batch_size", args.batch_size)):
        if value is not None:
            kwargs[key] = value
    summary = run_difficulty(args.inp, args.out, model=args.model, backend=args.backend, template=args.template, k=args.k,
                             temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                             seed=args.seed, min_failures=args.min_failures, strict=args.strict, cache_path=args.cache,
                             backend_kwargs=kwargs, limit=args.limit, context_length=args.context_length,
                             max_failure_rate=args.max_failure_rate, data_parallel=args.data_parallel)
    print(json.dumps({k: v for k, v in summary.items() if k != "failures_per_pair"}, indent=1))
    return summary


if __name__ == "__main__":  # vLLM spawns worker processes: the engine must be created under this guard
    exit_on_user_error(main)
