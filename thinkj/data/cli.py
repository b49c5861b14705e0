"""``thinkj data ...``: the data-selection stages as commands (LIMJ707, paper §3.1).

    thinkj data traces runs/ds/dedup/kept.jsonl runs/ds/traces/traces.jsonl --model deepseek-reasoner \
        --base-url https://api.deepseek.com/v1 --api-key-env DEEPSEEK_API_KEY
    thinkj data clip runs/ds/traces/traces.jsonl runs/ds/clip/clipped.jsonl --tokenizer Qwen/Qwen2.5-7B-Instruct
    thinkj data seed-set runs/ds/clip/clipped.jsonl runs/ds/seed_set
    thinkj data decontaminate runs/ds/dedup/kept.jsonl runs/ds/decontaminate/kept.jsonl --against rewardbench \
        --against autoj=../shared/data/auto-j/testdata_pairwise.jsonl
    thinkj data overlap train.jsonl --against rmbench=../shared/data/rm-bench   # rows x benchmarks, changes nothing
    thinkj data table1 runs/ds
    thinkj data teacher-serve --port 8011   # scripted stand-in for R1 (synthetic task only)
    thinkj data task facts runs/cpu/task --train 64 --test 30 --seed 0   # a generated judging task's pairs
    thinkj data critic-data runs/cpu/data/seed_set runs/cpu/data/critic_data --wrong-side-from train.jsonl --task facts
    thinkj data exclude source.jsonl seed_set/rl_pairs.jsonl pool.jsonl   # the pairs the seed set does not hold
    thinkj data verl-parquet runs/cpu/task/train.jsonl runs/cpu/twins.parquet --twins   # both orders, for verl
    thinkj data verl-parquet rl_pairs.jsonl rl_train.parquet --val-out rl_val.parquet --val-fraction 0.1  # + held out

Each command is file-in/file-out and writes a ``*.summary.json`` beside its output.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Data selection: traces, clipping, seed set, Table 1.")


@app.command("traces")
def traces_cmd(
    pairs: Path = typer.Argument(..., help="PreferencePair JSONL (after difficulty + dedup)"),
    out: Path = typer.Argument(..., help="JSONL of traces that pass the accuracy filter"),
    model: str = typer.Option("deepseek-reasoner", help="teacher model name sent to the server"),
    base_url: str = typer.Option("https://api.deepseek.com/v1", help="OpenAI-compatible base URL (…/v1)"),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="environment variable holding the API key ('' = none)"),
    template: str = typer.Option("judge_strength_v2", help="prompt template the teacher sees"),
    temperature: float = typer.Option(0.0, help="paper Appendix B.1 uses 0.0"),
    max_new_tokens: int = typer.Option(8192),
    concurrency: int = typer.Option(16, help="requests in flight at once"),
    max_retries: int = typer.Option(6),
    give_up_after: int = typer.Option(None, help="after this many calls in a row found no server (refused, no "
                                                  "connection in time, dropped; each after its retries), send no "
                                                  "more: recorded as failed, a rerun asks again; 0: never "
                                                  "[the client's GIVE_UP_AFTER, thinkj/inference/http_client.py]"),
    timeout: float = typer.Option(600.0, help="seconds per request"),
    connect_timeout: float = typer.Option(None, help="seconds for a connection to open "
                                                     "[the client's CONNECT_TIMEOUT, thinkj/inference/http_client.py]"),
    cache: Path = typer.Option(None, help="result cache (default: OUT's folder/cache.sqlite)"),
) -> None:
    """Ask the teacher for a judgment with thinking on every pair; keep traces whose verdict matches the label.

    Exits 1 when any call failed (the successes are written and cached; a rerun retries only the failures)
    or when no trace was kept."""
    import json

    from thinkj.data.traces import run_traces

    summary = run_traces(pairs, out, model=model, base_url=base_url, api_key_env=api_key_env, template=template,
                         temperature=temperature, max_new_tokens=max_new_tokens, max_concurrency=concurrency,
                         max_retries=max_retries, timeout=timeout, cache_path=cache,
                         **({} if give_up_after is None else {"give_up_after": give_up_after}),
                         **({} if connect_timeout is None else {"connect_timeout": connect_timeout}))
    typer.echo(json.dumps({k: v for k, v in summary.items() if k != "dropped_ids"}, indent=1))


@app.command("clip")
def clip_cmd(
    traces: Path = typer.Argument(..., help="JSONL written by `thinkj data traces`"),
    out: Path = typer.Argument(..., help="clipped traces JSONL"),
    tokenizer: str = typer.Option("", help="HF tokenizer for length statistics (empty: whitespace words)"),
) -> None:
    """Trace clipping: keep the teacher's summarising explanation as the thinking, drop the long reasoning."""
    import json

    from thinkj.data.clip import run_clip

    typer.echo(json.dumps(run_clip(traces, out, tokenizer=tokenizer or None), indent=1))


