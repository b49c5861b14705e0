"""The settings of one reproduction run: each declared once (type, default, help), resolved once, checked once.

    thinkj run configs/recipes/qwen2.5-7b.yaml --dry-run              # print every command, run nothing
    thinkj run configs/recipes/llama3-8b.yaml --set learning=offline --set offline_iterations=2
    W_STR=0.5 thinkj run configs/recipes/qwen2.5-32b.yaml             # the environment still overrides a recipe

A recipe (``configs/recipes/<model>.yaml``) is a YAML mapping whose keys are the settings below in lower case
(``model_profile``, ``w_str``, ``benchmarks: [rewardbench, rmbench, autoj]``). Each setting's value comes from,
last one winning: its default here < the recipe < the environment variable of its upper-case name when set and
not empty (``W_STR=0.5``: what ``scripts/reproduce*.sh`` always read) < ``--set key=value``. A recipe or
``--set`` value is typed by the setting it sets (whole number, number, true/false, list, text); an unknown key is
refused naming the file (or ``--set``) and the closest key. The pipeline then sees every setting as text
(``TP='4'``, ``BENCHMARKS='rewardbench rmbench autoj'``) and :func:`thinkj.pipeline.plan.validate` checks the values
and the rules between them, once, before stage 1; its one-line error names where a value came from. A recipe's
``run_dir`` gets ``_seed<SEED>`` as the default one does; what BUILD_MODEL, SYNTHETIC_TASK and SHARED_DATA imply for
MODEL_PROFILE, SOURCE_LOCATION, BENCHMARKS and BENCHMARK_DATA is filled in where those are not set
(:func:`thinkj.pipeline.prep.derive_defaults`).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from thinkj.errors import ThinkJError

KINDS = ("str", "int", "float", "bool", "list")


@dataclass(frozen=True)
class Setting:
    """One setting: its environment name (upper case; the recipe key is its lower case), kind, default and help."""

    name: str
    kind: str
    default: str  # as the pipeline reads it: text, lists space separated, "" = unset
    help: str

    @property
    def key(self) -> str:
        return self.name.lower()


def _s(name: str, kind: str, default: str, help: str) -> Setting:
    return Setting(name, kind, default, help)


# Model-specific values live in the recipes (configs/recipes/); these are what a recipe leaves out.
SETTINGS: tuple[Setting, ...] = (
    _s("MODEL_PROFILE", "str", "qwen2.5-7b-instruct", "configs/models/<profile>.yaml: hub id + LlamaFactory template"),
    _s("MODEL_NAME", "str", "Qwen2.5-7B-Instruct", "tags.model in results JSON (what `thinkj tables` matches)"),
    _s("RUN_DIR", "str", "", "every output goes under here [runs/<MODEL_PROFILE>, runs/<MODEL_PROFILE>_seed<SEED> "
                             "with SEED]"),
    _s("TRAIN_SOURCE", "str", "skywork", "data_prep.load_source kind: skywork | helpsteer2 | hh_rlhf | pairs "
                                         "(PreferencePair JSONL)"),
    _s("TRAIN_DATA_NAME", "str", "Skywork", "tags.train_data"),
    _s("SOURCE_LOCATION", "str", "", "hub name or local file for the source [the loader's hub default]"),
    _s("SOURCE_LIMIT", "int", "", "keep the first N pairs [all]"),
    _s("JUDGE_BACKEND", "str", "vllm", "inference backend for difficulty filtering and evaluation: vllm | hf"),
    _s("TP", "int", "1", "vLLM tensor_parallel_size (32B: 4); the difficulty filter and evaluation run "
                         "GPUS_PER_NODE / TP workers of TP GPUs each on the node"),
    _s("DIFFICULTY_MAX_NEW_TOKENS", "int", "", "generation budget per judgment of the difficulty filter "
                                               "[MODEL_PROFILE's max_new_tokens]; lower it for a judge whose context "
                                               "is shorter"),
    _s("DEDUP_MODEL", "str", "hkunlp/instructor-large", "embedding model of the diversity filter (paper: "
                                                        "instructor-large)"),
    _s("DEDUP_THRESHOLD", "float", "0.9", "cosine similarity at or above which a pair is a duplicate"),
    _s("DEDUP_TEXT_FIELD", "str", "instruction", "what dedup embeds: instruction | instruction+responses (a generated "
                                                 "task repeats its instruction templates)"),
    _s("DECONTAM_ENCODER", "str", "", "embedding rule of the decontamination stage, DEDUP_MODEL's names; none = off "
                                      "[DEDUP_MODEL]"),
    _s("DECONTAM_THRESHOLD", "float", "0.95", "cosine similarity at or above which a training text copies a "
                                              "benchmark item"),
    _s("DECONTAMINATE", "str", "drop", "drop | report: pairs holding a benchmark item are dropped, or only reported"),
    _s("TEACHER_MODEL", "str", "deepseek-reasoner", "R1 teacher for the thinking traces"),
    _s("TEACHER_URL", "str", "https://api.deepseek.com/v1", "OpenAI-compatible base URL of the teacher; scripted = "
                                                            "the run serves the scripted R1 for SYNTHETIC_TASK on a "
                                                            "free 127.0.0.1 port while traces run"),
    _s("TEACHER_KEY_ENV", "str", "DEEPSEEK_API_KEY", "name of the env var holding the teacher's API key (never "
                                                     "printed)"),
    _s("LEARNING", "str", "online", "online (RL) | offline (critic-guided DPO) | both (each from the one SFT judge: "
                                    "the four rows of Table 4's layout with EVAL_ROWS)"),
    _s("RL_ENGINE", "str", "verl", "verl | trl: trl runs GRPO on one machine (the CPU demo: a verl step on 2 cores "
                                   "costs 3-5x a TRL step, experiments/LOG.md 'RL step cost on CPU')"),
    _s("RL_DATA", "str", "seed_set", "seed_set | source: RL prompts from the seed set's RL pairs, or from every loaded "
                                     "training pair (label-only; the paper's online stage reads preference data "
                                     "beyond LIMJ707)"),
    _s("RL_ALGO", "str", "grpo", "grpo | ppo | reinforce_pp (Table 4)"),
    _s("REWARD_PRESET", "str", "thinkj_qwen", "thinkj_qwen | thinkj_llama: Table 8's best weights per model "
                                              "(`thinkj rewards` lists each preset's weights)"),
    _s("W_ACC", "float", "", "override the preset's accuracy weight"),
    _s("W_FMT", "float", "", "override the preset's format weight (Table 8: 1.0 / 0.5 / 0.0)"),
    _s("W_STR", "float", "", "override the preset's strength weight (Table 8: 0.5 / 0.2 / 0.0)"),
    _s("W_CON", "float", "", "consistency weight (J1: paid when both orders of a comparison are right); needs "
                             "RL_ALGO=grpo_consistent, which trains on both orders in one step [the preset's: 0]"),
    _s("NNODES", "int", "2", "verl nodes (Table 11: 2 x 8 GPUs)"),
    _s("GPUS_PER_NODE", "int", "8", "GPUs per node"),
    _s("OFFLINE_ITERATIONS", "int", "1", "critic-guided DPO rounds (Table 7: 1-3)"),
    _s("BENCHMARKS", "list", "rewardbench rmbench autoj", "benchmarks to evaluate (space separated)"),
    _s("EVAL_LIMIT", "int", "", "items per benchmark [all]; not passed where it covers the generated task's TASK_TEST"),
    _s("MAX_NEW_TOKENS", "int", "4096", "evaluation generation budget per judgment"),
    _s("SEED", "int", "", "seed of every seeded stage [unset: each stage's own default, listed below]"),
    _s("TABLES", "list", "4", "tables to render from this run's results (space separated)"),
    _s("DRY_RUN", "bool", "0", "1 = print every command in order, run nothing"),
    # Scale: what a GPU run leaves at the configs' values and a CPU rehearsal (scripts/reproduce_cpu.sh) sets
    _s("DEVICE", "str", "gpu", "gpu | cpu: cpu trains with LlamaFactory and verl's own trainer on this machine's CPU"),
    _s("SFT_OVERRIDES", "list", "", "LlamaFactory key=value overrides of judge and critic SFT, space separated "
                                    "[the configs']"),
    _s("DPO_OVERRIDES", "list", "", "LlamaFactory key=value overrides of offline DPO, space separated [the config's]"),
    _s("CRITIC_OVERRIDES", "list", "", "LlamaFactory key=value overrides of critic SFT, after SFT_OVERRIDES [none]"),
    _s("CRITIC_WRONG_SIDE_EVERY", "int", "0", "with SYNTHETIC_TASK: every Nth training pair also gives the critic a "
                                              "rule-written example arguing the side it is told when that side is "
                                              "wrong (a small critic trained on right sides only learns to judge, not "
                                              "to argue: 0 of 43 negatives on the tiny model) [0: none]"),
    _s("OFFLINE_PAIRS", "str", "seed_set", "seed_set | outside_seed_set: the comparisons critic-guided pairs come "
                                           "from: the seed set's RL pairs, or the loaded pairs the seed set does not "
                                           "hold (the SFT judge was trained on the seed set: its pairs replay it)"),
    _s("PAIR_LIMIT", "int", "", "critic-guided pairs from the first N RL comparisons [all]"),
    _s("PAIR_MAX_NEW_TOKENS", "int", "", "generation budget of the critic-guided pairs [MODEL_PROFILE's "
                                         "max_new_tokens]"),
    _s("RL_VAL_FRACTION", "float", "0", "share of the RL pairs held out (whole questions) and judged in both orders "
                                        "during RL: verl every trainer.test_freq steps, TRL every eval_steps (held-out "
                                        "accuracy per order, pair accuracy, (a) share; `thinkj train curves`) [0: "
                                        "none, every pair trains, as in the paper]"),
    _s("RL_STEPS", "int", "", "RL steps: verl trainer.total_training_steps [the config's epochs], trl --steps "
                              "[thinkj train rl's]"),
    _s("LF_PROCESSES", "int", "1", "DEVICE=cpu: each LlamaFactory stage (judge / critic SFT, offline DPO) as N "
                                    "processes under torchrun on gloo with its DeepSpeed config, the GPU node's "
                                    "launch rehearsed (thinkj train --processes) [1: in-process, no DeepSpeed]"),
    _s("CPU_BF16", "bool", "0", "DEVICE=cpu: bf16 autocast in training (LlamaFactory, TRL) and bf16 weights in hf "
                                "generation, where the CPU computes bf16 natively (avx512_bf16 / AMX; emulated bf16 "
                                "is slower than fp32)"),
    _s("DIFFICULTY_LIMIT", "int", "", "judge only the first N loaded pairs in the difficulty filter [all]"),
    _s("DIFFICULTY_BATCH", "int", "", "hf batch size of the difficulty filter [the backend's]"),
    _s("PAIR_BATCH", "int", "", "hf batch size of the critic-guided pairs [the backend's]"),
    _s("EVAL_BATCH", "int", "", "hf batch size of evaluation [the backend's]"),
    _s("EVAL_ROWS", "list", "", "judge these models, one row each: base init offline online (a 'compare' stage then "
                                "sets each against the row it builds on, a paired test clustered by question) "
                                "[the run's final model only]"),
    _s("IN_PROCESS", "bool", "0", "run each stage's command inside the pipeline's process, its output to the "
                                  "stage's log (saves ~5 s of imports per stage on CPU); GPU runs keep a process "
                                  "per stage, which frees its GPU memory"),
    _s("TRL_OVERRIDES", "list", "", "RL_ENGINE=trl: GRPORun or GRPOConfig key=value, space separated, applied last "
                                    "(learning_rate=5e-6 num_generations=4 max_rows=256) [thinkj train rl's]"),
    _s("VERL_OVERRIDES", "list", "", "verl Hydra overrides key=value, space separated, applied last [none]"),
    _s("BENCHMARK_DATA", "list", "", "local data per benchmark, 'autoj=FILE rmbench=DIR synthetic=FILE' [each "
                                     "benchmark's hub set; synthetic: SYNTHETIC_TASK's held-out pairs; autoj, "
                                     "rmbench: under SHARED_DATA when set]; the synthetic benchmark needs one"),
    # What a run prepares for itself before load (thinkj/pipeline/prep.py; the CPU recipes use them)
    _s("BUILD_MODEL", "str", "", "tiny = a model stage builds the tiny model in <RUN_DIR>/model with its profile "
                                 "<RUN_DIR>/model/tiny.yaml, the MODEL_PROFILE unless one is given [none]"),
    _s("SYNTHETIC_TASK", "str", "", "fruit | facts | constraints: a task stage writes the generated task's pairs to "
                                    "<RUN_DIR>/task/{train,test}.jsonl, the SOURCE_LOCATION and the synthetic "
                                    "benchmark's data unless given [none]"),
    _s("TASK_TRAIN", "int", "64", "training pairs of SYNTHETIC_TASK"),
    _s("TASK_TEST", "int", "20", "held-out pairs of SYNTHETIC_TASK (the synthetic benchmark)"),
    _s("TASK_SEED", "int", "0", "seed of SYNTHETIC_TASK's pairs"),
    _s("SHARED_DATA", "str", "", "folder of the shared benchmark data: autoj and rmbench are evaluated too (unless "
                                 "BENCHMARKS comes from the environment or --set), from <folder>/auto-j/"
                                 "testdata_pairwise.jsonl and <folder>/rm-bench [unset: only BENCHMARKS]"),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
assert all(s.kind in KINDS for s in SETTINGS)
# name -> (default, help): the view `python -m thinkj.pipeline --print-env` and the pipeline read.
DEFAULTS: dict[str, tuple[str, str]] = {s.name: (s.default, s.help) for s in SETTINGS}
# Reward weight overrides: the only W_* settings (an unknown W_* is a typo, never ignored).
WEIGHT_SETTINGS = ("W_ACC", "W_FMT", "W_STR", "W_CON")
DEFAULT_ORIGIN = "default"
ENV_ORIGIN = "environment"


@dataclass
class RunSettings:
    """Every setting's value as the pipeline reads it (text) and where it came from (for error messages)."""

    values: dict[str, str]
    origin: dict[str, str] = field(default_factory=dict)  # name -> "default" | "environment" | "<recipe>: key" | …

    def where(self, name: str) -> str:
        """`` (from configs/recipes/x.yaml: tp)`` for a value a recipe or ``--set`` gave, else ``""``."""
        origin = self.origin.get(name, DEFAULT_ORIGIN)
        return "" if origin in (DEFAULT_ORIGIN, ENV_ORIGIN) else f" (from {origin})"


