"""``thinkj eval``: judge a benchmark in both orders, and (re)score judgment records.

    # CPU, tiny model, a slice (RM-Bench and Auto-J from local copies)
    thinkj eval run rmbench --model runs/cpu/tiny/model --backend hf --data ../shared/data/rm-bench \\
        --limit 8 --max-new-tokens 96 --out runs/eval/tiny --tag model=tiny --tag method=base
    thinkj eval run autoj --model runs/cpu/tiny/model --data ../shared/data/auto-j/testdata_pairwise.jsonl --limit 16 \\
        --profile tiny   # the tiny profile's budget (96 new tokens) fits its 4,096-token context
    # GPU: the whole benchmark from the hub with vLLM (tensor parallel over 4 GPUs)
    thinkj eval run rewardbench --model ckpt/thinkj-qwen7b --backend vllm --backend-arg tensor_parallel_size=4 \\
        --out runs/eval/qwen7b --tag model=Qwen-2.5-7B-Instruct --tag "method=online (GRPO)"
    # every GPU of an 8-GPU node: 8 workers of TP 1, each judging an eighth of the pairs (2 of TP 4 for 32B)
    thinkj eval run rewardbench --model ckpt/thinkj-qwen7b --backend vllm --data-parallel 8 --out runs/eval/qwen7b
    # a Bradley-Terry classifier (LlamaFactory stage: rm checkpoint, or a sequence classifier)
    thinkj eval run rewardbench --model ckpt/bt --backend classifier
    # a served model: count prompt tokens with its tokenizer; prompt + budget over the context -> too_long
    thinkj eval run autoj --model served-judge --backend openai --backend-arg base_url=http://127.0.0.1:8000/v1 \\
        --tokenizer Qwen/Qwen2.5-7B-Instruct --context-length 8192
    # recompute metrics from records alone (every number with its rule, and whether the run is complete)
    thinkj eval score rmbench runs/eval/tiny/rmbench.judgments.jsonl --protocol pair
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate judges on RewardBench, RM-Bench, Auto-J and PreferencePair sets.")

BENCH_HELP = "rewardbench | rmbench | autoj | synthetic | rewardbench2 | judgebench (thinkj.evaluation.registry)"
HALF_HELP = "score a verdict naming neither response (unparsable, tie) 0.5 instead of 0, as RewardBench does"
FAILURE_HELP = ("share of generation calls that may fail after retries (server down, 5xx, garbage, timeout) with "
                "exit status 0; the results are incomplete either way")


@app.command()
def run(benchmark: str = typer.Argument(..., help=BENCH_HELP),
        model: str = typer.Option(..., help="model directory or name (the judge, or the classifier)"),
        backend: str = typer.Option("hf", help="hf | vllm | openai (any registered backend) | classifier"),
        template: str = typer.Option("judge_strength_v2", help="prompt template name (thinkj templates; *_v2 = the "
                                                               "paper's format, *_v1 adds a bias sentence)"),
        data: str = typer.Option(None, help="local file/folder, hub name or URL; default: the benchmark's hub set"),
        split: str = typer.Option(None, help="dataset split (default: filtered for RewardBench, train for RM-Bench)"),
        limit: int = typer.Option(None, help="only this many items, spread over subsets/domains/scenarios"),
        out: Path = typer.Option(Path("runs/eval"), help="output folder (judgments, results, cache)"),
        tag: list[str] = typer.Option(None, help="result tags key=value (model=..., method=...), repeatable"),
        max_new_tokens: int = typer.Option(None, help="generation budget per judgment [the --profile's max_new_tokens]"),
        profile: str = typer.Option("qwen2.5-7b-instruct", help="model profile (configs/models/) giving the default budget"),
        context_length: int = typer.Option(None, help="model context for the too-long check [max_model_len, else "
                                                      "the model config's]"),
        tokenizer: str = typer.Option(None, help="tokenizer to count prompt tokens (a server-side model's name)"),
        temperature: float = typer.Option(0.0, help="0 = greedy"),
        top_p: float = typer.Option(1.0),
        seed: int = typer.Option(0),
        batch_size: int = typer.Option(None, help="batch size of the hf backend and the classifier"),
        backend_arg: list[str] = typer.Option(None, help="extra backend arguments key=value (e.g. tensor_parallel_size=4)"),
        chunk: int = typer.Option(256, help="pairs per generate call (each finished chunk is cached)"),
        protocol: str = typer.Option("single", help="single | pair"),
        unparsed_half: bool = typer.Option(False, help=HALF_HELP),
        max_failure_rate: float = typer.Option(0.0, help=FAILURE_HELP),
        data_parallel: int = typer.Option(1, help="worker processes, each on its own tensor_parallel_size GPUs over "
                                                  "a contiguous shard of the pairs, merged in their order; a rerun "
                                                  "resumes (thinkj.inference.data_parallel)")) -> None:
    """Judge BENCHMARK in both orders, write judgment records and results JSON (resumable).

    A generation call that fails after the backend's retries is never an answer: the results count it and are
    incomplete, and past --max-failure-rate (default 0: any) the command exits 1; a rerun asks only for them."""
    from thinkj.checks import check_output_dir, check_range, check_sampling, check_template_kind
    from thinkj.evaluation.config import SCALAR_BACKEND
    from thinkj.evaluation.run import EvalConfig, run_eval
    from thinkj.inference import check_backend_args, check_constructor_args
    from thinkj.inference.base import SamplingParams
    from thinkj.inference.failures import check_failure_rate
    from thinkj.inference.identity import check_model_source
    from thinkj.models.profiles import generation_budget

    check_sampling(temperature, top_p, max_new_tokens)  # one line naming the option, before any model loads
    check_failure_rate(max_failure_rate)
    for option, value in (("--limit", limit), ("--chunk", chunk), ("--batch-size", batch_size),
                          ("--context-length", context_length), ("--data-parallel", data_parallel)):
        check_range(option, value, low=1)
    from thinkj.evaluation.registry import get_benchmark

    if template not in get_benchmark(benchmark).templates:  # a benchmark's own prompts are not registered templates
        check_template_kind("--template", template, ("judge", "direct", "double_score"))
    check_output_dir("--out", out)
    from thinkj.overrides import as_text, json_or_text, parse_key_values

    kwargs = parse_key_values(backend_arg, "--backend-arg", json_or_text, example="e.g. tensor_parallel_size=4")
    tags = parse_key_values(tag, "--tag", as_text, example="e.g. --tag model=Qwen2.5-7B-Instruct")
    if backend == SCALAR_BACKEND:  # not a generation backend, so not in the registry
        from thinkj.evaluation.scalar import ScalarScorer

        check_constructor_args(SCALAR_BACKEND, ScalarScorer, kwargs)
    else:
        check_backend_args(backend, kwargs)
    if backend in ("hf", "vllm", SCALAR_BACKEND):  # before the benchmark loads: a missing model folder fails at once
        check_model_source(model)
    if tokenizer:
        check_model_source(tokenizer, what="--tokenizer")
    if batch_size is not None and backend in ("hf", SCALAR_BACKEND):  # vLLM and servers batch by themselves
        kwargs["batch_size"] = batch_size
    if max_new_tokens is None:
        max_new_tokens = generation_budget(profile)
    cfg = EvalConfig(benchmark, model, backend, template, data, split, limit, out,
                     SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed),
                     tags, protocol, unparsed_half, chunk, kwargs,
                     context_length, tokenizer, max_failure_rate=max_failure_rate, data_parallel=data_parallel)
    # The one import back up the floors: the training-overlap rules are data selection's (thinkj.data.decontaminate,
    # which reads the benchmarks through thinkj.evaluation.registry); evaluation only asks them, at the command line.
    from thinkj.data.overlap import warn_training_overlap

    warn_training_overlap(model, benchmark, data)  # the model's recorded training data holding this benchmark's items
    path = run_eval(cfg)
    document = json.loads(path.read_text())
    typer.echo(json.dumps(document["metrics"]))
    if not document["complete"]:
        missing = document["metrics"].get("missing") or ["not every subset at its full size"]
        typer.echo(f"incomplete: {'; '.join(missing)}", err=True)
    typer.echo(f"results: {path}", err=True)


@app.command("score")
def score_cmd(benchmark: str = typer.Argument(..., help=BENCH_HELP),
              judgments: Path = typer.Argument(..., exists=True, dir_okay=False, help="judgment records JSONL"),
              protocol: str = typer.Option("single", help="single | pair"),
              unparsed_half: bool = typer.Option(False, help=HALF_HELP)) -> None:
    """Recompute metrics from judgment records alone; prints one JSON object (failed calls make it incomplete)."""
    from thinkj.evaluation.failed_calls import with_failed_calls
    from thinkj.evaluation.registry import read_judgments, score

    records = read_judgments(benchmark, judgments)
    typer.echo(json.dumps(with_failed_calls(score(benchmark, records, protocol, unparsed_half), records)))


@app.command("compare")
def compare_cmd(rows: list[str] = typer.Argument(..., help="ROW=FOLDER: base | init | offline | online, each an "
                                                           "evaluation folder (FOLDER/<benchmark>/ from eval run)"),
                out: Path = typer.Option(..., help="folder for compare.json"),
                benchmark: str = typer.Option("synthetic", help="whose judgments are compared"),
                pairs: Path = typer.Option(None, help="the held-out pairs file the rows judged, for each item's "
                                                      "question [the one the evaluation's results name]")) -> None:
    """Rows of Table 4's layout on the same held-out judgments: accuracy with 95% intervals, pair accuracy, and
    each trained row against the row it builds on (judgments clustered by question: the cluster sign-flip test
    where they share one, McNemar's exact test where each is its own; the output names the test and the cluster
    count); prints the table, writes compare.json."""
    from thinkj.evaluation.row_compare import compare_rows, print_results
    from thinkj.overrides import parse_key_values
    from thinkj.records import RecordError

    folders = {row: Path(folder) for row, folder in parse_key_values(rows, "ROW=FOLDER", example="e.g. init=runs/x/eval/"
                                                                      "judge_sft").items()}
    if pairs is not None and not pairs.is_file():
        raise RecordError("no such pairs file", path=pairs, field="--pairs")
    print_results(compare_rows(folders, out, benchmark, pairs))
