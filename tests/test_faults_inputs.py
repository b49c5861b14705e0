"""Hostile inputs and a full disk end in one ``error: …`` line naming the file, line, key or option -- never a
traceback, never a silently wrong value:

* JSON that Python cannot hold (a 5,000-digit integer, 100,000-deep nesting) in every JSONL / JSON reader;
  a corrupt or truncated parquet or gzip file;
* a broken model-profile YAML (syntax, shape, a key of the wrong kind);
* ``load_source`` options: a ``--column-map`` that is not a JSON object of columns, ``--strength-thresholds``
  that are not two finite increasing numbers, a NaN score gap (never binned as strength 3);
* a model a data stage loads (dedup's and decontamination's encoder, clip's tokenizer) that is not there, holds
  no model, or is a hub id the offline hub cannot give;
* an unknown benchmark wherever one is named (``thinkj eval``, a sweep spec);
* a sweep spec of the wrong shape or a damaged ``state.json``, through ``thinkj sweep``;
* a full disk (a real one: a small tmpfs, where this machine lets a test mount one), a read-only file system and
  ``/dev/full``: the target keeps its previous content, no temp file or 0-byte file is left under any name.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from thinkj.errors import ThinkJError, exit_on_user_error, run_typer
from thinkj.records import RecordError, read_jsonl, write_json, write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

ROOT = Path(__file__).resolve().parent.parent
HH_ROW = {"chosen": "\n\nHuman: hi\n\nAssistant: hello there", "rejected": "\n\nHuman: hi\n\nAssistant: go away"}
GENERIC_MAP = '{"prompt": "q", "chosen": "good", "rejected": "bad"}'


def _files(tmp: Path) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = {"outdir": tmp / "outdir", "out": tmp / "out" / "o.jsonl", "folder": tmp / "a_folder"}
    files["folder"].mkdir()
    (tmp / "bigint.jsonl").write_text('{"id": ' + "7" * 5000 + "}\n")
    (tmp / "deep.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    (tmp / "deepish.jsonl").write_text('{"a": ' + "[" * 150 + "]" * 150 + "}\n")  # parses; deeper than any record
    (tmp / "deep.json").write_text("[" + "{\"a\": " * 100_000 + "1" + "}" * 100_000 + "]")
    (tmp / "bigint.json").write_text('[{"q": "x", "good": "a", "bad": ' + "1" * 5000 + "}]")
    table = pa.table({"chosen": [HH_ROW["chosen"]] * 50, "rejected": [HH_ROW["rejected"]] * 50})
    pq.write_table(table, tmp / "good.parquet")
    data = (tmp / "good.parquet").read_bytes()
    (tmp / "cut.parquet").write_bytes(data[: len(data) // 2])
    (tmp / "junk.parquet").write_bytes(b"PAR1 this is not a parquet file")
    (tmp / "empty.parquet").write_bytes(b"")
    raw = gzip.compress(("\n".join(json.dumps(HH_ROW) for _ in range(200)) + "\n").encode())
    (tmp / "cut.jsonl.gz").write_bytes(raw[: len(raw) // 2])
    (tmp / "notgz.jsonl.gz").write_bytes(b"plain text, not gzip\n")
    (tmp / "hh.jsonl").write_text(json.dumps(HH_ROW) + "\n")
    (tmp / "empty.jsonl").write_text("\n")
    (tmp / "hh_nan.jsonl").write_text(json.dumps({**HH_ROW, "gap": float("nan")}) + "\n")  # NaN: what json.dumps writes
    (tmp / "hh_inf.jsonl").write_text(json.dumps({**HH_ROW, "gap": float("inf")}) + "\n")
    (tmp / "scores_nan.jsonl").write_text('{"row": 1, "gap": NaN}\n')
    (tmp / "scores_big.jsonl").write_text('{"row": 1, "chosen": ' + "9" * 400 + ', "rejected": 0}\n')
    (tmp / "scores_text.jsonl").write_text('{"row": 1, "gap": "high"}\n')
    (tmp / "scores_row.jsonl").write_text('{"row": 1.5, "gap": 1.0}\n')
    (tmp / "bad_profile.yaml").write_text("model_name_or_path: x\ntemplate: [qwen\n")
    (tmp / "list_profile.yaml").write_text("- model_name_or_path\n- x\n")
    (tmp / "nested_profile.yaml").write_text("model_name_or_path: x\ntemplate: {name: qwen}\n")
    (tmp / "budget_profile.yaml").write_text("model_name_or_path: x\nmax_new_tokens: lots\n")
    (tmp / "binary_profile.yaml").write_bytes(b"\xff\xfe\x00model")
    (tmp / "catalog_profile.yaml").write_text("thinkj_model: smolm2\n")
    (tmp / "path_profile.yaml").write_text("model_name_or_path: 5\ntemplate: qwen\n")
    (tmp / "twice_profile.yaml").write_text("model_name_or_path: x\nmax_new_tokens: 96\nmax_new_tokens: 4096\n")
    (tmp / "bigint_profile.yaml").write_text("model_name_or_path: x\nmax_new_tokens: " + "9" * 5000 + "\n")
    write_jsonl(tmp / "pairs.jsonl", make_pairs(3, seed=0))
    (tmp / "grid_scalar.yaml").write_text("name: s\ngrid: 5\nsteps: [echo]\nresults: r.json\n")
    (tmp / "settings_list.yaml").write_text("name: s\nsettings: [a, b]\nsteps: [echo]\nresults: r.json\n")
    (tmp / "positional.yaml").write_text("name: s\nsteps: ['echo {}']\nresults: r.json\n")
    (tmp / "unknown_placeholder.yaml").write_text("name: s\nsteps: ['echo {nosuch}']\nresults: r.json\n")
    (tmp / "unknown_bench.yaml").write_text("name: s\nsteps: ['thinkj eval run rewardbnch --model m']\n"
                                            "results: r.json\n")
    return {**files, **{p.name.replace(".", "_"): p for p in tmp.iterdir() if p.is_file()}}


# (case id, entry point, argv with {name} for _files, the text the error line must hold, what must not exist after)
CASES = [
    # JSON Python cannot hold, in every reader
    ("5,000-digit integer in JSONL", "thinkj", ["data", "clip", "{bigint_jsonl}", "{out}"],
     "bigint.jsonl, line 1: unreadable JSON: an integer longer than Python's limit", "{out}"),
    ("100,000-deep JSONL", "thinkj", ["data", "clip", "{deep_jsonl}", "{out}"],
     "deep.jsonl, line 1: invalid JSON: nested deeper than 100 levels", "{out}"),
    ("150-deep JSONL (parses, too deep to carry)", "thinkj", ["data", "clip", "{deepish_jsonl}", "{out}"],
     "deepish.jsonl, line 1: invalid JSON: nested deeper than 100 levels", "{out}"),
    ("5,000-digit integer, source loader", "load_source", ["hh_rlhf", "--location", "{bigint_jsonl}", "--out", "{out}"],
     "bigint.jsonl, line 1: unreadable JSON", "{out}"),
    ("100,000-deep JSONL, source loader", "load_source", ["hh_rlhf", "--location", "{deep_jsonl}", "--out", "{out}"],
     "deep.jsonl, line 1: invalid JSON: nested deeper", "{out}"),
    ("100,000-deep .json, source loader", "load_source", ["hh_rlhf", "--location", "{deep_json}", "--out", "{out}"],
     "deep.json: invalid JSON: nested deeper", "{out}"),
    ("5,000-digit integer in .json, source loader", "load_source", ["generic", "--location", "{bigint_json}",
                                                                     "--column-map", GENERIC_MAP, "--out", "{out}"],
     "bigint.json: unreadable JSON: an integer longer", "{out}"),
    ("100,000-deep .json, benchmark rows", "thinkj", ["eval", "run", "rmbench", "--model", "{folder}", "--data",
                                                      "{deep_json}", "--max-new-tokens", "8", "--out", "{outdir}"],
     "deep.json: invalid JSON: nested deeper", "{outdir}"),
    ("100,000-deep JSONL, benchmark rows", "thinkj", ["eval", "run", "autoj", "--model", "{folder}", "--data",
                                                      "{deep_jsonl}", "--max-new-tokens", "8", "--out", "{outdir}"],
     "deep.jsonl, line 1: invalid JSON: nested deeper", "{outdir}"),
    ("--backend-arg 5,000-digit integer", "thinkj", ["eval", "run", "rewardbench", "--model", "m", "--backend-arg",
                                                     "tensor_parallel_size=" + "1" * 5000, "--out", "{outdir}"],
     "--backend-arg tensor_parallel_size: the hf backend takes no such argument", "{outdir}"),
    ("--backend-arg 100,000-deep", "difficulty", ["--in", "{pairs_jsonl}", "--out", "{out}", "--model", "m",
                                                  "--backend-arg", "x=" + "[" * 100_000],
     "--backend-arg x: the hf backend takes no such argument", "{out}"),
    # corrupt files
    ("junk parquet, source loader", "load_source", ["hh_rlhf", "--location", "{junk_parquet}", "--out", "{out}"],
     "junk.parquet: not a readable parquet file", "{out}"),
    ("truncated parquet, source loader", "load_source", ["hh_rlhf", "--location", "{cut_parquet}", "--out", "{out}"],
     "cut.parquet: not a readable parquet file", "{out}"),
    ("empty parquet, source loader", "load_source", ["hh_rlhf", "--location", "{empty_parquet}", "--out", "{out}"],
     "empty.parquet: not a readable parquet file", "{out}"),
    ("junk parquet, benchmark rows", "thinkj", ["eval", "run", "rmbench", "--model", "{folder}", "--data", "{junk_parquet}",
                                                "--max-new-tokens", "8", "--out", "{outdir}"],
     "junk.parquet: not a readable parquet file", "{outdir}"),
    ("truncated gzip, source loader", "load_source", ["hh_rlhf", "--location", "{cut_jsonl_gz}", "--out", "{out}"],
     "cut.jsonl.gz: not a readable gzip file", "{out}"),
    ("not gzip at all, source loader", "load_source", ["hh_rlhf", "--location", "{notgz_jsonl_gz}", "--out", "{out}"],
     "notgz.jsonl.gz: not a readable gzip file", "{out}"),
    # load_source options
    ("--column-map not JSON", "load_source", ["generic", "--location", "{hh_jsonl}", "--out", "{out}", "--column-map", "{x"],
     "--column-map '{x': not valid JSON", "{out}"),
    ("--column-map a list", "load_source", ["generic", "--location", "{hh_jsonl}", "--out", "{out}", "--column-map", "[1]"],
     "--column-map: must be a JSON object of column names, got list", "{out}"),
    ("--column-map unknown key", "load_source", ["generic", "--location", "{hh_jsonl}", "--out", "{out}", "--column-map",
                                                 '{"promt": "q", "chosen": "a", "rejected": "b"}'],
     "--column-map: unknown keys ['promt']", "{out}"),
    ("--column-map non-string column", "load_source", ["generic", "--location", "{hh_jsonl}", "--out", "{out}",
                                                       "--column-map", '{"prompt": 1, "chosen": "a", "rejected": "b"}'],
     "--column-map: key 'prompt' must name a column", "{out}"),
    ("--column-map 5,000-digit integer", "load_source", ["generic", "--location", "{hh_jsonl}", "--out", "{out}",
                                                         "--column-map", '{"prompt": ' + "1" * 5000 + "}"],
     "--column-map", "{out}"),
    ("--column-map for a source with its own schema", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out",
                                                                      "{out}", "--column-map", GENERIC_MAP],
     "--column-map is for the generic loader", "{out}"),
    ("generic without --column-map", "load_source", ["generic", "--location", "{hh_jsonl}", "--out", "{out}"],
     "the generic loader needs --column-map", "{out}"),
    ("--strength-thresholds a,b", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                  "--strength-thresholds", "a,b"],
     "--strength-thresholds 'a,b': expected two numbers", "{out}"),
    ("--strength-thresholds decreasing", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                         "--strength-thresholds", "2.5,1.0"],
     "--strength-thresholds '2.5,1.0': the bin edges must increase", "{out}"),
    ("--strength-thresholds equal", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                    "--strength-thresholds", "1,1"], "must increase", "{out}"),
    ("--strength-thresholds NaN", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                  "--strength-thresholds", "nan,1"], "must be finite numbers", "{out}"),
    ("--strength-thresholds inf", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                  "--strength-thresholds", "1,inf"], "must be finite numbers", "{out}"),
    ("--strength-thresholds one value", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                        "--strength-thresholds", "1"], "expected two numbers", "{out}"),
    ("--strength-thresholds three values", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                           "--strength-thresholds", "1,2,3"], "expected two numbers",
     "{out}"),
    ("--strength-column and --scores-file", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}",
                                                            "--strength-column", "gap", "--scores-file",
                                                            "{scores_nan_jsonl}"], "give one", "{out}"),
    ("every row skipped", "load_source", ["hh_rlhf", "--location", "{hh_nan_jsonl}", "--out", "{out}",
                                          "--strength-column", "gap", "--skip-invalid"],
     "hh_nan.jsonl: no valid pairs (1 rows read, 1 skipped; the first:", "{out}"),
    ("empty source", "load_source", ["hh_rlhf", "--location", "{empty_jsonl}", "--out", "{out}"],
     "empty.jsonl: no valid pairs (0 rows read", "{out}"),
    ("--limit 0", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}", "--limit", "0"],
     "--limit must be >= 1", "{out}"),
    # a NaN score gap is a bad row, never strength 3
    ("NaN strength column", "load_source", ["hh_rlhf", "--location", "{hh_nan_jsonl}", "--out", "{out}", "--strength-column",
                                            "gap"], "hh_nan.jsonl, line 1, field 'gap': strength must be a finite",
     "{out}"),
    ("infinite strength column", "load_source", ["hh_rlhf", "--location", "{hh_inf_jsonl}", "--out", "{out}",
                                                 "--strength-column", "gap"], "field 'gap': strength must be a finite",
     "{out}"),
    ("NaN gap in the scores file", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}", "--scores-file",
                                                   "{scores_nan_jsonl}"], "scores_nan.jsonl, line 1, field 'gap': must be a "
                                                                    "finite number", "{out}"),
    ("score too large for a float", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}", "--scores-file",
                                                    "{scores_big_jsonl}"], "scores_big.jsonl, line 1, field 'chosen'",
     "{out}"),
    ("text score", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}", "--scores-file",
                                   "{scores_text_jsonl}"], "scores_text.jsonl, line 1, field 'gap'", "{out}"),
    ("fractional row number", "load_source", ["hh_rlhf", "--location", "{hh_jsonl}", "--out", "{out}", "--scores-file",
                                              "{scores_row_jsonl}"], "scores_row.jsonl, line 1, field 'row'", "{out}"),
    # model profiles
    ("profile YAML syntax error", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile",
                                             "{bad_profile_yaml}", "--out", "{outdir}"],
     "bad_profile.yaml, line 3: not valid YAML", "{outdir}"),
    ("profile that is a list", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile",
                                          "{list_profile_yaml}", "--out", "{outdir}"],
     "list_profile.yaml: a config must be a mapping", "{outdir}"),
    ("profile with a nested key", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile",
                                             "{nested_profile_yaml}", "--out", "{outdir}"],
     "nested_profile.yaml: key 'template' is nested", "{outdir}"),
    ("profile budget not a number", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile",
                                               "{budget_profile_yaml}", "--out", "{outdir}"],
     "budget_profile.yaml: max_new_tokens must be a positive integer", "{outdir}"),
    ("binary profile", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile",
                                  "{binary_profile_yaml}", "--out", "{outdir}"], "binary_profile.yaml: not UTF-8",
     "{outdir}"),
    ("profile key written twice", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile",
                                             "{twice_profile_yaml}", "--out", "{outdir}"],
     "twice_profile.yaml, line 3: not valid YAML: the key 'max_new_tokens' is written twice", "{outdir}"),
    ("profile 5,000-digit integer", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile",
                                               "{bigint_profile_yaml}", "--out", "{outdir}"],
     "bigint_profile.yaml: not a usable document: an integer longer", "{outdir}"),
    ("unknown profile name", "thinkj", ["eval", "run", "rewardbench", "--model", "{folder}", "--profile", "qwen9",
                                        "--out", "{outdir}"], "no model profile 'qwen9'", "{outdir}"),
    # a model a data stage loads (an encoder, a tokenizer): a path that is not there, a folder without one in it,
    # a hub id neither cached nor reachable (HF_HUB_OFFLINE=1: conftest.py)
    ("dedup encoder folder missing", "dedup", ["--in", "{pairs_jsonl}", "--out", "{out}", "--model", "{outdir}/enc"],
     "enc: --model folder does not exist", "{out}"),
    ("dedup encoder folder without a model", "dedup", ["--in", "{pairs_jsonl}", "--out", "{out}", "--model",
                                                       "{folder}"],
     "a_folder: cannot load it as a sentence encoder", "{out}"),
    ("dedup encoder hub id offline", "dedup", ["--in", "{pairs_jsonl}", "--out", "{out}", "--model", "org/no-encoder"],
     "org/no-encoder: --model is not a local folder and not in the hub cache", "{out}"),
    ("decontaminate encoder folder missing", "thinkj", ["data", "decontaminate", "{pairs_jsonl}", "{out}", "--against",
                                                        "synthetic={pairs_jsonl}", "--encoder", "{outdir}/enc"],
     "enc: --encoder folder does not exist", "{out}"),
    ("clip tokenizer folder missing", "thinkj", ["data", "clip", "{pairs_jsonl}", "{out}", "--tokenizer",
                                                 "{outdir}/tok"], "tok: --tokenizer folder does not exist", "{out}"),
    ("clip tokenizer folder without one", "thinkj", ["data", "clip", "{pairs_jsonl}", "{out}", "--tokenizer",
                                                     "{folder}"],
     "a_folder: cannot load a tokenizer from it", "{out}"),
    # a served judge's --tokenizer (counts prompt tokens): refused, not dropped in silence, before any call
    ("eval --tokenizer folder missing", "thinkj", ["eval", "run", "synthetic", "--model", "m", "--backend", "openai",
                                                   "--backend-arg", "base_url=http://127.0.0.1:9/v1", "--tokenizer",
                                                   "{outdir}/tok", "--data", "{pairs_jsonl}", "--out", "{outdir}"],
     "tok: --tokenizer folder does not exist", "{outdir}"),
    ("eval --tokenizer folder without one", "thinkj", ["eval", "run", "synthetic", "--model", "m", "--backend",
                                                       "openai", "--backend-arg", "base_url=http://127.0.0.1:9/v1",
                                                       "--tokenizer", "{folder}", "--data", "{pairs_jsonl}", "--out",
                                                       "{outdir}"],
     "a_folder: cannot read its tokenizer/config to count prompt tokens", "{outdir}/synthetic.judgments.jsonl"),
    # --backend-arg values: the type the backend's constructor declares, then its own ranges, before any data loads
    *[(f"eval --backend-arg {arg}", "thinkj", ["eval", "run", "synthetic", "--model", "m", "--backend", backend,
                                                "--backend-arg", arg, "--data", "{pairs_jsonl}", "--out", "{outdir}"],
       expected, "{outdir}")
      for backend, arg, expected in (
          ("openai", "timeout=abc", "--backend-arg timeout='abc': the openai backend takes a number here"),
          ("openai", "timeout=-5", "openai backend: timeout must be > 0, got -5"),
          ("openai", "max_concurrency=0", "openai backend: max_concurrency must be >= 1, got 0"),
          ("openai", "max_retries=-1", "openai backend: max_retries must be >= 0, got -1"),
          ("openai", "connect_timeout=0", "openai backend: connect_timeout must be > 0, got 0"),
          ("openai", "extra_body=3", "--backend-arg extra_body=3: the openai backend takes a JSON object here"),
          ("hf", "batch_size=2.5", "--backend-arg batch_size=2.5: the hf backend takes a whole number here"),
          ("hf", "batch_size=0", "hf backend: batch_size must be >= 1, got 0"),
          ("hf", "prefix_cache=maybe", "--backend-arg prefix_cache='maybe': the hf backend takes true or false"),
          ("hf", "device=gpu0", "hf backend: device 'gpu0' is not a torch device"),
          ("vllm", "tensor_parallel_size=two", "--backend-arg tensor_parallel_size='two': the vllm backend takes a "
                                              "whole number here"),
          ("classifier", "bogus=1", "--backend-arg bogus: the classifier backend takes no such argument; it takes: "
                                    "batch_size, device, max_model_len"),
          ("classifier", "batch_size=0", "classifier: batch_size must be a whole number >= 1, got 0"),
          ("classifier", "device=gpu0", "classifier: device 'gpu0' is not a torch device"))],
    ("difficulty --backend-arg batch_size text", "difficulty", ["--in", "{pairs_jsonl}", "--out", "{out}", "--model",
                                                                 "m", "--backend-arg", "batch_size=x"],
     "--backend-arg batch_size='x': the hf backend takes a whole number here", "{out}"),
    # unknown benchmarks
    ("eval run unknown benchmark", "thinkj", ["eval", "run", "rewardbnch", "--model", "m", "--out", "{outdir}"],
     "unknown benchmark 'rewardbnch'", "{outdir}"),
    ("eval score unknown benchmark", "thinkj", ["eval", "score", "rewardbnch", "{pairs_jsonl}"],
     "unknown benchmark 'rewardbnch'", "{outdir}"),
    ("sweep step with an unknown benchmark", "thinkj", ["sweep", "{unknown_bench_yaml}", "--sweep-dir", "{outdir}"],
     "unknown_bench.yaml, field 'steps[0]': thinkj eval run 'rewardbnch': unknown benchmark", "{outdir}"),
    # sweep specs
    ("sweep grid a scalar", "thinkj", ["sweep", "{grid_scalar_yaml}", "--sweep-dir", "{outdir}"],
     "grid_scalar.yaml, field 'grid': must be a mapping", "{outdir}"),
    ("sweep settings a list", "thinkj", ["sweep", "{settings_list_yaml}", "--sweep-dir", "{outdir}"],
     "settings_list.yaml, field 'settings': must be a mapping", "{outdir}"),
    ("sweep positional placeholder", "thinkj", ["sweep", "{positional_yaml}", "--sweep-dir", "{outdir}"],
     "positional.yaml, field 'steps[0]': positional placeholder", "{outdir}"),
    ("sweep unknown placeholder", "thinkj", ["sweep", "{unknown_placeholder_yaml}", "--sweep-dir", "{outdir}"],
     "unknown_placeholder.yaml, field 'steps[0]': {nosuch} names no setting", "{outdir}"),
    ("sweep --set 5,000-digit integer", "thinkj", ["sweep", "experiments/table8.yaml", "--set", "w_acc=" + "1" * 5000,
                                                   "--sweep-dir", "{outdir}"],
     "the value is not a usable document: an integer longer", "{outdir}"),
    ("sweep --set deeply nested", "thinkj", ["sweep", "experiments/table8.yaml", "--set", "w_str=" + "[" * 5000,
                                             "--sweep-dir", "{outdir}"], "the value is not valid YAML", "{outdir}"),
    ("sweep --sweep-dir is a file", "thinkj", ["sweep", "experiments/table8.yaml", "--sweep-dir", "{pairs_jsonl}"],
     "pairs.jsonl: --sweep-dir is an existing file", "{outdir}"),
    ("tables --out is a file", "thinkj", ["tables", "8", "--out", "{pairs_jsonl}"], "pairs.jsonl: --out is an existing file",
     "{outdir}"),
    ("sweep --set emptying a grid axis", "thinkj", ["sweep", "experiments/table8.yaml", "--set", "w_str=[]",
                                                    "--sweep-dir", "{outdir}"],
     "table8.yaml, field 'grid.w_str': a grid axis needs at least one value", "{outdir}"),
]


def _entry(kind: str, argv: list[str]):
    if kind == "thinkj":
        from thinkj.cli import _register_subcommands, app

        if not any(g.name == "train" for g in app.registered_groups):
            _register_subcommands()
        sys.argv = ["thinkj", *argv]
        return lambda: run_typer(app)
    import importlib

    main = importlib.import_module({"load_source": "data_prep.load_source", "difficulty": "data_prep.difficulty",
                                     "dedup": "data_prep.dedup"}[kind]).main
    return lambda: main(argv)


def _fill(files: dict[str, Path], text: str) -> str:
    for key in sorted(files, key=len, reverse=True):
        text = text.replace("{" + key + "}", str(files[key]))
    return text


def _run(kind: str, argv: list[str], monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("THINKJ_TRACEBACK", raising=False)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit) as stop:
        exit_on_user_error(_entry(kind, argv))
    return stop.value.code, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_naming_what_is_wrong(case, tmp_path, monkeypatch, capsys):
    _, kind, argv, expected, leftover = case
    files = _files(tmp_path)
    code, err = _run(kind, [_fill(files, a) for a in argv], monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert expected in lines[0], lines[0]
    assert not Path(_fill(files, leftover)).exists()


def test_skip_invalid_counts_a_nan_strength_instead_of_binning_it(tmp_path):
    """With --skip-invalid a NaN score gap is a counted skip; without it, a RecordError; never strength 3."""
    from data_prep.load_source import main

    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps({**HH_ROW, "gap": g}) for g in (0.5, float("nan"), 3.0, float("-inf"))) + "\n")
    report = main(["hh_rlhf", "--location", str(path), "--out", str(tmp_path / "o.jsonl"), "--strength-column", "gap",
                   "--skip-invalid"])
    assert report["pairs"] == 2 and report["skipped"] == 2
    assert all("field 'gap': strength must be a finite number" in e for e in report["errors"])
    assert sorted(json.loads(x)["strength"] for x in (tmp_path / "o.jsonl").read_text().splitlines()) == [1, 3]


def test_bin_strength_and_thresholds_refuse_what_cannot_be_binned():
    from thinkj.data.loaders import bin_strength, check_thresholds, load_source, parse_thresholds

    for gap in (float("nan"), float("inf"), -float("inf"), 10**400, "2", None):
        with pytest.raises(ThinkJError, match="not a finite number"):
            bin_strength(gap)
    for bad in ((2.5, 1.0), (1.0, 1.0), (float("nan"), 1.0), (1.0,), "1,2", (True, 2.0)):
        with pytest.raises(ThinkJError, match="strength_thresholds"):
            check_thresholds(bad)
        with pytest.raises(ThinkJError, match="strength_thresholds"):
            load_source("hh_rlhf", "unused", strength_thresholds=bad)
    assert parse_thresholds(" 0.5 , 2 ") == (0.5, 2.0) and bin_strength(-3.0, (-1.0, 1.0)) == 1


def test_readers_name_file_and_line_for_values_python_cannot_hold(tmp_path):
    from thinkj.data.loaders import read_rows as source_rows
    from thinkj.evaluation.rows import read_rows as benchmark_rows
    from thinkj.records import read_json

    path = tmp_path / "rows.jsonl"
    path.write_text('{"ok": 1}\n\n{"n": ' + "1" * 5000 + "}\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(RecordError, match=r"rows\.jsonl, line 3: unreadable JSON: an integer longer"):
        list(read_jsonl(path))
    with pytest.raises(RecordError, match=r"rows\.jsonl, line 3: unreadable JSON"):
        list(benchmark_rows(path))
    # the source loader hands bad lines over as rows, so --skip-invalid can count them
    rows = list(source_rows(path))
    assert [type(r).__name__ for _, r in rows] == ["dict", "RecordError", "RecordError"]
    assert "line 4: invalid JSON: nested deeper than 100 levels" in str(rows[2][1])
    whole = tmp_path / "doc.json"
    whole.write_text('{"a": ' + "9" * 5000 + "}")
    with pytest.raises(RecordError, match=r"doc\.json: unreadable JSON"):
        read_json(whole)
    whole.write_text('{"a": [1, 2')
    with pytest.raises(RecordError, match=r"doc\.json: invalid JSON \(.* at line 1 column"):
        read_json(whole)


# --------------------------------------------------------------------------------------------- sweep state via CLI

def test_truncated_sweep_state_through_the_cli(tmp_path, monkeypatch, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: st\ngrid: {{v: [1, 2]}}\nsteps: ['{sys.executable} -c pass']\n"
                    "results: '{run_dir}/r.results.json'\n")
    sweep_dir = tmp_path / "sw"
    sweep_dir.mkdir()
    state = sweep_dir / "state.json"
    state.write_text('{"sweep": "st", "runs": {"v=1-')
    code, err = _run("thinkj", ["sweep", str(spec), "--sweep-dir", str(sweep_dir)], monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {state}: invalid JSON") and "delete it" in lines[0], lines[0]
    assert state.read_text() == '{"sweep": "st", "runs": {"v=1-' and not (sweep_dir / "runs").exists()


# --------------------------------------------------------------------------------------------- a full disk

class Disk:
    """A mounted tmpfs of a few pages: ``fill()`` takes its last free byte."""

    def __init__(self, root: Path):
        self.root = root

    def fill(self) -> None:
        with open(self.root / ".filler", "wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(b"\0" * 4096)
            except OSError as err:
                assert err.errno == errno.ENOSPC

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if not p.name.startswith(".filler"))


@pytest.fixture
def disk(tmp_path):
    """A real, tiny file system to fill: a 512 KiB tmpfs, where this machine lets the test mount one."""
    root = tmp_path / "disk"
    root.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small file system to fill")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(root)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield Disk(root)
    finally:
        subprocess.run(["umount", "-l", str(root)], capture_output=True)


def test_full_disk_keeps_the_previous_file_and_names_the_target(disk):
    from thinkj.atomic import WriteError, write_text_atomic

    summary, rows, text = disk.root / "a.summary.json", disk.root / "pairs.jsonl", disk.root / "notes.txt"
    write_json(summary, {"n_out": 1})
    write_jsonl(rows, [{"i": 0}])
    write_text_atomic(text, "old\n")
    before = disk.files()
    disk.fill()
    for write, target in ((lambda: write_json(summary, {"n_out": 2, "pad": "x" * 20000}), summary),
                          (lambda: write_jsonl(rows, ({"i": i, "pad": "x" * 100} for i in range(1000))), rows),
                          (lambda: write_text_atomic(text, "new\n" * 5000), text)):
        with pytest.raises(WriteError) as err:
            write()
        assert str(err.value).startswith(f"{target}: cannot write (No space left on device)"), err.value
    assert json.loads(summary.read_text()) == {"n_out": 1} and rows.read_text() == '{"i": 0}\n'
    assert text.read_text() == "old\n" and disk.files() == before  # no temp file, no partial file


def test_full_disk_tables_out_leaves_no_empty_table(disk, tmp_path, monkeypatch, capsys):
    out = disk.root / "tables"
    out.mkdir()
    (out / "table8.md").write_text("previous table\n")
    disk.fill()
    code, err = _run("thinkj", ["tables", "8", "--out", str(out)], monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err, err
    assert lines[-1].startswith(f"error: {out}") and "No space left on device" in lines[-1], err
    assert (out / "table8.md").read_text() == "previous table\n"
    assert sorted(p.name for p in out.iterdir()) == ["table8.md"]  # nothing staged is left, nothing 0-byte


def test_full_disk_sweep_and_source_loader_are_one_line(disk, tmp_path, monkeypatch, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: full\nsteps: ['{sys.executable} -c pass']\nresults: '{{run_dir}}/r.results.json'\n")
    disk.fill()
    code, err = _run("thinkj", ["sweep", str(spec), "--sweep-dir", str(disk.root / "sw")], monkeypatch, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "No space left on device" in err, err
    assert str(disk.root / "sw") in err
    hh = tmp_path / "hh.jsonl"
    hh.write_text("\n".join(json.dumps(HH_ROW) for _ in range(300)) + "\n")
    out = disk.root / "src" / "o.jsonl"
    code, err = _run("load_source", ["hh_rlhf", "--location", str(hh), "--out", str(out)], monkeypatch, capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith(f"error: {out}: cannot write (No space left"), err
    assert not out.exists() and not out.with_suffix(".summary.json").exists()
    assert not [p for p in disk.root.rglob("*.tmp")]


def test_full_disk_under_the_generation_cache_is_one_line_and_leaves_no_empty_cache(disk, tmp_path, monkeypatch,
                                                                                     capsys):
    """A stage whose SQLite cache sits on a full disk ends in one line naming the cache, and leaves no 0-byte
    ``*.cache.sqlite`` (it was ``sqlite3.OperationalError: database or disk is full`` and an empty cache file); a cache
    that fills up while a stage writes is named the same way and keeps what it held."""
    from thinkj.atomic import WriteError
    from thinkj.inference.cache import ResultCache
    from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer

    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, make_pairs(3, seed=0))
    old = ResultCache(disk.root / "old.cache.sqlite")
    old.put("k", "kept")
    out = disk.root / "t.jsonl"
    disk.fill()
    with TeacherServer(TeacherConfig()) as server:
        code, err = _run("thinkj", ["data", "traces", str(pairs), str(out), "--base-url", server.base_url,
                                    "--api-key-env", "", "--model", "r1-scripted"], monkeypatch, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {out.with_suffix('.cache.sqlite')}: cannot write the generation cache "
                               "(database or disk is full)"), lines[0]
    assert not out.with_suffix(".cache.sqlite").exists() and not out.exists()
    with pytest.raises(WriteError, match=rf"^{old.path}: cannot write the generation cache"):
        for i in range(100):
            old.put(f"k{i}", os.urandom(4000).hex())
    assert old.get("k") == "kept"


def test_read_only_file_system_names_the_target(disk):
    from thinkj.atomic import WriteError

    target = disk.root / "x.summary.json"
    write_json(target, {"v": 1})
    if subprocess.run(["mount", "-o", "remount,ro", str(disk.root)], capture_output=True).returncode != 0:
        pytest.skip("cannot remount the tmpfs read-only")
    with pytest.raises(WriteError, match=rf"{target}: cannot write \(Read-only file system\)"):
        write_json(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_dev_full_stream_writers_are_one_line(monkeypatch, capsys):
    """A writer that appends in place (a log) and one that names no file at all both end in one line."""
    from thinkj.atomic import WriteError, disk_errors

    with pytest.raises(WriteError, match=r"^/dev/full: cannot write \(No space left on device\)"):
        with disk_errors("/dev/full"), open("/dev/full", "a") as handle:
            handle.write("a log line\n")
            handle.flush()

    def unnamed_writer() -> None:
        with open("/dev/full", "wb", buffering=0) as handle:
            handle.write(b"x")

    monkeypatch.delenv("THINKJ_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as stop:
        exit_on_user_error(unnamed_writer)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.strip() == "error: a write failed: No space left on device", err


def test_full_disk_verl_parquet_keeps_the_previous_file(disk):
    """The verl export writes its parquet under its own temp name and renames it whole; a full disk is one line."""
    from thinkj.atomic import WriteError
    from thinkj.export.verl import write_verl_parquet

    target = disk.root / "rl.parquet"
    write_verl_parquet(target, make_pairs(2, seed=0))
    before = target.read_bytes()
    disk.fill()
    pairs = make_pairs(200, seed=1)
    for pair in pairs:  # text that does not compress: the write needs far more than the disk has
        pair.response_a = os.urandom(600).hex()
    with pytest.raises(WriteError, match=rf"^{target}: cannot write \(No space left on device\)"):
        write_verl_parquet(target, pairs)
    assert target.read_bytes() == before and disk.files() == ["rl.parquet"]


@pytest.mark.parametrize("damage", [b'{"judge_sft": {', b"[]", b'{"a": ' + b"1" * 5000 + b"}", b"\xff\xfe"])
def test_damaged_json_beside_an_output_is_one_line(damage, tmp_path):
    """A LlamaFactory dataset_info.json or a stage summary that is not a readable JSON object is named, not a
    traceback (and the dataset registry is not overwritten with it)."""
    from thinkj.data.table1 import table1_counts
    from thinkj.export.llamafactory import register_dataset

    info = tmp_path / "lf" / "dataset_info.json"
    info.parent.mkdir()
    info.write_bytes(damage)
    with pytest.raises(RecordError, match=rf"^{info}: "):
        register_dataset(info.parent, "thinkj_sft", {"file_name": "x.json"})
    assert info.read_bytes() == damage
    summary = tmp_path / "run" / "source.summary.json"
    summary.parent.mkdir()
    summary.write_bytes(damage)
    if damage == b"[]":  # a JSON list is not a summary: skipped, as any file without a stage
        assert all(ours is None for _, ours, _ in table1_counts(tmp_path / "run"))
        return
    with pytest.raises(RecordError, match=rf"^{summary}: "):
        table1_counts(tmp_path / "run")
