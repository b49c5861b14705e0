"""``thinkj train``: launch LlamaFactory stages (and, registered from the floors above, offline and online learning).

    # judge SFT on the tiny model, CPU, in-process (fp32, no DeepSpeed), 3 steps
    thinkj train sft judge_sft --model tiny model_name_or_path=runs/tiny/model \\
        dataset_dir=runs/cpu/tiny/data/seed_set max_steps=3 --run-dir runs/cpu
    # the same stage on an 8-GPU node (prints then runs torchrun ... -m thinkj.train.lf_launcher <config>)
    thinkj train sft configs/llamafactory/judge_sft.yaml --model qwen2.5-7b-instruct dataset_dir=data/lf \\
        --run-dir runs/qwen7b --global-batch 64
    thinkj train dpo dpo --model qwen2.5-7b-instruct model_name_or_path=runs/qwen7b/judge_sft \\
        dataset=thinkj_dpo_iter1 dataset_dir=runs/qwen7b/offline/iter_1/data pref_ftx=1.0
    thinkj train rm bt_rm --model llama-3-8b-instruct dataset=thinkj_bt dataset_dir=data/lf
    thinkj train sft judge_sft --model tiny --dry-run          # only write and print the merged config / command
    # the GPU node's launch on a CPU: torchrun, 2 processes on gloo, the stage's DeepSpeed ZeRO-3 config
    thinkj train sft judge_sft --model tiny --device cpu --processes 2 model_name_or_path=runs/tiny/model \
        dataset_dir=runs/cpu/tiny/data/seed_set max_steps=3 --run-dir runs/cpu_ds

    # critic-guided DPO pairs (paper §3.2.1), the Sampling baseline, Table 3 baseline datasets: thinkj/offline/cli.py
    thinkj train critic-pairs --judge runs/x/judge_sft --critic runs/x/critic_sft --pairs train.jsonl --out runs/x/offline/iter_1
    thinkj train sampling-pairs --judge runs/x/judge_sft --pairs train.jsonl --out runs/x/offline_sampling -n 8
    thinkj train baseline-data --traces traces.jsonl --pairs train.jsonl --out runs/x/baselines

Online learning adds ``thinkj train rl`` / ``curves`` here (thinkj/online/cli.py); offline learning adds its four
commands in thinkj/offline/cli.py, whose ``train_app`` is what ``thinkj train`` runs.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Train judges: LlamaFactory SFT / DPO / reward-model stages, offline pair construction.")

from thinkj.train.cli_help import CONFIG_HELP as _CONFIG_HELP  # noqa: E402
from thinkj.train.cli_help import OVERRIDES_HELP as _OVERRIDES_HELP  # noqa: E402


def _launch(kind: str, config: str, overrides: list[str] | None, model: str | None, run_dir: Path, name: str | None,
            device: str, global_batch: int | None, force: bool, dry_run: bool, cpu_bf16: bool = False,
            processes: int = 1) -> None:
    from thinkj.checks import check_device, check_range
    from thinkj.paths import run_dir as make_run_dir
    from thinkj.train.config import ConfigError, check_keys, check_values, parse_overrides
    from thinkj.train.launch import run_stage

    check_range("--global-batch", global_batch, low=1)
    check_range("--processes", processes, low=1)
    check_device("--device", device)
    try:
        given = parse_overrides(overrides or [])  # the typed part, checked before the run directory is made
        check_keys(given, dict.fromkeys(given, "overrides"))
        check_values(given, dict.fromkeys(given, "overrides"))
        out = run_stage(kind, config, profile=model, overrides=overrides or [], run_dir=make_run_dir(run_dir),
                        name=name, device=None if device == "auto" else device, global_batch_size=global_batch,
                        force=force, dry_run=dry_run, cpu_bf16=cpu_bf16, processes=processes)
    except ConfigError as err:
        raise typer.BadParameter(str(err)) from None
    typer.echo(str(out))


def _command(kind: str):
    def command(config: str = typer.Argument(..., help=_CONFIG_HELP),
                overrides: list[str] = typer.Argument(None, help=_OVERRIDES_HELP),
                model: str = typer.Option(None, "--model", "-m", help="model profile in configs/models/ or a YAML path"),
                run_dir: Path = typer.Option(None, help="run directory (default $THINKJ_RUN_DIR or runs/default)"),
                name: str = typer.Option(None, help="output sub-directory (default: the stage YAML's name)"),
                device: str = typer.Option("auto", help="auto | cpu | gpu"),
                global_batch: int = typer.Option(None, help="set gradient_accumulation_steps to reach this global batch"),
                force: bool = typer.Option(False, help="train again even if the output directory is finished"),
                dry_run: bool = typer.Option(False, help="write the merged config and print the command only"),
                cpu_bf16: bool = typer.Option(False, help="on CPU, bf16 autocast where the CPU has native bf16 "
                                              "(else fp32)"),
                processes: int = typer.Option(1, help="CPU only: N processes under torchrun on gloo, keeping the "
                                              "config's DeepSpeed stage and its one-process global batch (the GPU "
                                              "node's launch rehearsed); 1: in-process, no DeepSpeed")) -> None:
        _launch(kind, config, overrides, model, run_dir, name, device, global_batch, force, dry_run, cpu_bf16,
                processes)

    command.__doc__ = f"Run a LlamaFactory `{kind}` stage (CPU: in-process; GPU: torchrun + DeepSpeed)."
    return command


for _kind in ("sft", "dpo", "rm"):
    app.command(_kind, context_settings={"allow_extra_args": False})(_command(_kind))


# Online learning (`thinkj train rl`, `thinkj train curves`) lives in thinkj/online/cli.py. The offline commands
# (thinkj/offline/cli.py) join this app there, on the floor above: `thinkj train` is thinkj.offline.cli:train_app.
from thinkj.online.cli import register as _register_online  # noqa: E402

_register_online(app)
