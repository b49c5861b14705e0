"""``thinkj train rl`` and ``thinkj train curves``: online learning (paper §3.2.2) and its training curves.

    # GRPO with TRL on the tiny model, CPU (a few steps)
    thinkj train rl --engine trl --algo grpo --model runs/tiny/model --data runs/cpu/tiny/task/train.jsonl \\
        --out runs/cpu/online_trl --steps 4 --num-generations 4 --max-completion-length 32
    # verl's trainer on this machine's CPU (tiny model, 2 steps; docs/online_learning.md "Run verl on your laptop")
    thinkj train rl --engine verl --device cpu --algo grpo --model runs/tiny/model --data train.parquet \
        trainer.total_training_steps=2
    # verl on GPUs: print the command for 2 x 8 GPUs, then run GRPO on one 8-GPU node with one weight changed
    thinkj train rl --engine verl --algo grpo --model runs/qwen7b/judge_sft --data data/verl/train.parquet --dry-run
    thinkj train rl --engine verl --algo reinforce_pp --model runs/qwen7b/judge_sft --data data/verl/train.parquet \\
        --nnodes 1 --weight w_str=0.0 trainer.total_epochs=2
    # the RL canary before a cluster run: must learn a learnable task, and must not on flipped golds (exit 1 if not)
    thinkj train canary --engine verl --algo ppo --out runs/canary
    # curves (reward, accuracy, response length, KL) from verl's or TRL's logs
    thinkj train curves runs/qwen7b/online_grpo/logs --out runs/qwen7b/online_grpo/curves.png

These commands are registered on ``thinkj.train.cli:app`` by :func:`register`.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


def rl(
    overrides: list[str] = typer.Argument(None, help="verl: Hydra overrides (key=value) applied last; trl: GRPORun "
                                                     "fields (seed=1, max_rows=256, template=...) or GRPOConfig fields "
                                                     "(temperature=0.7) as key=value, applied last"),
    engine: str = typer.Option("trl", help="trl (one machine, CPU or one GPU) | verl (GPU nodes, Ray; --device cpu here)"),
    algo: str = typer.Option("grpo", help="grpo | grpo_consistent | ppo | reinforce_pp (trl: grpo only; both orders "
                                          "in one step with --twins)"),
    model: str = typer.Option(..., help="policy to start from: a model dir (the SFT-initialised judge) or hub id"),
    data: Path = typer.Option(..., help="PreferencePair JSONL (trl) or verl parquet (both engines)"),
    val_data: Path = typer.Option(None, help="held-out pairs, both orders (`thinkj data verl-parquet --val-out`): verl "
                                             "validates on them every trainer.test_freq steps, trl every --eval-steps "
                                             "(a PreferencePair JSONL too) [none: validation off]"),
    eval_steps: int = typer.Option(10, help="trl: judge --val-data every this many steps"),
    out: Path = typer.Option(Path("runs/default/online"), help="output folder (model, checkpoints, logs, curves.png)"),
    preset: str = typer.Option("thinkj_qwen", help="reward preset (`thinkj rewards` lists them)"),
    weight: list[str] = typer.Option(None, help="reward weight NAME=VALUE, repeatable: w_acc, w_fmt, w_str, w_con "
                                                "(the consistency term: needs --twins or --algo grpo_consistent)"),
    steps: int = typer.Option(4, help="trl: optimizer steps"),
    lr: float = typer.Option(1e-6, help="trl: learning rate (Table 11 GRPO: 1e-6)"),
    beta: float = typer.Option(0.001, help="trl: KL coefficient (Table 11: 0.001)"),
    num_generations: int = typer.Option(4, help="trl: group size (Table 11 GRPO: 8)"),
    prompts_per_step: int = typer.Option(2, help="trl: prompts per optimizer step"),
    micro_batch: int = typer.Option(0, help="trl: rollouts per forward and backward, gradients accumulated over the "
                                            "step's rollouts, which it must divide (0: all on a CPU, up to 8 on a GPU)"),
    max_completion_length: int = typer.Option(64, help="trl: max new tokens (Table 11: 3072)"),
    device: str = typer.Option("auto", help="trl: auto | cpu | gpu; verl: cpu runs verl's trainer on this machine's CPU "
                                            "(tiny models, checking only), otherwise GPU nodes"),
    nnodes: int | None = typer.Option(None, help="verl: nodes [Table 11: 2; --device cpu: 1]"),
    gpus_per_node: int | None = typer.Option(None, help="verl: GPUs per node [Table 11: 8; --device cpu: 1 worker]"),
    twins: str = typer.Option("off", help="trl: both orders of each comparison in one step: off | step (a group per "
                                          "order, J1) | union (one group of both orders, J4R); --prompts-per-step "
                                          "then counts comparisons. verl: --algo grpo_consistent"),
    force: bool = typer.Option(False, help="trl: train again even if the output folder is finished (the finished run "
                                           "is replaced only when the new one has finished)"),
    dry_run: bool = typer.Option(False, help="verl: print the command only"),
    allow_think_tokens: bool = typer.Option(False, help="verl: launch even if the tokenizer or chat template hides "
                                                        "<think> from the reward"),
) -> None:
    """Online RL of the judge with the Think-J rule-based reward (TRL GRPO on one machine, verl on GPU clusters)."""
    from thinkj.checks import check_device, check_range
    from thinkj.online.verl_launch import ALGOS, LaunchError, parse_weights

    try:
        weights = parse_weights(weight)
    except LaunchError as err:
        raise typer.BadParameter(str(err)) from None
    from thinkj.online.trl_grpo import check_weights_with_twins

    if engine == "verl" and twins != "off":
        raise typer.BadParameter("--twins is the TRL engine's option; verl takes both orders with --algo grpo_consistent")
    if engine == "verl" and micro_batch:
        raise typer.BadParameter("--micro-batch is the TRL engine's option; verl's is "
                                 "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    # an unknown, nan or negative weight would train a silently wrong ablation; w_con needs both orders in a step
    check_weights_with_twins(preset, weights, twins if engine == "trl" else "step" if algo == "grpo_consistent" else "off")
    for option, number in (("--steps", steps), ("--num-generations", num_generations),
                           ("--prompts-per-step", prompts_per_step), ("--max-completion-length", max_completion_length),
                           ("--nnodes", nnodes), ("--gpus-per-node", gpus_per_node)):
        if number is not None:  # verl's node counts: None is the device's default
            check_range(option, number, low=1)
    check_range("--lr", lr, low=0, low_open=True)
    check_range("--beta", beta, low=0)
    check_device("--device", device)
    if algo not in ALGOS:
        raise typer.BadParameter(f"--algo {algo!r}: choose from grpo, grpo_consistent, ppo, reinforce_pp")
    if engine == "trl":
        if algo != "grpo":
            raise typer.BadParameter("the TRL engine runs GRPO only; PPO and Reinforce++ run with --engine verl")
        from dataclasses import fields, replace

        from thinkj.online.trl_grpo import GRPORun, run_trl_grpo

        # a GRPORun field (seed, template, max_rows, ...) sets the run, any other key a GRPOConfig field
        own = {f.name for f in fields(GRPORun)} - {"model", "data", "out_dir", "preset", "weights", "extra", "twins",
                                                    "eval_data"}
        from thinkj.overrides import json_or_text, parse_key_values

        given = parse_key_values(overrides, "TRL override", json_or_text, example="e.g. temperature=0.7")
        extra = {k: v for k, v in given.items() if k not in own}
        run_fields = {k: v for k, v in given.items() if k in own}
        run = GRPORun(model=model, data=str(data), out_dir=str(out), preset=preset, weights=weights, steps=steps,
                      learning_rate=lr, beta=beta, num_generations=num_generations, prompts_per_step=prompts_per_step,
                      micro_batch=micro_batch, max_completion_length=max_completion_length, device=device, extra=extra,
                      twins=twins, eval_data=str(val_data) if val_data else None, eval_steps=eval_steps)
        summary = run_trl_grpo(replace(run, **run_fields), force=force)
        typer.echo(json.dumps({k: v for k, v in summary.items() if k != "run"}, indent=1))
    elif engine == "verl":
        from thinkj.online.verl_launch import VerlLaunch
        from thinkj.online.verl_launch import run as run_verl

        spec = VerlLaunch(algo=algo, model=model, train_files=str(data), val_files=str(val_data) if val_data else None,
                          out_dir=str(out), preset=preset, weights=weights, nnodes=nnodes, gpus_per_node=gpus_per_node,
                          overrides=list(overrides or []), device="cpu" if device == "cpu" else "gpu",
                          allow_think_tokens=allow_think_tokens)
        try:
            code = run_verl(spec, dry_run=dry_run)
        except LaunchError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None
        raise typer.Exit(code)
    else:
        raise typer.BadParameter(f"--engine {engine!r}: choose trl or verl")


def curves(logdir: Path = typer.Argument(..., help="verl log folder / *.jsonl / tensorboard events, or trainer_state.json"),
           out: Path = typer.Option(..., "--out", help="PNG to write"),
           title: str = typer.Option("", help="figure title")) -> None:
    """Plot reward, accuracy, response length and KL per step (the paper's Figures 5-8), and the held-out judge's
    accuracy per order, pair accuracy and "(a)" share where the run validated on both orders."""
    from thinkj.online.curves import HELD_OUT_PANEL, PANELS, CurveError, held_out, load_metrics, pick, plot_curves

    try:
        metrics = load_metrics(logdir)
        path = plot_curves(metrics, out, title=title or str(logdir))
    except CurveError as err:
        raise typer.BadParameter(str(err)) from None
    for panel in PANELS:
        chosen = pick(metrics, panel)
        typer.echo(f"{panel:16s} {chosen[0] + f' ({len(chosen[1])} points)' if chosen else 'not logged'}")
    for key, points in held_out(metrics).values():
        typer.echo(f"{HELD_OUT_PANEL}: {key} ({len(points)} points)")
    typer.echo(f"wrote {path}")


def canary(engine: str = typer.Option("trl", help="trl | verl (verl: DEVICE=cpu bash scripts/train_verl.sh)"),
           algo: str = typer.Option("grpo", help="verl: grpo | grpo_consistent | ppo | reinforce_pp; trl: grpo"),
           seed: int = typer.Option(0, help="tiny model, init judge, data and RL seed"),
           control: str = typer.Option("flipped", help="negative control: flipped (golds on the wrong side) | "
                                                       "shuffled (golds a coin; can rise by sharpening alone)"),
           out: Path = typer.Option(Path("runs/canary"), help="work folder; canary.json is written last"),
           steps: int = typer.Option(0, help="trl: RL steps per arm (0: the canary's budget, RL_SETTINGS)")) -> None:
    """Does this RL path learn? The tiny model fine-tuned to a half-informative fruit-task judge, RL on the right
    golds (must raise the held-out right-verdict probability: one-sided sign test p < 0.05 and a mean rise >= 0.05)
    and on the control's golds (must not). Minutes on a CPU (thinkj/online/canary.py); exit 1 if the canary fails."""
    from thinkj.atomic import write_text_atomic
    from thinkj.evaluation.row_compare import git_commit
    from thinkj.models.tiny import build_tiny_model
    from thinkj.online.canary import (
        CONTROLS,
        INFORMATIVE,
        INIT_STEPS,
        arm_summary,
        canary_arm,
        canary_machine,
        canary_verdict,
        format_only_judge,
        machine_provenance,
        own_generations,
        verdict_probabilities,
    )
    from thinkj.online.canary_verl import ALGOS, verl_canary_arm

    if engine not in ("trl", "verl"):
        raise typer.BadParameter(f"--engine {engine!r}: choose trl or verl")
    if engine == "trl" and algo != "grpo":
        raise typer.BadParameter(f"--engine trl runs grpo only (got --algo {algo!r})")
    if engine == "verl" and algo not in ALGOS:
        raise typer.BadParameter(f"--algo {algo!r}: choose one of {', '.join(ALGOS)}")
    if control not in CONTROLS:
        raise typer.BadParameter(f"--control {control!r}: choose one of {', '.join(CONTROLS)}")
    if steps and engine != "trl":
        raise typer.BadParameter("--steps applies to --engine trl (verl's canary budget is canary_verl.STEPS)")
    if steps < 0:
        raise typer.BadParameter(f"--steps {steps}: must be >= 0")
    root = out / f"{engine}-{algo}-seed{seed}"
    (root / "canary.json").unlink(missing_ok=True)
    machine = canary_machine()
    init = format_only_judge(build_tiny_model(root / "tiny", seed=seed), root / "init", seed=seed, steps=INIT_STEPS,
                             informative=INFORMATIVE)
    before, gen_before = verdict_probabilities(init), own_generations(init)
    arms = []
    for arm_control in (None, control):
        if engine == "trl":
            arms.append(canary_arm(init, root, seed=seed, control=arm_control, before=before, gen_before=gen_before,
                                   **({"steps": steps} if steps else {})))
        else:
            result = verl_canary_arm(init, root, algo=algo, seed=seed, control=arm_control, before=before,
                                     gen_before=gen_before)
            arms.append({k: v for k, v in result.items() if k != "rows"})
        typer.echo(json.dumps({k: v for k, v in arm_summary(arms[-1]).items() if k != "per_order"}), err=True)
    holds, why = canary_verdict(*arms)
    machine = machine_provenance(machine, git_commit())
    write_text_atomic(root / "canary.json", json.dumps({"engine": engine, "algo": algo, "seed": seed, "holds": holds,
                                                       "why": why, "machine": machine, "arms": arms},
                                                      indent=1) + "\n")
    typer.echo(f"canary {'holds' if holds else 'FAILED'}: {why}")
    raise typer.Exit(0 if holds else 1)


def canary_check(path: Path = typer.Argument(..., help="a canary.json written by `thinkj train canary`")) -> None:
    """Recompute a saved canary from its own measurements: every test figure of both arms and the verdict must
    equal what the file says (exit 2 with the first field that differs); then exit 0 if the canary holds, else 1.

        thinkj train canary-check runs/canary/verl-grpo-seed0/canary.json"""
    from thinkj.online.canary import recheck_canary

    try:
        holds, why = recheck_canary(path)
    except ValueError as error:
        typer.echo(f"FAIL {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{path}: the records give every saved figure; canary {'holds' if holds else 'FAILED'}: {why}")
    raise typer.Exit(0 if holds else 1)


def register(app: typer.Typer) -> None:
    app.command("rl")(rl)
    app.command("canary")(canary)
    app.command("canary-check")(canary_check)
    app.command("curves")(curves)
