"""What one GPU can check without vLLM, verl or LlamaFactory: ``bash scripts/gpu_smoke.sh`` runs this.

    python -m thinkj.gpu_smoke --out runs/gpu_smoke            # CUDA (refuses when torch sees none)
    python -m thinkj.gpu_smoke --out runs/gpu_smoke --device cpu

On a model made on the spot (:func:`thinkj.models.tiny.build_tiny_model`, what ``thinkj tiny-model`` writes):

1. ``sft``: a short full fine-tune on Think-J answers on the device (:func:`thinkj.models.tiny.finetune_tiny_judge`,
   the project's LlamaFactory-free SFT; LlamaFactory itself is not on a bare GPU machine). Passes when the loss fell.
2. ``hf-judge-bf16``: the hf inference backend loads the fine-tuned judge in bfloat16 on the device and judges
   synthetic pairs in both orders (:func:`thinkj.inference.both_orders.judge_both_orders`). Passes when the weights
   are bf16 on the
   device and most answers parse to a verdict.
3. ``trl-grpo``: 2 steps of TRL's GRPOTrainer with the Think-J reward (:func:`thinkj.online.trl_grpo.run_trl_grpo`,
   bf16 on a GPU). Passes when both steps logged a finite reward and the policy was saved.
4. ``sampling``: sampled tokens come from the whole distribution, not transformers 5's default top-50 cut, in the
   hf backend's sampled judging and in the generation config TRL's GRPOTrainer hands to ``generate``. On a model
   whose next-token distribution is near-flat (final norm x 1e-3), 200 one-token draws on the device must show more
   than 100 distinct tokens (a top-50 cut allows 50). Fails if the machine's transformers treats ``top_k=0``
   differently from 5.5.

One line per check, ``PASS`` or ``FAIL``, the check's name and its figures; the exit status is the number of checks
that failed. Only APIs present in transformers 5.5 (this project's CPU stack) and 5.17 (the GPU image) are used.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

PAIRS = 16  # judged in both orders
SFT_STEPS = 120  # finetune_tiny_judge's default: about 70 % well-formed answers on the CPU


def _device(name: str) -> str:
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda, but torch sees no CUDA device (torch "
                         f"{torch.__version__}, CUDA {torch.version.cuda}); use --device cpu to rehearse")
    return name


def check_sft(base: Path, out: Path, device: str) -> tuple[bool, str]:
    from thinkj.models.tiny import finetune_tiny_judge

    start = time.monotonic()
    finetune_tiny_judge(base, out, steps=SFT_STEPS, device=device)
    info = json.loads((out / "thinkj_finetune.json").read_text())
    wall = time.monotonic() - start
    ok = info["last_loss"] < 0.5 * info["first_loss"]
    return ok, (f"{SFT_STEPS} steps in {wall:.1f} s, loss {info['first_loss']:.3f} -> {info['last_loss']:.3f}")


def check_hf_judge(judge: Path, device: str) -> tuple[bool, str]:
    import torch

    from thinkj.inference.base import SamplingParams
    from thinkj.inference.both_orders import accuracy_summary, judge_both_orders
    from thinkj.inference.hf import HFBackend
    from thinkj.synthetic.fruit_task import make_pairs

    backend = HFBackend(judge, device=device, dtype="bfloat16", batch_size=16)
    weights = next(backend.model.parameters())
    pairs = [p for p in make_pairs(3 * PAIRS, seed=101) if p.decided][:PAIRS]
    start = time.monotonic()
    records = judge_both_orders(backend, pairs, "judge_strength_v1", SamplingParams(max_new_tokens=96))
    wall = time.monotonic() - start
    summary = accuracy_summary(records)
    on_device = weights.device.type == torch.device(device).type
    ok = weights.dtype == torch.bfloat16 and on_device and summary["parsed"] >= 0.5
    return ok, (f"{len(records)} judgments in {wall:.1f} s ({len(records) / wall:.1f}/s), weights {weights.dtype} on "
                f"{weights.device}, parsed {summary['parsed']:.0%}, accuracy {summary['accuracy']:.0%}")


def check_grpo(judge: Path, work: Path, device: str) -> tuple[bool, str]:
    from thinkj.online.trl_grpo import GRPORun, run_trl_grpo
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    data = work / "grpo_pairs.jsonl"
    write_jsonl(data, [p for p in make_pairs(24, seed=202) if p.decided][:8])
    start = time.monotonic()
    summary = run_trl_grpo(GRPORun(model=str(judge), data=str(data), out_dir=str(work / "grpo"), steps=2,
                                   num_generations=4, prompts_per_step=2, max_completion_length=64,
                                   template="judge_strength_v1", device="gpu" if device == "cuda" else "cpu"),
                           force=True)
    wall = time.monotonic() - start
    log = json.loads(Path(summary["log"]).read_text()).get("log_history", [])  # TRL's trainer_state.json
    rewards = [row["reward"] for row in log if "reward" in row]
    ok = (summary["steps"] == 2 and len(rewards) == 2 and all(math.isfinite(r) for r in rewards)
          and Path(summary["model_dir"]).is_dir())
    shown = ", ".join(f"{r:.2f}" for r in rewards)
    return ok, f"{summary['steps']} steps in {wall:.1f} s on {summary['device']}, mean reward per step [{shown}]"


FLAT_DRAWS = 200  # one-token samples from the near-flat model; a top-50 cut shows at most 50 distinct


def check_sampling(base: Path, work: Path, device: str) -> tuple[bool, str]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.inference.base import SamplingParams
    from thinkj.inference.hf import HFBackend
    from thinkj.online.trl_grpo import GRPORun, _grpo_config, build_trainer, load_rl_rows
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    flat = work / "flat"
    model = AutoModelForCausalLM.from_pretrained(base)
    model.model.norm.weight.data.mul_(1e-3)  # every next token about equally likely, no two logits tied (fp32)
    model.save_pretrained(flat)
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.save_pretrained(flat)
    conv = [{"role": "user", "content": "Name a fruit."}]

    backend = HFBackend(flat, device=device, dtype="float32", batch_size=FLAT_DRAWS)
    hf_draws = backend.generate([conv], SamplingParams(temperature=1.0, n=FLAT_DRAWS, max_new_tokens=1))[0]
    del backend

    data = work / "flat_pairs.jsonl"
    write_jsonl(data, [p for p in make_pairs(12, seed=3) if p.decided][:4])
    rows, _ = load_rl_rows(data)
    run = GRPORun(model=str(flat), data=str(data), out_dir=str(work / "flat_grpo"))
    config = _grpo_config(run, work / "flat_grpo_ckpt", cpu=device == "cpu")
    model = AutoModelForCausalLM.from_pretrained(flat).to(device)
    trainer, _ = build_trainer(run, config, model, tokenizer, Dataset.from_list(rows), cpu=device == "cpu")
    gen = copy.deepcopy(trainer.generation_config)  # what TRL hands to generate; only the length and count change
    gen.max_new_tokens, gen.num_return_sequences = 1, FLAT_DRAWS
    ids = tokenizer.apply_chat_template(conv, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(ids["input_ids"].to(device), attention_mask=ids["attention_mask"].to(device),
                             generation_config=gen)
    trl_draws = out[:, -1].tolist()
    hf_distinct, trl_distinct = len(set(hf_draws)), len(set(trl_draws))
    ok = hf_distinct > FLAT_DRAWS // 2 and trl_distinct > FLAT_DRAWS // 2
    return ok, (f"distinct tokens in {FLAT_DRAWS} draws: hf backend {hf_distinct}, TRL's generation config "
                f"{trl_distinct} (top_k {trainer.generation_config.top_k!r}; a top-50 cut allows 50)")


def run_checks(out: Path, device: str) -> list[tuple[str, bool, str]]:
    from thinkj.models.tiny import build_tiny_model

    out.mkdir(parents=True, exist_ok=True)
    base = build_tiny_model(out / "tiny", seed=0)
    judge = out / "judge"
    checks: list[tuple[str, Callable[[], tuple[bool, str]]]] = [
        ("sft", lambda: check_sft(base, judge, device)),
        ("hf-judge-bf16", lambda: check_hf_judge(judge, device)),
        ("trl-grpo", lambda: check_grpo(judge, out, device)),
        ("sampling", lambda: check_sampling(base, out, device)),
    ]
    results = []
    for name, check in checks:
        try:
            ok, figures = check()
        except Exception as err:  # one line for the failure; the traceback goes to stderr
            traceback.print_exc(file=sys.stderr)
            ok, figures = False, f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
        print(f"{'PASS' if ok else 'FAIL'} {name}: {figures}", flush=True)
        results.append((name, ok, figures))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/gpu_smoke"))
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    import torch
    import transformers

    device = _device(args.device)
    where = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    print(f"INFO torch {torch.__version__} (CUDA {torch.version.cuda}), transformers {transformers.__version__}, "
          f"python {sys.version.split()[0]}, device {where}", flush=True)
    results = run_checks(args.out, device)
    return sum(not ok for _, ok, _ in results)


if __name__ == "__main__":
    sys.exit(main())
