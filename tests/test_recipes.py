"""Recipes (configs/recipes/*.yaml) and ``thinkj run``: the same plan as the scripts, the environment and ``--set``.

Each run below is a real subprocess (``thinkj run``, ``bash scripts/reproduce_<model>.sh``, ``python -m
thinkj.pipeline``) in dry-run mode: fast, no engine. Broken once on purpose to see these fail: the 32B recipe's
``tp: 4`` changed to 2 (the parity with the old script's settings failed), the environment layer dropped from
``run_settings.resolve`` (``W_STR=0.5`` planned the default run), the unknown-key check of ``read_recipe`` removed
(a recipe's ``w_strr`` was ignored).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_reproduce import ROOT

from thinkj.errors import ThinkJError
from thinkj.run_settings import BY_KEY, DEFAULTS, SETTINGS, parse_set, read_recipe, resolve

THINKJ = str(Path(sys.executable).parent / "thinkj")
RECIPES = sorted(p.stem for p in (ROOT / "configs" / "recipes").glob("*.yaml"))
# What each reproduce_<model>.sh exported before it ran its recipe: the recipe must plan exactly that run.
OLD_SCRIPT_ENV = {
    "qwen2.5-7b": dict(MODEL_PROFILE="qwen2.5-7b-instruct", MODEL_NAME="Qwen2.5-7B-Instruct",
                       REWARD_PRESET="thinkj_qwen", TP="1"),
    "llama3-8b": dict(MODEL_PROFILE="llama-3-8b-instruct", MODEL_NAME="Llama-3-8B-Instruct",
                      REWARD_PRESET="thinkj_llama", TP="1"),
    "qwen2.5-32b": dict(MODEL_PROFILE="qwen2.5-32b-instruct", MODEL_NAME="Qwen2.5-32B-Instruct",
                        REWARD_PRESET="thinkj_qwen", TP="4"),
}


def _env(run_dir: Path, **extra: str) -> dict[str, str]:
    """This environment without any pipeline setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k.upper() not in DEFAULTS and not k.upper().startswith("W_")}
    env.update(RUN_DIR=str(run_dir), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", **extra)
    return env


def _out(argv: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "# stage load" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def _refused(argv: list[str], tmp_path: Path) -> str:
    """The command must fail in one ``error:`` line and print no command; returns that line."""
    proc = subprocess.run(argv, cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and not proc.stdout.strip(), proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_the_three_paper_models_have_a_recipe():
    assert {"qwen2.5-7b", "llama3-8b", "qwen2.5-32b"} <= set(RECIPES)


@pytest.mark.parametrize("recipe", sorted(OLD_SCRIPT_ENV))
def test_thinkj_run_plans_what_the_script_and_the_old_environment_plan(recipe, tmp_path):
    """``thinkj run X.yaml --dry-run`` == ``DRY_RUN=1 bash scripts/reproduce_X.sh`` == the env-only pipeline with
    the four variables the script exported before recipes existed: same stages, same commands, same order."""
    path = f"configs/recipes/{recipe}.yaml"
    ran = _out([THINKJ, "run", path, "--dry-run"], _env(tmp_path))
    script = _out(["bash", f"scripts/reproduce_{recipe}.sh"], _env(tmp_path, DRY_RUN="1"))
    old = _out([sys.executable, "-m", "thinkj.pipeline"], _env(tmp_path, DRY_RUN="1", **OLD_SCRIPT_ENV[recipe]))
    assert ran == script == old
    assert ran.count("# stage ") == 14  # load .. judge_sft, online, merge, three benchmarks, tables


@pytest.mark.parametrize("name,value", [("W_STR", "0.5"), ("LEARNING", "offline"), ("SEED", "1")])
def test_an_environment_variable_plans_what_set_plans(name, value, tmp_path):
    base = _out([THINKJ, "run", "configs/recipes/llama3-8b.yaml", "--dry-run"], _env(tmp_path))
    by_env = _out(["bash", "scripts/reproduce_llama3-8b.sh"], _env(tmp_path, DRY_RUN="1", **{name: value}))
    by_set = _out([THINKJ, "run", "configs/recipes/llama3-8b.yaml", "--dry-run", "--set", f"{name.lower()}={value}"],
                  _env(tmp_path))
    assert by_env == by_set != base


def test_precedence_default_recipe_environment_set():
    recipe = ROOT / "configs" / "recipes" / "qwen2.5-32b.yaml"
    assert resolve(None, env={}).values["TP"] == BY_KEY["tp"].default == "1"
    assert resolve(recipe, env={}).values["TP"] == "4"
    assert resolve(recipe, env={"TP": " "}).values["TP"] == "4"  # empty is unset, as the scripts always read it
    assert resolve(recipe, env={"TP": "2"}).values["TP"] == "2"
    chosen = resolve(recipe, env={"TP": "2"}, sets=["tp=8"])
    assert chosen.values["TP"] == "8" and chosen.origin["TP"] == "--set tp"
    assert resolve(recipe, env={}).values["NNODES"] == DEFAULTS["NNODES"][0]  # not in the recipe: the default
    assert resolve(recipe, env={}, sets=["seed=3"]).values["RUN_DIR"] == "runs/qwen2.5-32b-instruct_seed3"


def test_values_are_typed_by_the_setting(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("benchmarks: [rewardbench, autoj]\nw_str: 0.5\nseed: 7\ndry_run: true\n"
                      "sft_overrides: [max_steps=8, learning_rate=1e-4]\n")
    values = resolve(recipe, env={}).values
    assert (values["BENCHMARKS"], values["W_STR"], values["SEED"], values["DRY_RUN"]) == ("rewardbench autoj", "0.5",
                                                                                        "7", "1")
    assert values["SFT_OVERRIDES"] == "max_steps=8 learning_rate=1e-4"
    assert parse_set(["benchmarks=rewardbench autoj", "dry_run=false", "w_str=0.50"]) == {
        "BENCHMARKS": ("rewardbench autoj", "--set benchmarks"), "DRY_RUN": ("0", "--set dry_run"),
        "W_STR": ("0.50", "--set w_str")}  # a number as written: it names the run's folder, as W_STR=0.50 does
    assert len({s.name for s in SETTINGS}) == len(SETTINGS) == len(DEFAULTS)  # each setting declared once


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_reads_and_validates(recipe):
    from thinkj.pipeline import plan, validate

    path = ROOT / "configs" / "recipes" / f"{recipe}.yaml"
    assert read_recipe(path)
    values = resolve(path, env={}, sets=["dry_run=1"]).values
    validate(values)
    assert plan(values)


@pytest.mark.parametrize("text,says", [
    ("model_profile: x\nw_strr: 1\n", "w_strr: not a setting of the run (did you mean w_str?)"),
    ("tp: four\n", "tp='four': must be a whole number"),
    ("benchmarks: {rewardbench: 1}\n", "benchmarks={'rewardbench': 1}: must be a list"),
    ("w_str: .nan\n", "w_str=nan: must be a finite number"),
    ("dry_run: maybe\n", "dry_run='maybe': must be true or false"),
    ("- tp\n", "a recipe is a mapping of settings"),
])
def test_a_bad_recipe_is_refused_naming_file_and_key(tmp_path, text, says):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(text)
    with pytest.raises(ThinkJError) as err:
        resolve(recipe, env={})
    assert str(err.value).startswith(f"{recipe}: ") and says in str(err.value), str(err.value)


def test_bad_recipe_and_set_fail_in_one_line(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("model_profile: qwen2.5-7b-instruct\nw_strr: 0.0\n")
    assert _refused([THINKJ, "run", str(recipe), "--dry-run"], tmp_path) == \
        f"error: {recipe}: w_strr: not a setting of the run (did you mean w_str?)"
    recipe.write_text("tp: 0\n")  # a kind that is right, a value the pipeline's validate refuses: it names the key
    assert _refused([THINKJ, "run", str(recipe), "--dry-run"], tmp_path) == \
        f"error: TP='0': must be a whole number >= 1 (from {recipe}: tp)"
    seven = "configs/recipes/qwen2.5-7b.yaml"
    assert _refused([THINKJ, "run", seven, "--dry-run", "--set", "w_strr=0.5"], tmp_path) == \
        "error: --set w_strr: not a setting of the run (did you mean w_str?)"
    assert _refused([THINKJ, "run", seven, "--dry-run", "--set", "tp=two"], tmp_path) == \
        "error: --set tp='two': must be a whole number"
    assert _refused([THINKJ, "run", seven, "--dry-run", "--set", "w_str=-1"], tmp_path) == \
        "error: W_STR='-1': a reward weight must be >= 0 (from --set w_str)"


def test_set_needs_key_equals_value():
    for item in ("w_str", "=0.5"):
        with pytest.raises(ThinkJError, match="expected key=value"):
            parse_set([item])
