"""TRL GRPO with a seed reward preset (group-level or per-sample), driven by a ``configs/rewards/*.yaml``.

    # tiny model on CPU, 2 steps, the XML judge on corrupted-text pairs built from a text file (one doc a line)
    python -m thinkj.online.trl_presets --config configs/rewards/xml_judge.yaml --model runs/tiny/model \\
        --texts corpus.txt --out runs/cpu/xml_judge_trl --steps 2 --set num_generations=2 max_completion_length=16
    # a served Think-J judge as the reward (docs/judge_as_reward.md)
    python -m thinkj.online.trl_presets --config configs/rewards/thinkj_pairwise.yaml --model POLICY --rows rows.jsonl \
        --out runs/cpu/judge_rewarded --steps 8 --reward-set base_url=http://127.0.0.1:PORT/v1 scheme=round_robin
    # HelpSteer2 attribute judge (rows with prompt, response and the five attributes) on one GPU
    python -m thinkj.online.trl_presets --config configs/rewards/multi_objective.yaml --model runs/qwen7b/judge_sft \\
        --helpsteer2 data/helpsteer2/train.jsonl --out runs/qwen7b/hs2_grpo --steps 500

The config's ``trl`` block goes into ``GRPOConfig`` (``--set key=value`` overrides it); its ``reward`` block
picks the group preset (``group_preset`` + ``weights`` [+ ``scope``]) or per-sample preset (``preset``).
Thinkj's own Think-J runs use ``thinkj.online.trl_grpo``; this helper exists because those are tied to the
pairwise label/strength columns, while the seed presets need a ``ground_truth`` column and group rewards
(the reward callables are ``thinkj.rewards.adapters.trl.TRLPresetReward`` and
``thinkj.rewards.adapters.trl_group.TRLGroupReward``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.records import write_json
from thinkj.rewards.adapters.trl import TRLPresetReward
from thinkj.rewards.adapters.trl_group import TRLGroupReward


def load_config(path: str | Path) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as f:
        cfg = yaml.safe_load(f) or {}
    if "reward" not in cfg or not ({"group_preset", "preset"} & set(cfg["reward"])):
        raise ThinkJError(f"{path}: needs reward.group_preset or reward.preset")
    return cfg


def reward_function(cfg: dict[str, Any], num_generations: int | None = None) -> Any:
    reward = cfg["reward"]
    weights = dict(reward.get("weights") or {})
    if reward.get("group_preset"):
        return TRLGroupReward(reward["group_preset"], scope=reward.get("scope", "group"),
                              expected_group_size=num_generations, **weights)
    return TRLPresetReward(reward["preset"], **weights)


def rows_for_trl(verl_style_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """verl-style rows (prompt, reward_model.ground_truth) -> TRL rows (prompt, ground_truth)."""
    return [{"prompt": r["prompt"], "ground_truth": r["reward_model"]["ground_truth"]} for r in verl_style_rows]


def run_grpo(cfg: dict[str, Any], model: str, rows: list[dict[str, Any]], out_dir: str | Path, steps: int,
             overrides: dict[str, Any] | None = None, device: str = "auto") -> dict[str, Any]:
    """Train ``steps`` GRPO steps; save the policy to ``out_dir/model``; return a summary with the reward log."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.online.trl_compat import fix_trl_availability_flags

    fix_trl_availability_flags()
    from trl import GRPOConfig, GRPOTrainer

    cpu = device == "cpu" or not torch.cuda.is_available()
    trl_cfg = {**(cfg.get("trl") or {}), **(overrides or {})}
    n = int(trl_cfg.pop("num_generations", 4))
    batch = int(trl_cfg.pop("per_device_train_batch_size", n))
    out = Path(out_dir)
    args = GRPOConfig(output_dir=str(out / "checkpoints"), max_steps=steps, num_generations=n,
                      per_device_train_batch_size=batch, use_cpu=cpu, bf16=not cpu, fp16=False, use_vllm=False,
                      logging_steps=1, report_to="none", save_strategy="no", dataloader_num_workers=0,
                      disable_tqdm=True, **trl_cfg)
    reward = reward_function(cfg, n)
    tokenizer = AutoTokenizer.from_pretrained(model)
    policy = AutoModelForCausalLM.from_pretrained(model, dtype="float32" if cpu else "bfloat16")
    if not hasattr(policy, "warnings_issued"):
        policy.warnings_issued = {}  # TRL 0.24 writes to this dict; transformers 5 models no longer have it
    trainer = GRPOTrainer(model=policy, reward_funcs=[reward], args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer)
    if hasattr(reward, "bind_trainer"):
        reward.bind_trainer(trainer)  # the group reward's metrics (judge failure rate, flips, latency) in the logs
    trainer.train()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    history = [h for h in trainer.state.log_history if "reward" in h]
    summary = {"steps": trainer.state.global_step, "device": "cpu" if cpu else "gpu", "reward_fn": reward.__name__,
               "rewards": [h["reward"] for h in history], "grad_norms": [h.get("grad_norm") for h in history],
               "learning_rates": [h.get("learning_rate") for h in history],
               "last_metrics": getattr(reward, "last_metrics", {}),
               "reward_metrics": [{k: v for k, v in h.items() if k.startswith(f"{reward.__name__}/")} for h in history]}
    write_json(out / "summary.json", summary)
    return summary


def _parse_value(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=2)
    data = parser.add_mutually_exclusive_group(required=True)
    data.add_argument("--texts", help="plain-text corpus, one document per line (XML judge task)")
    data.add_argument("--helpsteer2", help="JSONL with prompt, response and the five HelpSteer2 attributes")
    data.add_argument("--rows", help="JSONL of TRL rows {prompt: messages, ground_truth}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    parser.add_argument("--set", nargs="*", default=[], help="GRPOConfig overrides key=value")
    parser.add_argument("--reward-set", nargs="*", default=[],
                        help="reward weight overrides key=value (e.g. base_url=http://JUDGE:8000/v1 scheme=knockout)")
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    from thinkj.overrides import parse_key_values

    def yaml_typed(key: str, value: str, origin: str) -> Any:
        return _parse_value(value)

    reward_set = parse_key_values(args.reward_set, "--reward-set", yaml_typed)
    config_set = parse_key_values(args.set, "--set", yaml_typed)  # checked now, before any data is read
    if reward_set:
        cfg["reward"].setdefault("weights", {}).update(reward_set)
    if args.texts:
        from thinkj.data.xml_judge_task import build_xml_judge_pairs
        from thinkj.export.verl import verl_rows

        texts = Path(args.texts).read_text(encoding="utf-8").splitlines()
        pairs, _ = build_xml_judge_pairs(texts, seed=args.seed)
        rows = rows_for_trl(verl_rows(pairs, cfg.get("template", "xml_judge_v1"))[0])
    elif args.helpsteer2:
        from thinkj.records import read_jsonl
        from thinkj.rewards.designs.multi_objective import build_attribute_rows

        rows = rows_for_trl(build_attribute_rows((r for _, r in read_jsonl(args.helpsteer2)), path=args.helpsteer2))
    else:
        from thinkj.records import read_jsonl

        rows = [r for _, r in read_jsonl(args.rows)]
    from thinkj.models.catalog import resolve_model

    summary = run_grpo(cfg, resolve_model(args.model), rows, args.out, args.steps,
                       config_set, args.device)
    print(json.dumps(summary, indent=1, default=str))
    return summary


if __name__ == "__main__":
    from thinkj.errors import exit_on_user_error

    exit_on_user_error(main)
