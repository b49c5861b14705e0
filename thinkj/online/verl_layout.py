"""Batch and parallel sizes a verl run must fit to its world, checked before it launches.

verl 0.9.1 asserts these only inside its workers, after Ray, the models and the first rollout are up (minutes into a
job, and on a GPU cluster minutes of every GPU), and its own ``validate_config`` does not look at them. The run's
config is composed here the way ``main_ppo`` composes it (Hydra, ``configs/verl`` over verl's ``ppo_trainer``, the
launcher's overrides last), so every default, interpolation and override counts. The rules, from verl 0.9.1:

* a vLLM engine spans ``tensor_model_parallel_size x data_parallel_size x pipeline_model_parallel_size`` GPUs, and
  the run's ``nnodes x n_gpus_per_node`` must be a whole number of engines (``workers/engine_workers.py``, "rollout
  world_size ... is not divisible by infer_world_size"); an engine wider than a node must fill whole nodes
  (``workers/rollout/replica.py``);
* each step's ``data.train_batch_size`` prompts are updated in mini-batches of ``ppo_mini_batch_size`` prompts, which
  must divide it (``utils/tensordict_utils.py``, ``make_iterator``), and each mini-batch's rollouts
  (``ppo_mini_batch_size x rollout.n``) must split evenly over the data-parallel ranks (world / Ulysses sequence
  parallel size; ``workers/engine_workers.py``, "Got mini_batch_size=..."): the actor's, and the critic's where the
  algorithm has one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROLLOUT = "actor_rollout_ref.rollout"


def verl_config_dir() -> str | None:
    """verl's own config folder, found without importing verl (its ``__init__`` loads torch, Ray, transformers)."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(spec.submodule_search_locations[0]) / "trainer" / "config"
    return str(folder) if (folder / "ppo_trainer.yaml").is_file() else None


def compose(config_dir: str, config_name: str, overrides: list[str]) -> Any:
    """The run's config as verl's ``main_ppo`` will see it (Hydra's compose API, no working-directory change).

    Our files find verl's through ``pkg://verl.trainer.config``, which imports verl (about 5 s); the same folder as a
    ``file://`` search path composes the same config in about 1 s (tests/test_verl_layout.py compares the two)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    verl_dir = verl_config_dir()
    search = [f"hydra.searchpath=[file://{verl_dir}]"] if verl_dir else []
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name=config_name, overrides=[*search, *overrides])


def _int(cfg: Any, key: str, default: int | None = None) -> int | None:
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key, default=default)
    return None if value is None else int(value)


def uses_critic(cfg: Any) -> bool:
    """verl's rule (``trainer/ppo/utils.py`` ``need_critic``) without importing verl's trainer: GAE, or asked for."""
    from omegaconf import OmegaConf

    enable = OmegaConf.select(cfg, "critic.enable", default=None)
    return bool(enable) if enable is not None else OmegaConf.select(cfg, "algorithm.adv_estimator") == "gae"


def layout_problems(cfg: Any, nnodes: int, gpus_per_node: int, *, critic: bool) -> list[str]:
    """What verl would assert on, each with the override that mends it (an empty list: the sizes fit)."""
    world = nnodes * gpus_per_node
    shape = f"{nnodes} node(s) x {gpus_per_node} GPU(s) = {world}"
    problems = []
    tp, dp, pp = (_int(cfg, f"{ROLLOUT}.{k}_parallel_size", 1) for k in ("tensor_model", "data", "pipeline_model"))
    engine = tp * dp * pp
    if world % engine:
        problems.append(f"a vLLM engine spans {ROLLOUT}.tensor_model_parallel_size {tp} x data_parallel_size {dp} x "
                        f"pipeline_model_parallel_size {pp} = {engine} GPUs, which does not divide the run's {shape}: "
                        f"set {ROLLOUT}.tensor_model_parallel_size to a divisor of {world // (dp * pp) or 1}")
    elif engine > gpus_per_node and engine % gpus_per_node:
        problems.append(f"a vLLM engine of {engine} GPUs is wider than a node of {gpus_per_node} and must fill whole "
                        f"nodes: set {ROLLOUT}.tensor_model_parallel_size so the engine is a multiple of {gpus_per_node}")
    batch = _int(cfg, "data.train_batch_size")
    n = _int(cfg, f"{ROLLOUT}.n", 1)
    for role in ("actor_rollout_ref.actor", *(["critic"] if critic else [])):
        mini = _int(cfg, f"{role}.ppo_mini_batch_size")
        if batch is None or mini is None:
            continue
        if mini < 1 or batch % mini:
            divisor = max(d for d in range(1, batch + 1) if batch % d == 0 and d <= max(mini, 1))
            problems.append(f"data.train_batch_size {batch} is not a whole number of {role}.ppo_mini_batch_size "
                            f"{mini} (verl updates each step's prompts in mini-batches of that many): set "
                            f"{role}.ppo_mini_batch_size={divisor} or another divisor of {batch}")
            continue
        sp = _int(cfg, f"{role}.ulysses_sequence_parallel_size", 1) or 1
        ranks = max(world // sp, 1)
        if (mini * n) % ranks:
            problems.append(f"a mini-batch of {role}.ppo_mini_batch_size {mini} x {ROLLOUT}.n {n} = {mini * n} "
                            f"rollouts does not split over the run's {ranks} data-parallel ranks ({shape} GPUs / "
                            f"Ulysses {sp}): make ppo_mini_batch_size x n a multiple of {ranks}")
    return problems