@app.command("seed-set")
def seed_set_cmd(
    clipped: Path = typer.Argument(..., help="JSONL written by `thinkj data clip`"),
    out_dir: Path = typer.Argument(..., help="folder for the LlamaFactory datasets, the verl parquet and RL pairs"),
    rl_pairs: Path = typer.Option(None, help="PreferencePair JSONL for RL (default: the clipped pairs)"),
    template: str = typer.Option("judge_strength_v2"),
    critic_template: str = typer.Option("critic_strength_v2"),
) -> None:
    """Write judge SFT + critic SFT (LlamaFactory) and the RL data (verl parquet + pairs JSONL)."""
    import json

    from thinkj.data.seed_set import run_seed_set

    typer.echo(json.dumps(run_seed_set(clipped, out_dir, rl_pairs=rl_pairs, template=template,
                                       critic_template=critic_template), indent=1))


@app.command("table1")
def table1_cmd(
    run_dir: Path = typer.Argument(..., help="run folder holding the stage summaries (*.summary.json)"),
    initial: int = typer.Option(None, help="count of the initially selected pairs when no summary records it"),
) -> None:
    """Print Table 1 (count after each filter) from the stage summaries, beside the paper's counts."""
    from thinkj.data.table1 import render_table1

    typer.echo(render_table1(run_dir, initial=initial))


AGAINST_HELP = ("a benchmark of the evaluation registry, NAME or NAME=DATA (a local file/folder read as `thinkj eval run "
                "--data` reads it; NAME alone: its hub set); repeatable")
ENCODER_HELP = ("embedding rule's encoder, the dedup stage's --model names (minilm = the bundled all-MiniLM-L6-v2, "
                "hkunlp/instructor-large, ...); none = rule off")
THRESHOLD_HELP = "cosine similarity at or above which the embedding rule matches [0.95]"


@app.command("decontaminate")
def decontaminate_cmd(
    pairs: Path = typer.Argument(..., help="PreferencePair JSONL (after dedup)"),
    out: Path = typer.Argument(..., help="the kept pairs (JSONL); the report and summary are written beside it"),
    against: list[str] = typer.Option(..., help=AGAINST_HELP),
    report_only: bool = typer.Option(False, help="report the matches, keep every row"),
    encoder: str = typer.Option(None, help=ENCODER_HELP + " [minilm]"),
    threshold: float = typer.Option(None, help=THRESHOLD_HELP),
    report: Path = typer.Option(None, help="one JSON line per match [OUT with .contamination.jsonl]"),
) -> None:
    """Drop the pairs whose prompt or responses hold a benchmark item's prompt (exact, 13-gram, embedding rules);
    docs/data_selection.md has the rules and their sources."""
    import json

    from thinkj.data.decontaminate import rule_options, run_decontaminate

    summary = run_decontaminate(pairs, out, against, report_only=report_only, report_path=report,
                                **rule_options(encoder, threshold))
    typer.echo(json.dumps({k: v for k, v in summary.items() if k != "removed_ids"}, indent=1))


