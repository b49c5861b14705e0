"""Generation budget and over-long prompts: one default budget from the model profile; prompts that cannot fit
(prompt + budget > context) are skipped and recorded as ``too_long``, never truncated, never a crash."""

from __future__ import annotations

import json

from conftest import shared_data
from test_evaluation_run import run_cli, write_shortest

from thinkj.evaluation.run import EvalConfig
from thinkj.inference.both_orders import judge_both_orders
from thinkj.inference.context import PromptBudget, budget_for_backend
from thinkj.models.profiles import generation_budget
from thinkj.prompts import get_template


def test_one_default_budget_from_the_model_profile():
    assert generation_budget() == generation_budget("qwen2.5-7b-instruct") == 4096  # was 2,048 in eval run
    assert generation_budget("llama-3-8b-instruct") == generation_budget("qwen2.5-32b-instruct") == 4096
    assert EvalConfig("autoj", "m").params.max_new_tokens == 4096


def test_budget_counts_prompt_tokens_with_the_chat_template(tiny_model_dir):
    budget = PromptBudget.for_model(str(tiny_model_dir))
    assert budget.context_length == 4096  # the tiny model's max_position_embeddings
    short = [{"role": "user", "content": "hi"}]
    n = budget.prompt_tokens(short)
    assert n > 1  # the chat template's system prompt and role markers count too
    assert budget.fits([short], 4096 - n) == [True] and budget.fits([short], 4096 - n + 1) == [False]
    # the same rule for every backend: vLLM's max_model_len, a server model with a local tokenizer, or none
    assert budget_for_backend("vllm", str(tiny_model_dir), {"max_model_len": 512}).context_length == 512
    assert budget_for_backend("openai", "served-name", {}, tokenizer=str(tiny_model_dir)).context_length == 4096
    assert budget_for_backend("openai", "no/such-model-here", {}) is None


def test_a_served_models_tokenizer_is_looked_up_on_disk_never_on_the_hub(tmp_path, tiny_model_dir):
    """With the hub reachable (here: a server on 127.0.0.1 standing in for it, HF_HUB_OFFLINE unset), a served
    model's name is read from the local cache when it is there and is otherwise no budget: the hub is never asked
    (an offline node spent half a minute of retries on it, and a server's name is often no hub id)."""
    import http.server
    import os
    import shutil
    import subprocess
    import sys
    import threading

    asked: list[str] = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            asked.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = _answer

        def log_message(self, *args: object) -> None:
            pass

    repo = tmp_path / "hub" / "models--org--served"
    snapshot = repo / "snapshots" / "abc123"
    shutil.copytree(tiny_model_dir, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{server.server_address[1]}", HF_HUB_CACHE=str(tmp_path / "hub"),
               HF_HUB_ETAG_TIMEOUT="2", HF_HUB_DOWNLOAD_TIMEOUT="2")
    code = ("from thinkj.inference.context import budget_for_backend as b\n"
            "print(b('openai', 'org/served', {}).context_length, b('openai', 'org/not-cached', {}))")
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr[-2000:]
    model_requests = [path for path in asked if "/org/" in path]  # huggingface_hub pings other paths of its own
    assert out.stdout.split() == ["4096", "None"] and model_requests == [], (out.stdout, asked)


def test_too_long_pairs_are_recorded_not_generated(tmp_path, tiny_model_dir):
    from thinkj.evaluation.registry import load_benchmark
    from thinkj.inference import SamplingParams, make_backend
    from thinkj.inference.cache import CachedBackend, ResultCache

    pairs = load_benchmark("autoj", shared_data("auto-j", "testdata_pairwise.jsonl"), limit=4)
    budget = PromptBudget.for_model(str(tiny_model_dir))
    template = get_template("judge_strength_v2")
    sizes = sorted(budget.prompt_tokens(template.render(p)) for p in pairs)
    budget.context_length = sizes[1] + 10  # two pairs fit with a 10-token budget, two do not
    cache = ResultCache(tmp_path / "cache.sqlite")
    backend = CachedBackend(make_backend("hf", str(tiny_model_dir)), cache, tag="t")
    records = judge_both_orders(backend, pairs, "judge_strength_v2", SamplingParams(max_new_tokens=10), budget=budget)
    cache.close()
    long = [r for r in records if r["too_long"]]
    assert len(records) == 8 and len(long) == 4 and backend.misses == 4  # only the fitting prompts were generated
    assert all(r["output"] is None and r["verdict"] is None and not r["correct"] for r in long)
    assert all(isinstance(r["output"], str) for r in records if not r["too_long"])
    assert len({r["item_id"] for r in long}) == 2  # a pair is skipped in both orders


