"""The offline-learning commands of ``thinkj train``: critic-guided DPO pairs (paper §3.2.1), the Sampling
baseline's pairs, Table 3's baseline datasets, and the iterated critic-guided DPO.

    thinkj train critic-pairs --judge runs/x/judge_sft --critic runs/x/critic_sft --pairs train.jsonl --out runs/x/offline/iter_1
    thinkj train sampling-pairs --judge runs/x/judge_sft --pairs train.jsonl --out runs/x/offline_sampling -n 8
    thinkj train baseline-data --traces traces.jsonl --pairs train.jsonl --out runs/x/baselines
    thinkj train offline --pairs train.jsonl --judge runs/x/judge_sft --critic runs/x/critic_sft --iterations 2

Registered on the ``thinkj train`` app of :mod:`thinkj.train.cli` (the LlamaFactory launchers, online RL): the
whole command group is ``train_app`` below, which ``thinkj train`` runs.
"""

from __future__ import annotations

from pathlib import Path

import typer

from thinkj.train.cli_help import CONFIG_HELP as _CONFIG_HELP
from thinkj.train.cli_help import OVERRIDES_HELP as _OVERRIDES_HELP


def _orders(both_orders: bool) -> tuple[str, ...]:
    return ("original", "swapped") if both_orders else ("original",)


_BACKEND_ARG_HELP = "backend keyword argument key=value (repeatable), e.g. tensor_parallel_size=8 for vllm"
_BUDGET_HELP = "generation budget per judgment [the --profile's max_new_tokens]"
_PROFILE_HELP = "model profile (configs/models/) giving the default budget [qwen2.5-7b-instruct, the main base model]"


def _backend_kwargs(items: list[str] | None) -> dict:
    """``--backend-arg`` items, YAML-typed as they always were here (``tensor_parallel_size=8`` a number)."""
    from thinkj.overrides import parse_key_values, yaml_scalar

    return parse_key_values(items, "--backend-arg", yaml_scalar, example="e.g. tensor_parallel_size=8")


def _check_numbers(*, limit: int | None = None, max_new_tokens: int | None = None, seed: int | None = None,
                   at_least_one: tuple[tuple[str, int | None], ...] = (),
                   temperatures: tuple[tuple[str, float | None], ...] = ()) -> None:
    """The numeric options of the pair builders, checked before any model loads: one line naming the option."""
    from thinkj.checks import check_range

    for option, value in (("--limit", limit), ("--max-new-tokens", max_new_tokens), *at_least_one):
        check_range(option, value, low=1)
    check_range("--seed", seed, low=0)
    for option, value in temperatures:
        check_range(option, value, low=0)


def critic_pairs(pairs: Path = typer.Option(..., help="PreferencePair JSONL (training comparisons)"),
                 judge: str = typer.Option(..., help="judge model (the SFT judge, or the previous iteration's model)"),
                 critic: str = typer.Option(..., help="critic model (critic SFT)"),
                 out: Path = typer.Option(..., help="output dir: LlamaFactory dataset, pairs_log.jsonl, summary.json"),
                 backend: str = typer.Option("hf", help="inference backend (hf, vllm, openai, ...)"),
                 backend_arg: list[str] = typer.Option(None, help=_BACKEND_ARG_HELP),
                 dataset: str = typer.Option("thinkj_dpo", help="dataset name in dataset_info.json"),
                 limit: int = typer.Option(None, help="use the first N pairs"),
                 both_orders: bool = typer.Option(False, help="also judge every pair with the responses swapped"),
                 max_new_tokens: int = typer.Option(None, help=_BUDGET_HELP),
                 profile: str = typer.Option(None, help=_PROFILE_HELP),
                 critic_samples: int = typer.Option(1, help="critic tries per comparison (the first that obeys is used)"),
                 critic_temperature: float = typer.Option(0.0),
                 seed: int = typer.Option(0)) -> None:
    """Critic-guided DPO pairs (paper §3.2.1): judge right -> critic negative; judge wrong -> critic positive."""
    import json

    from thinkj.offline.build import build_critic_pairs

    _check_numbers(limit=limit, max_new_tokens=max_new_tokens, seed=seed, at_least_one=(("--critic-samples", critic_samples),),
                   temperatures=(("--critic-temperature", critic_temperature),))

    summary = build_critic_pairs(pairs, judge, critic, out, backend=backend, dataset=dataset, limit=limit,
                                 orders=_orders(both_orders), max_new_tokens=max_new_tokens, profile=profile,
                                 critic_samples=critic_samples, critic_temperature=critic_temperature, seed=seed,
                                 backend_kwargs=_backend_kwargs(backend_arg))
    typer.echo(json.dumps(summary, indent=1))


def sampling_pairs_cmd(pairs: Path = typer.Option(..., help="PreferencePair JSONL"),
                       judge: str = typer.Option(..., help="judge model that samples the traces"),
                       out: Path = typer.Option(..., help="output dir"),
                       n: int = typer.Option(8, "-n", help="samples per comparison"),
                       temperature: float = typer.Option(1.0),
                       backend: str = typer.Option("hf"),
                       backend_arg: list[str] = typer.Option(None, help=_BACKEND_ARG_HELP),
                       dataset: str = typer.Option("thinkj_dpo_sampling"),
                       limit: int = typer.Option(None),
                       both_orders: bool = typer.Option(False),
                       max_new_tokens: int = typer.Option(None, help=_BUDGET_HELP),
                       profile: str = typer.Option(None, help=_PROFILE_HELP),
                       seed: int = typer.Option(0)) -> None:
    """Table 4 "offline (Sampling)": pairs of right vs wrong traces among n judge samples."""
    import json

    from thinkj.checks import check_range
    from thinkj.offline.build import build_sampling_pairs

    _check_numbers(limit=limit, max_new_tokens=max_new_tokens, seed=seed)
    check_range("-n", n, low=2)  # a right and a wrong trace need two samples at least
    # greedy decoding gives the same trace n times: never a right and a wrong one to pair
    check_range("--temperature", temperature, low=0, low_open=True)

    summary = build_sampling_pairs(pairs, judge, out, backend=backend, n=n, temperature=temperature, dataset=dataset,
                                   limit=limit, orders=_orders(both_orders), max_new_tokens=max_new_tokens,
                                   profile=profile, seed=seed,
                                   backend_kwargs=_backend_kwargs(backend_arg))
    typer.echo(json.dumps(summary, indent=1))