@app.command("overlap")
def overlap_cmd(
    train: Path = typer.Argument(..., help="training data: PreferencePair JSONL, a LlamaFactory dataset folder, "
                                           "a verl parquet, any JSON/JSONL"),
    against: list[str] = typer.Option(..., help=AGAINST_HELP),
    encoder: str = typer.Option(None, help=ENCODER_HELP + " [minilm]"),
    threshold: float = typer.Option(None, help=THRESHOLD_HELP),
    report: Path = typer.Option(None, help="also write one JSON line per match here"),
) -> None:
    """Print how many training rows hold items of each benchmark, by rule (rows x benchmarks); changes nothing."""
    from thinkj.data.decontaminate import rule_options
    from thinkj.data.overlap import check_training_data, render_overlap

    summary = check_training_data(train, against, report_path=report, **rule_options(encoder, threshold))
    typer.echo(render_overlap(summary))


@app.command("task")
def task_cmd(
    name: str = typer.Argument(..., help="a generated judging task: fruit (tiny model), facts (SmolLM2) or constraints "
                                         "(instruction constraints, thousands of held-out items)"),
    out: Path = typer.Argument(..., help="folder for train.jsonl and test.jsonl (PreferencePair JSONL)"),
    train: int = typer.Option(256, help="training pairs"),
    test: int = typer.Option(30, help="held-out pairs (drawn from items the training pairs never use)"),
    seed: int = typer.Option(0),
) -> None:
    """Write a generated task's training and held-out pairs: the training source and the held-out benchmark of a
    CPU recipe (``TRAIN_SOURCE=pairs``, ``BENCHMARK_DATA=synthetic=<out>/test.jsonl``)."""
    import json

    from thinkj.checks import check_output_dir, check_range
    from thinkj.records import write_jsonl
    from thinkj.synthetic.tasks import get_task

    check_range("--train", train, low=1)
    check_range("--test", test, low=1)
    check_range("--seed", seed, low=0)
    task = get_task(name)
    check_output_dir("OUT", out)
    counts = {}
    for split, n in (("train", train), ("test", test)):
        pairs = task.make_pairs(n, seed, split)
        write_jsonl(out / f"{split}.jsonl", pairs)
        counts[split] = len(pairs)
    typer.echo(json.dumps({"task": name, "seed": seed, **counts, "out": str(out)}))


@app.command("critic-data")
def critic_data_cmd(
    seed_set: Path = typer.Argument(..., help="the seed set's folder (thinkj data seed-set)"),
    out: Path = typer.Argument(..., help="folder for the critic's LlamaFactory datasets"),
    wrong_side_from: Path = typer.Option(..., help="PreferencePair JSONL of the task's training pairs"),
    task: str = typer.Option(..., help="the generated task whose rule argues the wrong side (fruit | facts | ...)"),
    every: int = typer.Option(2, help="every Nth training pair gives a wrong-side example"),
    template: str = typer.Option("critic_strength_v2", help="critic prompt template"),
) -> None:
    """The seed set's critic examples plus rule-written wrong-side ones, in one dataset folder."""
    import json

    from thinkj.data.critic_data import write_critic_data

    typer.echo(json.dumps(write_critic_data(seed_set, out, wrong_side_from, task=task, every=every, template=template)))


@app.command("exclude")
def exclude_cmd(
    pairs: Path = typer.Argument(..., help="PreferencePair JSONL"),
    exclude: Path = typer.Argument(..., help="PreferencePair JSONL whose ids are left out"),
    out: Path = typer.Argument(..., help="the pairs left, in their order"),
) -> None:
    """Write the pairs of PAIRS whose id EXCLUDE does not hold (the comparisons outside the seed set)."""
    import json

    from thinkj.data.critic_data import exclude_pairs

    typer.echo(json.dumps(exclude_pairs(pairs, exclude, out)))


