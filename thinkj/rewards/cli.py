"""``thinkj rewards``: list the reward presets, or score texts with one to check it before a run.

    thinkj rewards                     # = thinkj rewards list: per-sample presets and group-level rewards
    thinkj rewards score xml_judge --gt '{"label": "a"}' --text '<notes>..</notes><judgement>A</judgement>'
    thinkj rewards score multi_objective --gt '[3, 4, 4, 1, 2]' --text '3 4 4 1 2' --set w_format=0.3
    thinkj rewards score xml_judge --group --gt '{"label": "a"}' --text '<judgement>A</judgement>' --text B

(``python -m thinkj.rewards.cli …`` is the same.)

Training runs: docs/reward_presets.md (verl overrides, TRL helper ``python -m thinkj.online.trl_presets``).
"""

from __future__ import annotations

import json

import typer

app = typer.Typer(add_completion=False, invoke_without_command=True, help="Reward presets: list them, score texts.")


@app.callback()
def _default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        list_presets()


def _value(text: str):
    """JSON when the text parses (a 5,000-digit integer or deep nesting does not), else the text itself."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


@app.command("list")
def list_presets() -> None:
    """Every per-sample preset and group-level reward with its default weights."""
    from thinkj.rewards.registry import GROUP_REWARDS, PRESETS

    for name, preset in sorted(PRESETS.items()):
        typer.echo(f"preset {name}: {preset.description}\n    defaults {json.dumps(preset.defaults, default=str)}")
    for name, reward in sorted(GROUP_REWARDS.items()):
        typer.echo(f"group  {name}: {reward.description}\n    keys {', '.join(reward.keys)}\n"
                   f"    defaults {json.dumps(reward.defaults, default=str)}")


@app.command("score")
def score(name: str, text: list[str] = typer.Option(..., help="completion text; repeat for a group"),
          gt: str = typer.Option(..., help="ground truth as JSON (or a bare string)"),
          group: bool = typer.Option(False, help="score the texts together with the group-level reward"),
          set_: list[str] = typer.Option([], "--set", help="weight override key=value (JSON value)")) -> None:
    """Print the reward dict of each text (JSON lines). A weight the reward cannot use, or a ground truth it
    would record as a data error (``gold_error``), is a one-line error instead."""
    from thinkj.errors import ThinkJError
    from thinkj.overrides import json_or_text, parse_key_values
    from thinkj.rewards.registry import get_group_reward, get_preset

    weights = parse_key_values(set_, "--set", json_or_text, example="e.g. --set w_str=0.5")
    if gt.lstrip()[:1] in ("{", "[") and not isinstance(_value(gt), (dict, list)):
        raise ThinkJError(f"--gt {gt!r}: not valid JSON")
    truth = _value(gt)
    reward = get_group_reward(name) if group else get_preset(name)
    weights = {k: v for k, v in reward.weights(weights, where="--set ").items() if k in weights}
    problem = reward.gold_problem(truth)
    if problem:
        raise ThinkJError(f"--gt {gt!r}: {problem}")
    if group:
        results = reward.score("", list(text), [truth] * len(text), **weights)
    else:
        results = [reward(t, truth, **weights) for t in text]
    for result in results:
        typer.echo(json.dumps(result, default=str))


if __name__ == "__main__":
    from thinkj.errors import exit_on_user_error, run_typer

    exit_on_user_error(lambda: run_typer(app))
