"""Both orders in one step through TRL's own GRPOTrainer on the tiny model (CPU, 2 steps): the twin sampler puts a
comparison's two orders in one generation batch, TRL groups both orders' rollouts as one group (``--twins union``),
the consistency term is paid as defined, and the position diagnostics are in every step's log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinkj.records import read_jsonl, write_jsonl
from thinkj.rewards.adapters.verl import compute_score
from thinkj.rewards.designs.twins import consistency_terms
from thinkj.synthetic.fruit_task import make_pairs


@pytest.mark.slow
def test_trl_union_twins_two_steps(judge, tmp_path):
    from typer.testing import CliRunner

    from thinkj.offline.cli import train_app as app

    write_jsonl(tmp_path / "pairs.jsonl", [p for p in make_pairs(12, seed=2) if p.label != "tie"][:6])
    result = CliRunner().invoke(app, ["rl", "--engine", "trl", "--model", str(judge),
                                      "--data", str(tmp_path / "pairs.jsonl"), "--out", str(tmp_path / "out"),
                                      "--twins", "union", "--weight", "w_con=1.0", "--steps", "2", "--lr", "1e-4",
                                      "--num-generations", "2", "--prompts-per-step", "1",
                                      "--max-completion-length", "64", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "thinkj_online_done.json").read_text())
    assert summary["twins"] == "union" and summary["rows"] == 12 and summary["steps"] == 2
    state = json.loads(Path(summary["log"]).read_text())
    steps = [h for h in state["log_history"] if "reward" in h]
    assert [h["step"] for h in steps] == [1, 2]
    for h in steps:  # the diagnostics and the consistency term, logged every step
        for key in ("pos/a_share", "pos/gold_a_share", "pos/acc_gold_a", "pos/acc_gold_b", "consistency",
                    "twin_missing"):
            assert key in h, key
        assert h["pos/gold_a_share"] == 0.5 and h["twin_missing"] == 0.0
    # the flip rate needs a parsed verdict in both orders of a comparison (CPU runs are deterministic)
    assert any(0.0 <= h.get("pos/flip_rate", -1) <= 1.0 for h in steps)
    # TRL grouped 2 x 2 consecutive rollouts: the union of one comparison's two orders
    args = json.loads((tmp_path / "out" / "run_settings.json").read_text())["run"]
    assert args["twins"] == "union" and args["num_generations"] == 2
    samples = [row for _, row in read_jsonl(summary["samples"])]
    assert [s["order"] for s in samples] == [0, 0, 1, 1] and len({s["twin"] for s in samples}) == 1
    assert samples[0]["label"] != samples[2]["label"]
    # each score is the Think-J reward plus w_con x the consistency term, recomputed here from the verdicts
    terms = consistency_terms([s["pred"] for s in samples], [s["label"] for s in samples],
                              [s["twin"] for s in samples], [s["order"] for s in samples])
    for sample, term in zip(samples, terms):
        base = compute_score(solution_str=sample["completion"],
                             ground_truth={"label": sample["label"], "strength": sample["strength"]},
                             preset="thinkj_qwen")["score"]
        assert sample["consistency"] == term["consistency"]
        assert sample["score"] == pytest.approx(base + term["consistency"])


@pytest.mark.slow
def test_trl_group_is_both_orders_in_union_mode_and_one_order_in_step_mode(tiny_model_dir, tmp_path):
    """TRL's own trainer built with each mode: its group size and its train sampler's first generation batch."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.online.trl_grpo import GRPORun, _grpo_config, build_trainer, load_rl_rows

    write_jsonl(tmp_path / "pairs.jsonl", [p for p in make_pairs(12, seed=3) if p.label != "tie"][:4])
    rows, _ = load_rl_rows(tmp_path / "pairs.jsonl", twins=True)
    for mode, group in (("union", 6), ("step", 3)):
        run = GRPORun(model=str(tiny_model_dir), data=str(tmp_path / "pairs.jsonl"), out_dir=str(tmp_path / mode),
                      twins=mode, num_generations=3, prompts_per_step=2)
        config = _grpo_config(run, tmp_path / mode / "ckpt", cpu=True)
        assert config.num_generations == group and config.per_device_train_batch_size == 12
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        trainer, _ = build_trainer(run, config, model, AutoTokenizer.from_pretrained(tiny_model_dir),
                                   Dataset.from_list(rows), cpu=True)  # the trainer run_trl_grpo trains with
        first = list(trainer._get_train_sampler())[:12]
        twins_in_batch = [rows[i]["twin"] for i in first]
        assert [rows[i]["order"] for i in first] == [0, 0, 0, 1, 1, 1] * 2
        # TRL's groups (consecutive num_generations rollouts) hold one comparison: both orders, or one order
        for start in range(0, 12, group):
            assert len(set(twins_in_batch[start:start + group])) == 1
            assert len({rows[i]["order"] for i in first[start:start + group]}) == (2 if mode == "union" else 1)
