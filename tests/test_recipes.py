"""Recipes (configs/recipes/*.yaml) and ``thinkj run``: the same plan as the scripts, the environment and ``--set``.

Each run below is a real subprocess (``thinkj run``, ``bash scripts/reproduce_<model>.sh``, ``python -m
thinkj.pipeline``) in dry-run mode: fast, no engine. Broken once on purpose to see these fail: the 32B recipe's
``tp: 4`` changed to 2 (the parity with the old script's settings failed), the environment layer dropped from
``settings.resolve`` (``W_STR=0.5`` planned the default run), the unknown-key check of ``read_recipe`` removed
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
from thinkj.pipeline.settings import BY_KEY, DEFAULTS, SETTINGS, parse_set, read_recipe, resolve

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
    from thinkj.pipeline.plan import plan, validate

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


# --- the CPU recipes: what reproduce_cpu.sh did around the pipeline is now the run's own (thinkj/pipeline/prep.py) ---

def _old_cpu_env(model: str, run_dir: Path, shared: str = "") -> tuple[dict[str, str], list[str]]:
    """What the old reproduce_cpu.sh exported (and the recipe's preparation settings switched off): the plan the
    recipe must still make, apart from its model and task stages."""
    task = run_dir / "task"
    data = f"synthetic={task}/test.jsonl" + (f" autoj={shared}/auto-j/testdata_pairwise.jsonl "
                                             f"rmbench={shared}/rm-bench" if shared else "")
    env = dict(SOURCE_LOCATION=f"{task}/train.jsonl", BENCHMARKS="synthetic" + (" autoj rmbench" if shared else ""),
               BENCHMARK_DATA=data, TEACHER_URL="http://127.0.0.1:PORT/v1")
    if model == "tiny":  # the old script wrote this profile before the pipeline ran
        (run_dir / "model").mkdir(parents=True, exist_ok=True)
        (run_dir / "model" / "tiny.yaml").write_text(
            f"model_name_or_path: {(run_dir / 'model').resolve()}\ntemplate: qwen\nmax_new_tokens: 96\n")
        env["MODEL_PROFILE"] = str(run_dir / "model" / "tiny.yaml")
    # the old script's tiny run had no critic data (the wrong-side examples need the generated task)
    return env, ["--set", "synthetic_task=", "--set", "build_model=", "--set", "critic_wrong_side_every=0"]


def _stages(out: str) -> list[str]:
    return [line.split()[2] for line in out.splitlines() if line.startswith("# stage ")]


@pytest.mark.parametrize("model,shared", [("smollm2", ""), ("tiny", ""), ("smollm2", "/shared/data")])
def test_reproduce_cpu_is_its_recipe_plus_the_model_and_task_stages(model, shared, tmp_path):
    """``DRY_RUN=1 bash scripts/reproduce_cpu.sh`` == ``thinkj run configs/recipes/X-cpu.yaml --dry-run`` == the plan
    the old script made (its exported task paths, profile and teacher URL) with the model and task stages in front.
    Broken on purpose: without pipeline.prep.derive_defaults in settings.resolve, the recipe was refused (synthetic
    with no BENCHMARK_DATA)."""
    run_dir = tmp_path / "run"
    extra = {"SHARED_DATA": shared} if shared else {}
    recipe = f"configs/recipes/{model}-cpu.yaml"
    script = _out(["bash", "scripts/reproduce_cpu.sh"], _env(run_dir, DRY_RUN="1", CPU_MODEL=model, **extra))
    ran = _out([THINKJ, "run", recipe, "--dry-run"], _env(run_dir, **extra))
    assert script == ran
    prepared = ["model", "task"] if model == "tiny" else ["task"]
    assert _stages(ran)[:len(prepared)] == prepared and "load" not in _stages(ran)[:len(prepared)]
    if model == "smollm2":  # now the demo's recipe: its critic data needs the prepared task, so no old plan
        assert f"thinkj data task facts {run_dir}/task --train 256" in ran
        assert "thinkj data critic-data" in ran and "thinkj eval compare" in ran
        return
    env, sets = _old_cpu_env(model, run_dir, shared)
    old = _out([THINKJ, "run", recipe, "--dry-run", *sets], _env(run_dir, **env))
    prep_lines = 2 * len(prepared)  # "# stage x" and its command
    # one difference: the old plan's held-out file was handed in, so EVAL_LIMIT=20 is passed on; the recipe's own
    # task stage writes TASK_TEST=20 pairs, so a limit of 20 cuts nothing and is left out (a --limit run is never
    # complete: pipeline.evaluate.eval_limit)
    limited = [line.replace(" --limit 20 ", " ") if line.startswith("thinkj eval run synthetic ") else line
               for line in old.splitlines()]
    assert limited != old.splitlines()
    assert ran.splitlines()[prep_lines:] == limited
    assert f"thinkj data task fruit {run_dir}/task --train 64" in ran


def test_cpu_settings_fill_in_only_what_is_not_given(tmp_path):
    """The preparation settings' defaults (pipeline.prep.derive_defaults) yield to a value given anywhere, except
    that SHARED_DATA extends a recipe's BENCHMARKS (not one from the environment or --set)."""
    tiny = ROOT / "configs" / "recipes" / "tiny-cpu.yaml"
    values = resolve(tiny, env={}).values
    assert (values["RUN_DIR"], values["MODEL_PROFILE"]) == ("runs/cpu/tiny", "runs/cpu/tiny/model/tiny.yaml")
    assert values["SOURCE_LOCATION"] == "runs/cpu/tiny/task/train.jsonl"
    assert values["BENCHMARK_DATA"] == "synthetic=runs/cpu/tiny/task/test.jsonl"
    assert resolve(tiny, env={"SEED": "2"}).values["RUN_DIR"] == "runs/cpu/tiny_seed2"  # as the old script's
    assert resolve(tiny, env={"RUN_DIR": "x", "SEED": "2"}).values["MODEL_PROFILE"] == "x/model/tiny.yaml"
    given = resolve(tiny, env={"MODEL_PROFILE": "smollm2-135m-instruct", "SOURCE_LOCATION": "s.jsonl"}).values
    assert (given["MODEL_PROFILE"], given["SOURCE_LOCATION"]) == ("smollm2-135m-instruct", "s.jsonl")
    shared = resolve(tiny, env={"SHARED_DATA": "/d"}).values
    assert shared["BENCHMARKS"] == "synthetic autoj rmbench"
    assert shared["BENCHMARK_DATA"] == ("synthetic=runs/cpu/tiny/task/test.jsonl autoj=/d/auto-j/testdata_pairwise.jsonl"
                                        " rmbench=/d/rm-bench")
    only = resolve(tiny, env={"SHARED_DATA": "/d", "BENCHMARKS": "synthetic", "BENCHMARK_DATA": "synthetic=t.jsonl"})
    assert (only.values["BENCHMARKS"], only.values["BENCHMARK_DATA"]) == ("synthetic", "synthetic=t.jsonl")
    assert resolve(None, env={"BUILD_MODEL": "tiny"}).values["RUN_DIR"] == "runs/tiny"


def test_a_real_run_validates_what_its_stages_will_create(tmp_path):
    """Not a dry run, a fresh run folder: the tiny profile and the task's held-out pairs do not exist yet, and the
    settings are valid (the model and task stages write them). Broken on purpose: with the planned-file exception
    removed from pipeline.checks.benchmark_data, 'BENCHMARK_DATA: synthetic=...: no such file' failed this."""
    from thinkj.pipeline.plan import plan, validate

    values = resolve(ROOT / "configs" / "recipes" / "tiny-cpu.yaml", env={"RUN_DIR": str(tmp_path / "run")}).values
    validate(values)
    stages = {stage.name: stage for stage in plan(values)}
    test_pairs = tmp_path / "run" / "task" / "test.jsonl"
    # the not-yet-written held-out pairs are inputs of decontamination and evaluation: their content enters the records
    assert stages["decontaminate"].inputs["benchmark_synthetic"] == test_pairs
    assert stages["eval_synthetic"].inputs["data"] == test_pairs
    assert stages["difficulty"].argv[stages["difficulty"].argv.index("--model") + 1] == str((tmp_path / "run" /
                                                                                              "model").resolve())


@pytest.mark.parametrize("sets,says", [
    (["synthetic_task=apples"], "SYNTHETIC_TASK='apples': must be one of fruit, facts, constraints"),
    (["build_model=huge"], "BUILD_MODEL='huge': must be one of tiny"),
    (["synthetic_task=", "critic_wrong_side_every=0", "benchmarks=autoj"],
     "TEACHER_URL='scripted': the scripted teacher knows only a generated"),
    (["task_train=0"], "TASK_TRAIN='0': must be a whole number >= 1"),
])
def test_bad_preparation_settings_fail_in_one_line(sets, says, tmp_path):
    line = _refused([THINKJ, "run", "configs/recipes/tiny-cpu.yaml", "--dry-run",
                     *[x for item in sets for x in ("--set", item)]], tmp_path)
    assert says in line, line


def test_the_scripted_teacher_serves_only_while_needed_and_stops():
    """``TEACHER_URL=scripted``: a real HTTP server on a free loopback port inside the block, gone after it (also when
    the block raises); no server at all when the traces are done or the run is dry."""
    import urllib.error
    import urllib.request

    from thinkj.pipeline.prep import SCRIPTED_PLACEHOLDER, scripted_teacher

    s = resolve(ROOT / "configs" / "recipes" / "tiny-cpu.yaml", env={}).values
    with scripted_teacher(s, needed=False, out=sys.stderr) as served:
        assert served["TEACHER_URL"] == SCRIPTED_PLACEHOLDER
    with pytest.raises(RuntimeError, match="stage failed"), scripted_teacher(s, needed=True, out=sys.stderr) as served:
        url = served["TEACHER_URL"]
        assert url.startswith("http://127.0.0.1:") and ":PORT" not in url
        models = urllib.request.urlopen(f"{url}/models", timeout=10).read().decode()
        assert "r1-scripted" in models
        raise RuntimeError("stage failed")
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/models", timeout=5)


def test_lf_processes_puts_the_llamafactory_stages_under_torchrun_on_the_cpu(tmp_path):
    """``--set lf_processes=2`` on a CPU recipe: judge SFT, critic SFT and offline DPO each get ``--processes 2``
    (the GPU node's launch, tests/test_lf_deepspeed.py), nothing else does; the default plans none; a GPU run and 0
    are refused."""
    tiny, sets = "configs/recipes/tiny-cpu.yaml", ["--set", "learning=both", "--set", "rl_engine=trl"]
    two = _out([THINKJ, "run", tiny, "--dry-run", *sets, "--set", "lf_processes=2"], _env(tmp_path))
    assert sum("train sft judge_sft" in line or "train sft critic_sft" in line or "train offline" in line
               for line in two.splitlines() if "--processes 2" in line) == 3, two
    assert two.count("--processes") == 3
    assert "--processes" not in _out([THINKJ, "run", tiny, "--dry-run", *sets], _env(tmp_path))
    assert _refused([THINKJ, "run", "configs/recipes/qwen2.5-7b.yaml", "--dry-run", "--set", "lf_processes=2"],
                    tmp_path).startswith("error: LF_PROCESSES=2: a DEVICE=cpu setting")
    assert _refused([THINKJ, "run", tiny, "--dry-run", "--set", "lf_processes=0"], tmp_path).startswith(
        "error: LF_PROCESSES='0': must be a whole number >= 1")


@pytest.mark.parametrize(("sets", "synthetic_limit", "shared_limit"), [
    ([], None, "30"), (["--set", "task_test=40"], "30", "30"), (["--set", "eval_limit=12"], "12", "12")])
def test_eval_limit_is_left_out_where_it_covers_the_generated_held_out_set(sets, synthetic_limit, shared_limit,
                                                                          tmp_path):
    """The demo's EVAL_LIMIT=30 equals its TASK_TEST=30: passed on, every row's results would say incomplete
    (``--limit 30``) and experiments/keep_records.py would refuse them. A shared benchmark keeps the limit."""
    ran = _out([THINKJ, "run", "configs/recipes/smollm2-cpu.yaml", "--dry-run", *sets],
               _env(tmp_path / "run", SHARED_DATA="/shared/data"))
    evals = [line.split() for line in ran.splitlines() if line.startswith("thinkj eval run ")]
    assert len(evals) == 12  # four rows x three benchmarks
    limits = {(argv[3], argv[argv.index("--limit") + 1] if "--limit" in argv else None) for argv in evals}
    assert limits == {("synthetic", synthetic_limit), ("autoj", shared_limit), ("rmbench", shared_limit)}
