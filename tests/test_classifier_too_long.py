"""``thinkj eval run --backend classifier``: a comparison whose text is longer than the classifier's context is
recorded ``too_long`` and counted, as on the generative path -- never truncated, never scored past the model's
positions (a RoPE model would otherwise score it silently)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from thinkj.errors import ThinkJError
from thinkj.evaluation.cli import app
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

CONTEXT = 128  # the classifier's max_position_embeddings


@pytest.fixture(scope="module")
def classifier(tiny_model_dir, tmp_path_factory):
    """A one-label sequence classifier (trained-looking score head) on the tiny model, with a short context."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    path = tmp_path_factory.mktemp("cls") / "classifier"
    config = AutoConfig.from_pretrained(tiny_model_dir, num_labels=1, max_position_embeddings=CONTEXT)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(path)
    return path


def _pairs():
    pairs = make_pairs(4, seed=6)
    long = replace(pairs[2], response_b="banana " * 200)  # far over 128 tokens
    return pairs[:2] + [long] + pairs[3:], long.id


def test_too_long_comparison_is_recorded_and_counted(classifier, tmp_path):
    from thinkj.evaluation.scalar import ScalarScorer

    pairs, long_id = _pairs()
    scorer = ScalarScorer(classifier)
    sizes = {p.id: [len(scorer.tokenizer(scorer.text(p.messages, r), add_special_tokens=False)["input_ids"])
                    for r in (p.response_a, p.response_b)] for p in pairs}
    assert max(sizes[long_id]) > CONTEXT and all(max(n) <= CONTEXT for i, n in sizes.items() if i != long_id)

    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, pairs)
    result = CliRunner().invoke(app, ["run", "synthetic", "--model", str(classifier), "--backend", "classifier",
                                      "--data", str(data), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, (result.output, result.exception)
    records = [json.loads(line) for line in open(tmp_path / "o" / "synthetic.judgments.jsonl")]
    assert len(records) == 8
    for r in records:
        if r["item_id"] == long_id:
            assert r["too_long"] is True and r["verdict"] is None and r["correct"] is False
            assert r["score_a"] is None and r["score_b"] is None and "score_chosen" not in r
        else:
            assert r["too_long"] is False and r["verdict"] in ("a", "b", "tie") and isinstance(r["score_a"], float)
    document = json.loads((tmp_path / "o" / "synthetic.results.json").read_text())
    metrics = document["metrics"]
    assert metrics["n_too_long"] == 2 and metrics["n_judgments"] == 8 and metrics["parse_failure"] == 0.0
    assert document["complete"] is False
    assert any("too long" in m for m in metrics["missing"])


def test_scorer_refuses_an_over_long_text_instead_of_truncating(classifier):
    from thinkj.evaluation.scalar import ScalarScorer

    pairs, long_id = _pairs()
    scorer = ScalarScorer(classifier)
    long = next(p for p in pairs if p.id == long_id)
    text = scorer.text(long.messages, long.response_b)
    assert scorer.fits([text]) == [False]
    with pytest.raises(ThinkJError, match=f"over the classifier's context of {CONTEXT}"):
        scorer.score([scorer.text(pairs[0].messages, pairs[0].response_a), text])


def test_max_model_len_lowers_the_limit_and_cannot_exceed_the_models(classifier):
    from thinkj.evaluation.scalar import ScalarScorer

    pairs, _ = _pairs()
    text = ScalarScorer(classifier).text(pairs[0].messages, pairs[0].response_a)
    short = ScalarScorer(classifier, max_model_len=8)
    assert short.context_length == 8 and short.fits([text]) == [False]
    with pytest.raises(ThinkJError, match=f"max_model_len={CONTEXT + 1}: over .* context of {CONTEXT}"):
        ScalarScorer(classifier, max_model_len=CONTEXT + 1)
    with pytest.raises(ThinkJError, match="max_model_len=0"):
        ScalarScorer(classifier, max_model_len=0)
