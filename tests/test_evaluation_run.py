"""``thinkj eval run`` end to end on the tiny model (HF backend), resume after an interruption, scalar judges.

RewardBench is not available offline, so its slice is a fixture the test writes in RewardBench's schema;
RM-Bench and Auto-J slices are the shortest real items from ../shared/data.
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import shared_data
from typer.testing import CliRunner

from thinkj.evaluation.cli import app
from thinkj.evaluation.registry import load_benchmark
from thinkj.evaluation.run import EvalConfig, run_eval
from thinkj.inference import SamplingParams, make_backend
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

runner = CliRunner()


def write_rewardbench_fixture(path, subsets=("alpacaeval-easy", "llmbar-natural", "donotanswer", "hep-python")):
    """Rows in allenai/reward-bench's schema (prompt, chosen, chosen_model, rejected, rejected_model, subset, id)."""
    rows = []
    for k, (subset, pair) in enumerate(zip(subsets, make_pairs(len(subsets), seed=3))):
        chosen, rejected = (pair.response_a, pair.response_b) if pair.label == "a" else (pair.response_b, pair.response_a)
        rows.append({"prompt": pair.instruction, "chosen": chosen, "chosen_model": "rule", "rejected": rejected,
                     "rejected_model": "rule", "subset": subset, "id": 1000 + k})
    write_jsonl(path, rows)
    return path


def write_shortest(benchmark, source, n, dest):
    """The n shortest items of a real benchmark file, in its own format (a slice the tiny model judges quickly)."""
    pairs = load_benchmark(benchmark, source)
    size = {}
    for p in pairs:
        item = p.meta["record"]["item_id"]
        size[item] = max(size.get(item, 0), len(p.instruction) + len(p.response_a) + len(p.response_b))
    keep = set(sorted(size, key=size.get)[:n])
    if benchmark == "autoj":
        rows = [json.loads(line) for line in open(source, encoding="utf-8")]
        write_jsonl(dest, [r for i, r in enumerate(rows) if str(i) in keep])
        return dest
    domain = next(iter(keep)).split(":")[0]
    rows = json.loads((source / f"{domain}_filtered.json").read_text())
    dest = dest / f"{domain}_filtered.json"
    dest.write_text(json.dumps([r for r in rows if f"{domain}:{r['id']}" in keep]))
    return dest