@app.command("verl-parquet")
def verl_parquet_cmd(
    pairs: Path = typer.Argument(..., help="PreferencePair JSONL"),
    out: Path = typer.Argument(..., help="verl parquet to write"),
    twins: bool = typer.Option(False, help="both orders of every comparison side by side (rows 2k, 2k+1), for "
                                           "configs/verl/grpo_consistent.yaml and --twins"),
    seed: int = typer.Option(0, help="with --twins: the seed of the comparisons' order; with --val-out: of the "
                                     "held-out choice"),
    template: str = typer.Option("judge_strength_v2"),
    split: str = typer.Option("train", help="written into extra_info.split"),
    val_out: Path = typer.Option(None, help="also hold pairs out of OUT and write them here, both orders of each "
                                            "comparison (validation: --val-data of a verl launch)"),
    val_fraction: float = typer.Option(0.1, help="with --val-out: share of the pairs held out, whole questions at a "
                                                 "time (thinkj.export.verl.hold_out)"),
) -> None:
    """Write verl's RL parquet from pairs (ties left out and counted); warns when the gold position is off balance.

    With --val-out, a held-out share of the pairs is kept out of OUT and written to VAL_OUT in both orders (rows
    share extra_info.twin; extra_info.order 0 / 1), for verl's validation metrics (docs/online_learning.md)."""
    import json

    from thinkj.checks import check_input_file, check_output_file, check_range
    from thinkj.errors import ThinkJError
    from thinkj.export.verl import hold_out, write_verl_parquet
    from thinkj.records import load_pairs

    check_input_file("PAIRS", pairs)
    check_range("--seed", seed, low=0)
    check_output_file("OUT", out)
    loaded = load_pairs(pairs)
    held: dict = {}
    if val_out is not None:
        check_output_file("--val-out", val_out)
        check_range("--val-fraction", val_fraction, low=0, high=1, low_open=True, high_open=True)
        if Path(val_out).resolve() == Path(out).resolve():
            raise ThinkJError(f"--val-out {val_out} is OUT itself: the held-out pairs need a file of their own")
        loaded, kept_out = hold_out(loaded, val_fraction, seed)
        val = write_verl_parquet(val_out, kept_out, template, "val", twins=True, seed=seed)
        held = {"val": {"out": str(val_out), "pairs": len(kept_out), "fraction": val_fraction, **val}}
    summary = write_verl_parquet(out, loaded, template, split, twins=twins, seed=seed)
    typer.echo(json.dumps({"out": str(out), "twins": twins, **summary, **held}))


@app.command("teacher-serve")
def teacher_serve_cmd(
    port: int = typer.Option(8011, help="0 = a free port (see --port-file)"),
    port_file: Path = typer.Option(None, help="write the port here once the server listens (for scripts)"),
    host: str = typer.Option("127.0.0.1"),
    error_rate: float = typer.Option(0.15, help="share of wrong verdicts"),
    empty_explanation_rate: float = typer.Option(0.1, help="share of answers with no explanation"),
    inline_think: bool = typer.Option(False, help="reasoning inside <think> in the content, not reasoning_content"),
    seed: int = typer.Option(0),
    task: str = typer.Option("fruit", help="which demo task it knows: fruit (tiny demo) or facts (SmolLM2 demo)"),
) -> None:
    """Serve the scripted R1 stand-in for a demo task on HOST:PORT until interrupted."""
    from thinkj.checks import check_range
    from thinkj.synthetic.scripted_teacher import TeacherConfig, serve_forever

    check_range("--port", port, low=0, high=65535)
    for option, rate in (("--error-rate", error_rate), ("--empty-explanation-rate", empty_explanation_rate)):
        check_range(option, rate, low=0, high=1)
    serve_forever(TeacherConfig(error_rate=error_rate, empty_explanation_rate=empty_explanation_rate,
                                inline_think=inline_think, seed=seed, task=task), host=host, port=port,
                 port_file=port_file)
