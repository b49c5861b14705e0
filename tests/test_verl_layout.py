"""The verl launcher refuses batch and parallel sizes that do not fit the run's nodes x GPUs before it starts
(thinkj/online/verl_layout.py): verl 0.9.1 asserts them only in its workers, minutes into a job. The config is
composed with Hydra over verl's own ppo_trainer, as main_ppo composes it."""

from __future__ import annotations

import pytest

from thinkj.online import verl_layout
from thinkj.online.verl_launch import LaunchError, VerlLaunch, build_command, check_layout, main


def _problems(tmp_path, algo="grpo", nnodes=2, gpus=8, device="gpu", overrides=()):
    spec = VerlLaunch(algo=algo, model=str(tmp_path / "model"), train_files=str(tmp_path / "t.parquet"),
                      out_dir=str(tmp_path / "out"), nnodes=nnodes, gpus_per_node=gpus, device=device,
                      overrides=list(overrides))
    argv, _ = build_command(spec)
    at = argv.index("--config-name")
    cfg = verl_layout.compose(argv[argv.index("--config-path") + 1], argv[at + 1], argv[at + 2:])
    return verl_layout.layout_problems(cfg, nnodes, gpus, critic=verl_layout.uses_critic(cfg)), spec, argv


@pytest.mark.parametrize("algo", ["grpo", "grpo_consistent", "ppo", "reinforce_pp"])
def test_table11_fits_two_nodes_of_eight_and_the_cpu_defaults_fit_their_workers(tmp_path, algo):
    assert _problems(tmp_path, algo)[0] == []
    assert _problems(tmp_path, algo, nnodes=1, gpus=1, device="cpu")[0] == []
    assert _problems(tmp_path, algo, nnodes=1, gpus=2, device="cpu")[0] == []


def test_one_gpu_with_table11_sizes_names_both_mends_and_they_fit(tmp_path):
    small = ["data.train_batch_size=8", "actor_rollout_ref.rollout.n=4"]
    problems, spec, argv = _problems(tmp_path, nnodes=1, gpus=1, overrides=small)
    assert len(problems) == 2
    assert "tensor_model_parallel_size 2 x data_parallel_size 1 x pipeline_model_parallel_size 1 = 2 GPUs" in problems[0]
    assert "ppo_mini_batch_size=8" in problems[1] and "data.train_batch_size 8" in problems[1]
    with pytest.raises(LaunchError, match="do not fit its world"):
        check_layout(spec, argv)
    mended = [*small, "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
              "actor_rollout_ref.actor.ppo_mini_batch_size=8"]
    assert _problems(tmp_path, nnodes=1, gpus=1, overrides=mended)[0] == []


def test_the_critics_mini_batch_and_the_data_parallel_split(tmp_path):
    # PPO's critic takes the actor's mini-batch unless given its own (verl's critic.yaml interpolation)
    problems = _problems(tmp_path, "ppo", overrides=["critic.ppo_mini_batch_size=300"])[0]
    assert len(problems) == 1 and problems[0].startswith("data.train_batch_size 1024 is not a whole number of "
                                                          "critic.ppo_mini_batch_size 300")
    assert _problems(tmp_path, "grpo", overrides=["critic.ppo_mini_batch_size=300"])[0] == []  # no critic in GRPO
    # 2 prompts x 1 rollout per mini-batch cannot be split over 16 data-parallel ranks
    problems = _problems(tmp_path, overrides=["actor_rollout_ref.actor.ppo_mini_batch_size=2",
                                              "actor_rollout_ref.rollout.n=1"])[0]
    assert len(problems) == 1 and "over the run's 16 data-parallel ranks" in problems[0]


def test_an_engine_wider_than_a_node_must_fill_whole_nodes(tmp_path):
    assert _problems(tmp_path, overrides=["actor_rollout_ref.rollout.tensor_model_parallel_size=16"])[0] == []
    problems = _problems(tmp_path, nnodes=3, overrides=["actor_rollout_ref.rollout.tensor_model_parallel_size=12",
                                                        "data.train_batch_size=768",
                                                        "actor_rollout_ref.actor.ppo_mini_batch_size=96"])[0]
    assert len(problems) == 1 and "wider than a node of 8" in problems[0]


def test_the_cli_refuses_before_anything_starts(tmp_path, capsys):
    from thinkj.export.verl import write_verl_parquet
    from thinkj.synthetic.fruit_task import make_pairs

    write_verl_parquet(tmp_path / "t.parquet", [p for p in make_pairs(8, seed=0) if p.label != "tie"])
    base = ["--algo", "grpo", "--model", "m", "--data", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "o"),
            "--nnodes", "1", "--gpus-per-node", "1", "--dry-run", "--", "data.train_batch_size=8"]
    assert main(base) != 0
    err = capsys.readouterr().err
    assert "do not fit its world" in err and "tensor_model_parallel_size to a divisor of 1" in err
    assert not (tmp_path / "o").exists()
    # an override naming no key of verl's config is refused the same way, in one message
    assert main([*base[:-1], "data.train_batch_sise=8"]) != 0
    assert "does not compose" in capsys.readouterr().err


def test_the_file_search_path_composes_what_verls_package_path_composes():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from thinkj.online.verl_launch import ALGOS, CONFIG_DIR

    assert verl_layout.verl_config_dir()
    for name in sorted(set(ALGOS.values())):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            upstream = compose(config_name=name, overrides=["data.train_batch_size=8"])  # pkg://verl.trainer.config
        ours = verl_layout.compose(str(CONFIG_DIR), name, ["data.train_batch_size=8"])
        assert OmegaConf.to_container(ours) == OmegaConf.to_container(upstream), name


def test_the_pipeline_refuses_a_misfit_before_stage_one_on_gpus_only():
    from thinkj.errors import ThinkJError
    from thinkj.paths import PROJECT_ROOT
    from thinkj.pipeline.plan import validate
    from thinkj.pipeline.settings import resolve

    recipe = PROJECT_ROOT / "configs" / "recipes" / "qwen2.5-7b.yaml"
    validate(resolve(recipe, env={}, sets=["dry_run=1"]).values)  # Table 11 on 2 x 8 GPUs
    one_gpu = ["dry_run=1", "nnodes=1", "gpus_per_node=1"]
    with pytest.raises(ThinkJError, match=r"NNODES=1 GPUS_PER_NODE=1 VERL_OVERRIDES='': the run's sizes do not fit"):
        validate(resolve(recipe, env={}, sets=one_gpu).values)
    mended = ("verl_overrides=actor_rollout_ref.rollout.tensor_model_parallel_size=1 "
              "actor_rollout_ref.actor.ppo_mini_batch_size=8 data.train_batch_size=8")
    validate(resolve(recipe, env={}, sets=[*one_gpu, mended]).values)
    validate(resolve(recipe, env={}, sets=[*one_gpu, "device=cpu"]).values)  # the CPU stage checks it itself