def _close(word: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=cutoff)
    return f"did you mean {close[0]}?" if close else ""


def check_names(env: Mapping[str, str]) -> None:
    """Refuse an environment variable that looks like a setting but is none: an unknown ``W_*``, a known name in
    other letter case, or a name close to a known one (``W_STRR``, ``BENCHMARK``). Ignoring it would run the
    default silently -- an ablation that is not one."""
    for name in env:
        upper = name.upper()
        if name in BY_NAME:
            continue
        close = [upper] if upper in BY_NAME else difflib.get_close_matches(upper, BY_NAME, n=1, cutoff=0.83)
        if close or upper.startswith("W_"):
            hint = f"did you mean {close[0]}?" if close else f"the reward weights are {', '.join(WEIGHT_SETTINGS)}"
            raise ThinkJError(f"{name}: not a setting of the pipeline ({hint}); "
                              "`python -m thinkj.pipeline --print-env` lists them")


_INT = re.compile(r"\s*[+-]?\d+\s*")
_BOOLS = {"1": "1", "true": "1", "yes": "1", "on": "1", "0": "0", "false": "0", "no": "0", "off": "0"}


def typed_text(setting: Setting, value: Any, where: str) -> str:
    """A recipe's or ``--set``'s value as the pipeline's text, refused unless it has the setting's kind. ``where``
    names it in the error (``configs/recipes/x.yaml: tp``, ``--set tp``). ``None`` and ``""`` mean the default."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return setting.default
    kind, text = setting.kind, value.strip() if isinstance(value, str) else value
    problem = ""
    if kind == "list":
        if isinstance(text, str):  # --set benchmarks='rewardbench autoj'
            try:
                return shlex.join(shlex.split(text))
            except ValueError as exc:
                problem = str(exc)
        elif isinstance(text, list) and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in text):
            return shlex.join(str(x) for x in text)
        else:
            problem = "must be a list of names or key=value items, e.g. [rewardbench, autoj]"
    elif kind == "bool":
        if isinstance(text, bool):
            return "1" if text else "0"
        if isinstance(text, str) and text.lower() in _BOOLS:
            return _BOOLS[text.lower()]
        problem = "must be true or false"
    elif kind == "int":
        if isinstance(text, int) and not isinstance(text, bool):
            return str(text)
        if isinstance(text, str) and _INT.fullmatch(text):
            return text
        problem = "must be a whole number"
    elif kind == "float":
        if isinstance(text, (int, float)) and not isinstance(text, bool) and math.isfinite(text):
            return str(text)
        if isinstance(text, str):
            try:
                if math.isfinite(float(text)):
                    return text  # as written: it names the online run's folder, as the environment's value does
            except ValueError:
                pass
        problem = "must be a finite number"
    elif isinstance(text, (str, int, float)) and not isinstance(text, bool):
        return str(text)
    else:
        problem = "must be text"
    raise ThinkJError(f"{where}={value!r}: {problem}")


def _unknown(key: object, where: str) -> ThinkJError:
    hint = _close(str(key).lower(), BY_KEY) or "the keys are the settings of `python -m thinkj.pipeline --print-env` " \
                                                "in lower case"
    return ThinkJError(f"{where}{key}: not a setting of the run ({hint})")


def read_recipe(path: str | os.PathLike) -> dict[str, tuple[str, str]]:
    """A recipe file as name -> (value text, origin); an unknown key or a value of the wrong kind is refused in one
    line naming the file and the key."""
    from thinkj.yaml_strict import read_yaml

    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ThinkJError(f"{path}: a recipe is a mapping of settings (model_profile: ..., w_str: ...), got "
                          f"{type(data).__name__}")
    out: dict[str, tuple[str, str]] = {}
    for key, value in data.items():
        setting = BY_KEY.get(key) if isinstance(key, str) else None
        if setting is None:
            raise _unknown(key, f"{path}: ")
        out[setting.name] = (typed_text(setting, value, f"{path}: {key}"), f"{path}: {key}")
    return out


def parse_set(items: Iterable[str]) -> dict[str, tuple[str, str]]:
    """``--set key=value`` items as name -> (value text, origin), typed by the setting each sets, through the one
    ``key=value`` parser (:func:`thinkj.overrides.parse_key_values`): a malformed item, an unknown key or a key
    given twice is one line naming ``--set``."""
    from thinkj.overrides import parse_key_values

    def typed(key: str, value: str, origin: str) -> tuple[str, str]:
        setting = BY_KEY.get(key)
        if setting is None:
            raise _unknown(key, "--set ")
        return typed_text(setting, value, origin), origin

    parsed = parse_key_values(items, "--set", typed, example="e.g. --set w_str=0.5")
    return {BY_KEY[key].name: value for key, value in parsed.items()}


def resolve(recipe: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
            sets: Iterable[str] = ()) -> RunSettings:
    """Every setting: default < recipe < environment variable set and not empty < ``--set``. A misspelt
    environment variable (:func:`check_names`), recipe key or ``--set`` key is an error."""
    env = os.environ if env is None else env
    check_names(env)
    values = {s.name: s.default for s in SETTINGS}
    origin = dict.fromkeys(values, DEFAULT_ORIGIN)
    layers: list[dict[str, tuple[str, str]]] = []
    if recipe is not None:
        layers.append(read_recipe(recipe))
    # surrounding spaces are no part of a value: W_STR=' 0.5' would otherwise name the run's folder and tags with one
    layers.append({n: (env[n].strip(), ENV_ORIGIN) for n in values if (env.get(n) or "").strip()})
    layers.append(parse_set(sets))
    for layer in layers:
        for name, (value, where) in layer.items():
            values[name], origin[name] = value, where
    seeded = f"_seed{values['SEED']}" if values["SEED"] else ""

    def given(name: str, outside_recipe: bool = False) -> bool:
        where = origin[name]
        return where == ENV_ORIGIN or where.startswith("--set") if outside_recipe else where != DEFAULT_ORIGIN

    if not values["RUN_DIR"]:  # a model built in the run folder names it until a profile is given
        name = values["BUILD_MODEL"] if values["BUILD_MODEL"] and not given("MODEL_PROFILE") else values["MODEL_PROFILE"]
        values["RUN_DIR"] = f"runs/{name}{seeded}"
    elif not given("RUN_DIR", outside_recipe=True):  # a recipe's run folder is per seed, as the default is
        values["RUN_DIR"] += seeded
    from thinkj.pipeline.prep import derive_defaults

    derive_defaults(values, given)
    return RunSettings(values, origin)


def env_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every setting from the environment alone (empty or unset -> the default; a misspelt one is an error): what
    ``python -m thinkj.pipeline`` runs. ``thinkj run RECIPE`` adds a recipe and ``--set`` (:func:`resolve`)."""
    return resolve(env=env).values