def test_eval_run_with_the_default_budget_on_a_short_context_model_skips_everything(tmp_path, tiny_model_dir):
    # The tiny model's context (4,096) cannot hold a prompt plus the default 4,096-token budget: every item is
    # too long -- recorded and counted, nothing generated, no crash, and the result says it is incomplete.
    data = write_shortest("autoj", shared_data("auto-j", "testdata_pairwise.jsonl"), 2, tmp_path / "aj.jsonl")
    result = run_cli("autoj", "--model", str(tiny_model_dir), "--data", str(data), "--out", str(tmp_path / "out"))
    document = json.loads((tmp_path / "out" / "autoj.results.json").read_text())
    assert document["provenance"]["sampling"]["max_new_tokens"] == 4096
    assert document["complete"] is False and document["metrics"]["n_too_long"] == 4
    assert "2 item(s) too long for the model's context (not judged)" in document["metrics"]["missing"]
    assert "incomplete:" in result.output
    records = [json.loads(line) for line in open(tmp_path / "out" / "autoj.judgments.jsonl")]
    assert all(r["too_long"] and r["output"] is None for r in records)


def test_difficulty_filter_follows_the_same_rule(tmp_path, tiny_model_dir):
    from thinkj.data.difficulty import run_difficulty
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    pairs = make_pairs(4, seed=2)
    budget = PromptBudget.for_model(str(tiny_model_dir))
    sizes = sorted(budget.prompt_tokens(get_template("judge_strength_v2").render(p)) for p in pairs)
    write_jsonl(tmp_path / "pairs.jsonl", pairs)
    summary = run_difficulty(tmp_path / "pairs.jsonl", tmp_path / "kept.jsonl", model=str(tiny_model_dir), k=1,
                             max_new_tokens=4, context_length=sizes[1] + 4, temperature=0.0)
    assert summary["too_long_skipped"] == 2 and summary["samples"] == 2  # two judged once each, two never generated
    assert summary["sampling"]["max_new_tokens"] == 4


def test_http_backend_follows_the_same_rule(tmp_path, tiny_model_dir):
    # A model name only the server knows: prompt tokens are counted with --tokenizer; too-long pairs never reach
    # the server (the scripted teacher on 127.0.0.1 answers the others).
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs
    from thinkj.synthetic.scripted_teacher import TeacherServer

    pairs = make_pairs(4, seed=4)
    write_jsonl(tmp_path / "pairs.jsonl", pairs)
    budget = PromptBudget.for_model(str(tiny_model_dir))
    sizes = sorted(budget.prompt_tokens(get_template("judge_strength_v2").render(p)) for p in pairs)
    with TeacherServer() as server:
        run_cli("synthetic", "--model", "r1-scripted", "--backend", "openai", "--backend-arg", f"base_url={server.base_url}",
                "--backend-arg", "api_key_env=null", "--tokenizer", str(tiny_model_dir), "--context-length",
                str(sizes[1] + 64), "--max-new-tokens", "64", "--data", str(tmp_path / "pairs.jsonl"),
                "--out", str(tmp_path / "out"))
        requests = sum(server.counts()["requests"].values())
    document = json.loads((tmp_path / "out" / "synthetic.results.json").read_text())
    assert document["metrics"]["n_too_long"] == 4 and document["complete"] is False
    assert requests == 4  # two pairs x two orders reached the server, the two long pairs never did