def run_cli(*args):
    result = runner.invoke(app, ["run", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_eval_run_every_benchmark_with_hf_backend(tmp_path, tiny_model_dir):
    slices = {"rewardbench": write_rewardbench_fixture(tmp_path / "rb.jsonl"),
              "rmbench": write_shortest("rmbench", shared_data("rm-bench"), 1, tmp_path),
              "autoj": write_shortest("autoj", shared_data("auto-j", "testdata_pairwise.jsonl"), 3, tmp_path / "aj.jsonl")}
    expected = {"rewardbench": 4 * 2, "rmbench": 9 * 2, "autoj": 3 * 2}
    for bench, data in slices.items():
        out = tmp_path / "out"
        run_cli(bench, "--model", str(tiny_model_dir), "--data", str(data), "--max-new-tokens", "8", "--out", str(out),
                "--tag", "model=tiny", "--tag", "method=base", "--batch-size", "32")
        records = [json.loads(line) for line in open(out / f"{bench}.judgments.jsonl")]
        assert len(records) == expected[bench]
        assert {r["order"] for r in records} == {"original", "swapped"}
        assert all(r["benchmark"] == bench and r["template"] == "judge_strength_v2" and "output" in r for r in records)
        assert all(r["gold"] in ("a", "b", "tie") and r["verdict"] in ("a", "b", "tie", None) for r in records)
        document = json.loads((out / f"{bench}.results.json").read_text())
        assert document["tags"] == {"model": "tiny", "method": "base"}
        prov = document["provenance"]
        assert prov["backend"] == "hf" and prov["sampling"]["max_new_tokens"] == 8 and "transformers" in prov["versions"]
        from thinkj.inference.identity import model_identity

        assert prov["model_identity"] == model_identity(str(tiny_model_dir)) and "#dir:" in prov["model_identity"]
        assert prov["data"]["sha256"] and prov["time"] and prov["n_items"] == expected[bench] // (18 if bench == "rmbench" else 2)
        rescored = runner.invoke(app, ["score", bench, str(out / f"{bench}.judgments.jsonl")])
        assert rescored.exit_code == 0 and json.loads(rescored.stdout) == document["metrics"]
    rm = json.loads((tmp_path / "out" / "rmbench.judgments.jsonl").read_text().splitlines()[0])
    assert {"domain", "chosen_style", "rejected_style"} <= set(rm)


class Interrupted(Exception):
    pass


class CountingBackend:
    """The real HF backend, counting the conversations it is asked to generate and optionally dying mid-run."""

    def __init__(self, inner, die_on_call=None):
        self.inner, self.name, self.die_on_call = inner, inner.name, die_on_call
        self.calls = self.generated = 0

    def generate(self, conversations, params):
        self.calls += 1
        if self.calls == self.die_on_call:
            raise Interrupted("killed")
        self.generated += len(conversations)
        return self.inner.generate(conversations, params)


def test_interrupted_run_resumes_without_recomputation(tmp_path, tiny_model_dir):
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(6, seed=4))
    hf = make_backend("hf", str(tiny_model_dir), batch_size=16)
    cfg = EvalConfig("synthetic", str(tiny_model_dir), data=str(data), out_dir=tmp_path / "out",
                     params=SamplingParams(max_new_tokens=8), chunk_pairs=2)
    dying = CountingBackend(hf, die_on_call=2)
    with pytest.raises(Interrupted):
        run_eval(cfg, backend=dying)
    assert dying.generated == 4 and not (tmp_path / "out" / "synthetic.judgments.jsonl").exists()
    resumed = CountingBackend(hf)
    run_eval(cfg, backend=resumed)
    assert resumed.generated == 12 - 4  # the first chunk's 2 pairs x 2 orders came from the cache
    first = (tmp_path / "out" / "synthetic.judgments.jsonl").read_text()
    again = CountingBackend(hf)
    run_eval(cfg, backend=again)
    assert again.generated == 0 and (tmp_path / "out" / "synthetic.judgments.jsonl").read_text() == first


def test_scalar_value_head_checkpoint_matches_trl(tmp_path, tiny_model_dir):
    """A LlamaFactory `stage: rm` checkpoint (decoder + value_head.safetensors) scored as trl's value-head model does."""
    import torch
    from safetensors.torch import save_file
    from trl import AutoModelForCausalLMWithValueHead

    from thinkj.evaluation.scalar import ScalarScorer

    ckpt = tmp_path / "bt"
    shutil.copytree(tiny_model_dir, ckpt)
    gen = torch.Generator().manual_seed(0)
    head = {"v_head.summary.weight": torch.randn(1, 128, generator=gen), "v_head.summary.bias": torch.randn(1, generator=gen)}
    save_file(head, str(ckpt / "value_head.safetensors"), metadata={"format": "pt"})
    data = tmp_path / "pairs.jsonl"
    pairs = make_pairs(4, seed=2)
    write_jsonl(data, pairs)
    run_cli("synthetic", "--model", str(ckpt), "--backend", "classifier", "--data", str(data), "--out", str(tmp_path / "o"))
    records = [json.loads(line) for line in open(tmp_path / "o" / "synthetic.judgments.jsonl")]
    assert len(records) == 8 and all("score_chosen" in r and "score_rejected" in r for r in records)
    for r in records:
        better = r["score_chosen"] > r["score_rejected"]
        assert (r["verdict"] == r["gold"]) == better

    scorer = ScalarScorer(ckpt)
    reference = AutoModelForCausalLMWithValueHead.from_pretrained(str(tiny_model_dir))
    reference.v_head.summary.load_state_dict({"weight": head["v_head.summary.weight"], "bias": head["v_head.summary.bias"]})
    reference.eval()
    text = scorer.text(pairs[0].messages, pairs[0].response_a)
    ids = scorer.tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        values = reference(**ids)[2]
    original = [r for r in records if r["item_id"] == pairs[0].id and r["order"] == "original"][0]
    assert original["score_a"] == pytest.approx(float(values[0, -1]), abs=1e-4)


def test_scalar_batches_match_single_texts_for_both_checkpoint_kinds(tmp_path, tiny_model_dir):
    """Padding must not move the score: a batch of unequal texts scores as each text alone."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from thinkj.evaluation.scalar import ScalarScorer

    classifier = tmp_path / "cls"
    config = AutoConfig.from_pretrained(tiny_model_dir, num_labels=1)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(classifier)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(classifier)
    value_head = tmp_path / "vh"
    shutil.copytree(tiny_model_dir, value_head)
    save_file({"v_head.summary.weight": torch.ones(1, 128) / 10, "v_head.summary.bias": torch.zeros(1)},
              str(value_head / "value_head.safetensors"))
    pairs = make_pairs(3, seed=8)
    for path, kind in ((classifier, "sequence_classifier"), (value_head, "value_head")):
        scorer = ScalarScorer(path, batch_size=4)
        assert scorer.kind == kind
        texts = [scorer.text(pairs[0].messages, "x"), scorer.text(pairs[1].messages, pairs[1].response_a * 5),
                 scorer.text(pairs[2].messages, pairs[2].response_b)]
        together = scorer.score(texts)
        alone = [scorer.score([t])[0] for t in texts]
        assert together == pytest.approx(alone, abs=1e-4) and len(set(together)) == 3


@pytest.mark.slow
def test_llamafactory_rm_checkpoint_evaluates_as_classifier(tmp_path, tiny_model_dir):
    """Two steps of LlamaFactory `stage: rm` (thinkj train rm bt_rm) on the tiny model, then `eval run --backend classifier`."""
    from thinkj.export.llamafactory import write_preference_dataset
    from thinkj.train.launch import run_stage

    pairs = make_pairs(8, seed=1)
    better = [(p.response_a, p.response_b) if p.label == "a" else (p.response_b, p.response_a) for p in pairs]
    write_preference_dataset(tmp_path / "lf", "thinkj_bt", [(p.messages, c, r) for p, (c, r) in zip(pairs, better)])
    ckpt = run_stage("rm", "bt_rm", profile="tiny", run_dir=tmp_path / "run", device="cpu",
                     overrides=[f"model_name_or_path={tiny_model_dir}", f"dataset_dir={tmp_path / 'lf'}", "max_steps=2",
                                "cutoff_len=512"])
    assert (ckpt / "value_head.safetensors").exists()  # LlamaFactory's value-head checkpoint format
    data = tmp_path / "test.jsonl"
    write_jsonl(data, make_pairs(4, seed=12))
    run_cli("synthetic", "--model", str(ckpt), "--backend", "classifier", "--data", str(data), "--out", str(tmp_path / "o"))
    document = json.loads((tmp_path / "o" / "synthetic.results.json").read_text())
    assert document["provenance"]["scorer"] == "value_head" and document["metrics"]["n_comparisons"] == 4
    assert document["metrics"]["position_consistency"] == 100.0  # a scalar judge cannot depend on position


def test_classifier_backend_refuses_a_causal_lm_without_a_score_head(tmp_path, tiny_model_dir):
    # Before: AutoModelForSequenceClassification silently added a random head and the run exited 0 with noise.
    import subprocess
    import sys

    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(2, seed=2))
    proc = subprocess.run([sys.executable, "-m", "thinkj.cli", "eval", "run", "synthetic", "--model", str(tiny_model_dir),
                           "--backend", "classifier", "--data", str(data), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "no trained score head" in lines[-1] and "Traceback" not in proc.stderr
    assert not (tmp_path / "o" / "synthetic.results.json").exists()