def baseline_data(pairs: Path = typer.Option(..., help="PreferencePair JSONL"),
                  out: Path = typer.Option(..., help="output dir (LlamaFactory dataset_dir)"),
                  rs_model: str = typer.Option(None, help="model sampling traces for SFT w/ CoT (rejection sampling)"),
                  n: int = typer.Option(8, "-n"),
                  temperature: float = typer.Option(1.0),
                  backend: str = typer.Option("hf"),
                  backend_arg: list[str] = typer.Option(None, help=_BACKEND_ARG_HELP),
                  limit: int = typer.Option(None),
                  max_new_tokens: int = typer.Option(None, help=_BUDGET_HELP + " (rejection sampling)"),
                  profile: str = typer.Option(None, help=_PROFILE_HELP),
                  seed: int = typer.Option(0)) -> None:
    """Table 3 baseline datasets: thinkj_direct_sft (SFT w/o CoT), thinkj_bt (BT classifier), thinkj_rs_sft."""
    import json

    from thinkj.offline.build import build_baseline_data

    _check_numbers(limit=limit, max_new_tokens=max_new_tokens, seed=seed, at_least_one=(("-n", n),),
                   temperatures=(("--temperature", temperature),))

    summary = build_baseline_data(pairs, out, rs_model=rs_model, backend=backend, n=n, temperature=temperature,
                                  max_new_tokens=max_new_tokens, profile=profile, limit=limit, seed=seed,
                                  backend_kwargs=_backend_kwargs(backend_arg))
    typer.echo(json.dumps(summary, indent=1))


def offline(pairs: Path = typer.Option(..., help="PreferencePair JSONL (training comparisons)"),
            judge: str = typer.Option(..., help="initial judge (judge SFT output)"),
            critic: str = typer.Option(..., help="critic model (critic SFT output)"),
            overrides: list[str] = typer.Argument(None, help=_OVERRIDES_HELP + " for the DPO stage"),
            iterations: int = typer.Option(1, help="Table 7: 1..N rounds of pairs + DPO"),
            config: str = typer.Option("dpo", help=_CONFIG_HELP),
            model: str = typer.Option(None, "--model", "-m", help="model profile (chat template)"),
            run_dir: Path = typer.Option(None, help="run directory; iterations go to <run>/offline/iter_<k>/"),
            backend: str = typer.Option("hf"),
            backend_arg: list[str] = typer.Option(None, help=_BACKEND_ARG_HELP),
            limit: int = typer.Option(None),
            both_orders: bool = typer.Option(False),
            max_new_tokens: int = typer.Option(None, help="generation budget of the pairs [the --model profile's "
                                                          "max_new_tokens]"),
            seed: int = typer.Option(0, help="seed of the pairs' generation (DPO's own: the seed=N override)"),
            device: str = typer.Option("auto", help="auto | cpu | gpu"),
            cpu_bf16: bool = typer.Option(False, help="on CPU, DPO in bf16 autocast where the CPU computes bf16 "
                                                      "natively (as thinkj train sft --cpu-bf16)"),
            processes: int = typer.Option(1, help="CPU only: DPO as N torchrun processes with its DeepSpeed config "
                                                  "(as thinkj train dpo --processes)"),
            force: bool = typer.Option(False)) -> None:
    """Iterative critic-guided offline learning: pairs from the current judge, then DPO (+ SFT term), N times."""
    import json

    from thinkj.checks import check_device
    from thinkj.offline.iterate import run_offline_iterations
    from thinkj.paths import run_dir as make_run_dir
    from thinkj.train.config import check_keys, check_values, parse_overrides

    _check_numbers(limit=limit, max_new_tokens=max_new_tokens, seed=seed,
                   at_least_one=(("--iterations", iterations), ("--processes", processes)))
    check_device("--device", device)
    # parsed and checked now, not after the first round of pairs; the iterations get the parsed dict
    dpo_overrides = parse_overrides(overrides or [], "DPO overrides")
    check_keys(dpo_overrides, dict.fromkeys(dpo_overrides, "overrides"))
    check_values(dpo_overrides, dict.fromkeys(dpo_overrides, "overrides"))
    backend_kwargs = _backend_kwargs(backend_arg)

    history = run_offline_iterations(
        pairs, judge, critic, make_run_dir(run_dir), iterations=iterations, stage_config=config, profile=model,
        overrides=dpo_overrides, device=None if device == "auto" else device, force=force, cpu_bf16=cpu_bf16,
        processes=processes, pair_kwargs={"backend": backend, "limit": limit, "orders": _orders(both_orders),
                     "max_new_tokens": max_new_tokens, "seed": seed, "backend_kwargs": backend_kwargs})
    typer.echo(json.dumps(history, indent=1))


def register(app: typer.Typer) -> None:
    app.command("critic-pairs")(critic_pairs)
    app.command("sampling-pairs")(sampling_pairs_cmd)
    app.command("baseline-data")(baseline_data)
    app.command("offline")(offline)


def _train_app() -> typer.Typer:
    from thinkj.train.cli import app

    register(app)
    return app


train_app = _train_app()
