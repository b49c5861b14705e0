"""Decontamination: training rows that hold a benchmark's items are found, reported and dropped.

    thinkj data decontaminate runs/ds/dedup/kept.jsonl runs/ds/decontaminate/kept.jsonl \\
        --against rewardbench --against rmbench=../shared/data/rm-bench --against autoj=testdata_pairwise.jsonl
    thinkj data overlap train.jsonl --against autoj=testdata_pairwise.jsonl   # look only: rows x benchmarks

Every training row's prompt and each of its two responses is checked against the prompt of every benchmark item,
by three rules (the first that fires names the match):

* ``exact``: the texts are equal once normalised (case, whitespace and punctuation ignored; :mod:`ngrams`).
* ``ngram``: the texts share a 13-word n-gram, the rule of GPT-3 (Brown et al. 2020, Appendix C, "Initial
  training set filtering": any 13-gram overlap) and of lm-evaluation-harness's decontamination
  (``docs/decontamination.md``, ``lm_eval/decontamination/janitor.py``: 13-grams of normalised text). A benchmark
  prompt too short to hold a 13-gram counts when the training text holds it whole, if it has at least 8 words --
  GPT-3's overlap analysis (same appendix) lowers N for short examples but never below 8, "due to spurious
  collisions at lower values of N". A prompt of fewer than 8 words is left to the exact and embedding rules.
* ``embedding``: cosine similarity at or above ``threshold`` between the text and its nearest benchmark prompt,
  embedded by the dedup stage's encoder (the same names as ``data_prep.dedup --model``) and searched exactly,
  block by block (:func:`nearest`); ``encoder="none"`` turns the rule off.

The exact and n-gram rules are hash lookups over all rows at once (no loop over row x item pairs); a hash hit is
confirmed on the words before it is reported. A benchmark whose data cannot be read is an error naming it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from thinkj.data.dedup import DEFAULT_BLOCK, DEFAULT_CHUNK, check_encoder, normalise_rows
from thinkj.data.ngrams import NgramIndex, shared_ngrams, words
from thinkj.errors import ThinkJError

NGRAM = 13  # GPT-3 Appendix C and lm-evaluation-harness's Janitor (ngram_n=13)
MIN_WHOLE = 8  # GPT-3 Appendix C: the smallest N used for short examples
DEFAULT_THRESHOLD = 0.95  # our choice: above the 0.9 of diversity dedup, so only near-copies count as the test item
DEFAULT_ENCODER = "minilm"  # the bundled all-MiniLM-L6-v2 (offline); the pipeline passes DEDUP_MODEL
ROW_CHUNK = 2048  # training rows hashed per numpy pass: bounds memory at ~ a few million words
RULES = ("exact", "ngram", "embedding")
PAIR_FIELDS = ("prompt", "response_a", "response_b")


@dataclass(frozen=True)
class BenchmarkPrompts:
    """The items of one benchmark named in ``--against``: what was read, from where, and its content digest."""

    name: str
    source: str
    fingerprint: str | None  # sha256 of a local file or folder; None for a hub set (named by ``source``)
    items: list[tuple[str, str]]  # (item id, prompt text)

    @property
    def items_sha256(self) -> str:
        """A digest of the checked (item id, prompt) list: names what was checked even for a hub set."""
        digest = hashlib.sha256()
        for item, prompt in self.items:
            digest.update(f"{item}\0{prompt}\0".encode())
        return f"sha256:{digest.hexdigest()}"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "fingerprint": self.fingerprint, "items": len(self.items),
                "items_sha256": self.items_sha256}


@dataclass(frozen=True)
class Match:
    """One training text that holds one benchmark item, by the first rule that caught it."""

    row: str          # training row id
    line: int         # its row number in the input (from 1)
    benchmark: str
    item: str         # benchmark item id
    rule: str         # exact | ngram | embedding
    field: str        # which text of the row: prompt | response_a | response_b (or a column name)
    overlap: float    # exact: 1.0; ngram: share of the item's n-grams found; embedding: cosine similarity
    shared_ngrams: int | None = None  # ngram rule: distinct n-grams of the item found in the text

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def parse_against(values: Sequence[str]) -> list[tuple[str, str | None]]:
    """``NAME`` or ``NAME=DATA`` items, each a benchmark of the evaluation registry, each named once."""
    from thinkj.evaluation.registry import get_benchmark

    if not values:
        raise ThinkJError("--against: name at least one benchmark (NAME or NAME=DATA)")
    out: list[tuple[str, str | None]] = []
    for value in values:
        name, sep, data = value.partition("=")
        if sep and not data:
            raise ThinkJError(f"--against {value!r}: give the data after '=' (or only the name for its hub set)")
        get_benchmark(name)  # an unknown name is one line listing the registered ones
        if name in (n for n, _ in out):
            raise ThinkJError(f"--against: benchmark {name!r} is given twice")
        out.append((name, data or None))
    return out


def read_benchmark(name: str, data: str | None) -> BenchmarkPrompts:
    """The prompts of benchmark ``name`` from ``data`` (default: its hub set). Anything that stops them being read
    -- a missing file, a bad row, no network for a hub set -- is one error naming the benchmark: a benchmark that
    was not read must never pass as one that was checked and found clean."""
    from thinkj.evaluation.registry import get_benchmark, load_prompts
    from thinkj.fingerprint import fingerprint

    source = data if data is not None else get_benchmark(name).default_source
    try:
        items = load_prompts(name, data)
    except Exception as err:  # noqa: BLE001 -- every failure to read (OS, hub, parse) must name the benchmark
        reason = " ".join(str(err).split()) or type(err).__name__
        raise ThinkJError(f"--against {name}: cannot read its data ({source}): {reason[:300]}") from None
    if not items:
        raise ThinkJError(f"--against {name}: its data ({source}) holds no items")
    local = source is not None and Path(source).exists()
    return BenchmarkPrompts(name, str(source), fingerprint(source) if local else None, items)


def nearest(queries: np.ndarray, refs: np.ndarray, *, block: int = DEFAULT_BLOCK,
            chunk: int = DEFAULT_CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the highest cosine similarity to any reference row and that row's index: exact, in
    ``block`` x ``chunk`` matrix products (the dedup stage's layout), never the whole query x reference matrix."""
    q, r = normalise_rows(queries), normalise_rows(refs)
    best = np.full(q.shape[0], -np.inf, dtype=np.float32)
    where = np.zeros(q.shape[0], dtype=np.int64)
    for start in range(0, q.shape[0], block):
        qb = q[start:start + block]
        for c0 in range(0, r.shape[0], chunk):
            sims = qb @ r[c0:c0 + chunk].T
            arg = sims.argmax(axis=1)
            top = sims[np.arange(sims.shape[0]), arg]
            better = top > best[start:start + qb.shape[0]]
            best[start:start + qb.shape[0]][better] = top[better]
            where[start:start + qb.shape[0]][better] = c0 + arg[better]
    return best, where


class Checker:
    """The benchmarks' prompts indexed once for the three rules; :meth:`check` runs them over training texts."""

    def __init__(self, benchmarks: Sequence[BenchmarkPrompts], *, encoder: str | None = DEFAULT_ENCODER,
                 threshold: float = DEFAULT_THRESHOLD, n: int = NGRAM, min_whole: int = MIN_WHOLE) -> None:
        from thinkj.checks import check_range

        check_range("--threshold", threshold, low=0, low_open=True, high=1)
        self.benchmarks, self.n, self.min_whole, self.threshold = list(benchmarks), n, min_whole, threshold
        self.encoder = None if encoder in (None, "", "none") else encoder
        check_encoder("--encoder", self.encoder)
        self.refs = [(b, item, prompt) for b, bench in enumerate(self.benchmarks) for item, prompt in bench.items]
        self.ref_words = [words(prompt) for _, _, prompt in self.refs]
        self.exact: dict[str, list[int]] = {}
        for ref, tokens in enumerate(self.ref_words):
            if tokens:  # an empty prompt equals every empty text: no evidence of anything
                self.exact.setdefault(" ".join(tokens), []).append(ref)
        # n-grams of long prompts; a short prompt (min_whole..n-1 words) is one n-gram of its own length
        by_length: dict[int, list[tuple[int, list[str]]]] = {}
        for ref, tokens in enumerate(self.ref_words):
            if len(tokens) >= min_whole:
                by_length.setdefault(min(len(tokens), n), []).append((ref, tokens))
        self.indexes = [NgramIndex.build(length, refs) for length, refs in sorted(by_length.items())]
        self._ref_vectors: np.ndarray | None = None

    def rules(self) -> dict[str, Any]:
        """The settings of the rules, as the summary records them."""
        return {"exact": "normalised text equal (case, whitespace, punctuation ignored)",
                "ngram": {"n": self.n, "short_prompts_whole_from_words": self.min_whole},
                "embedding": None if self.encoder is None else {"encoder": self.encoder, "threshold": self.threshold}}

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        from thinkj.data.dedup import embed_texts

        model = None if self.encoder == DEFAULT_ENCODER else self.encoder
        return embed_texts(list(texts), model, show_progress=False)

    def _text_matches(self, texts: Sequence[str]) -> dict[int, dict[int, tuple[str, float, int | None]]]:
        """text index -> {reference index: (rule, overlap, shared n-grams)}, the first rule that fires per pair."""
        found: dict[int, dict[int, tuple[str, float, int | None]]] = {}
        for start in range(0, len(texts), ROW_CHUNK):
            chunk = [words(t) for t in texts[start:start + ROW_CHUNK]]
            for i, tokens in enumerate(chunk):
                for ref in self.exact.get(" ".join(tokens), ()) if tokens else ():
                    found.setdefault(start + i, {})[ref] = ("exact", 1.0, None)
            for index in self.indexes:
                for i, refs in index.candidates(chunk).items():
                    hits = found.setdefault(start + i, {})
                    for ref in refs:
                        if ref in hits:
                            continue
                        shared, total = shared_ngrams(chunk[i], self.ref_words[ref], index.n)
                        if shared:  # confirmed on the words: a hash collision is never a match
                            hits[ref] = ("ngram", round(shared / total, 4), shared)
        if self.encoder is not None and texts and self.refs:
            if self._ref_vectors is None:
                self._ref_vectors = self._embed([prompt for _, _, prompt in self.refs])
            best, where = nearest(self._embed(texts), self._ref_vectors)
            for i in np.flatnonzero(best >= np.float32(self.threshold)).tolist():
                hits = found.setdefault(i, {})
                hits.setdefault(int(where[i]), ("embedding", round(float(best[i]), 4), None))
        return {i: hits for i, hits in found.items() if hits}

    def check(self, rows: Sequence[tuple[str, int, dict[str, str]]]) -> list[Match]:
        """Every match of ``rows`` -- (row id, row number, {field: text}) -- in row, field and item order."""
        keys = [(r, name) for r, (_, _, fields) in enumerate(rows) for name in fields]
        texts = [rows[r][2][name] for r, name in keys]
        matches = []
        for t, hits in sorted(self._text_matches(texts).items()):
            r, name = keys[t]
            row_id, line, _ = rows[r]
            for ref, (rule, overlap, shared) in sorted(hits.items()):
                b, item, _ = self.refs[ref]
                matches.append(Match(row_id, line, self.benchmarks[b].name, item, rule, name, overlap, shared))
        return matches


def rule_options(encoder: str | None, threshold: float | None) -> dict[str, Any]:
    """The embedding rule's options with the defaults filled in (a command line leaves them unset)."""
    return {"encoder": DEFAULT_ENCODER if encoder is None else encoder,
            "threshold": DEFAULT_THRESHOLD if threshold is None else threshold}


def pair_fields(pair: Any) -> dict[str, str]:
    """The texts of a PreferencePair that are checked: its prompt (every turn) and its two responses."""
    from thinkj.evaluation.registry import prompt_text

    return {"prompt": prompt_text(pair.messages), "response_a": pair.response_a, "response_b": pair.response_b}


def summarise(matches: Sequence[Match], benchmarks: Sequence[BenchmarkPrompts], n_rows: int) -> dict[str, Any]:
    """Counts per benchmark and per rule: rows with a match and items held by some row."""
    out: dict[str, Any] = {"rows_checked": n_rows, "rows_matched": len({m.line for m in matches}), "matches": len(matches),
                           "rows_by_rule": {rule: len({m.line for m in matches if m.rule == rule}) for rule in RULES},
                           "benchmarks": []}
    for bench in benchmarks:
        mine = [m for m in matches if m.benchmark == bench.name]
        out["benchmarks"].append({**bench.describe(), "rows_matched": len({m.line for m in mine}),
                                  "items_matched": len({m.item for m in mine}),
                                  "rows_by_rule": {rule: len({m.line for m in mine if m.rule == rule}) for rule in RULES}})
    return out


def read_against(against: Sequence[str]) -> list[BenchmarkPrompts]:
    """Every benchmark of ``--against`` read, before any training row is looked at."""
    return [read_benchmark(name, data) for name, data in parse_against(against)]


def run_decontaminate(in_path: str | os.PathLike, out_path: str | os.PathLike, against: Sequence[str], *,
                      report_only: bool = False, encoder: str | None = DEFAULT_ENCODER,
                      threshold: float = DEFAULT_THRESHOLD, report_path: str | os.PathLike | None = None,
                      summary_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Check every pair of ``in_path`` against the benchmarks; write the kept pairs (all with ``report_only``),
    the report (one JSON line per match) and, last, the summary. Returns the summary."""
    from thinkj.checks import check_distinct_paths, check_input_file, check_output_file
    from thinkj.records import load_pairs, write_json, write_jsonl

    check_input_file("IN", in_path)
    check_distinct_paths("IN", in_path, "OUT", out_path)
    check_output_file("OUT", out_path)
    out_path = Path(out_path)
    report_path = Path(report_path) if report_path else out_path.with_suffix(".contamination.jsonl")
    check_output_file("--report", report_path)
    check_distinct_paths("OUT", out_path, "--report", report_path)
    benchmarks = read_against(against)
    checker = Checker(benchmarks, encoder=encoder, threshold=threshold)
    pairs = load_pairs(in_path)
    matches = checker.check([(p.id, i, pair_fields(p)) for i, p in enumerate(pairs, start=1)])
    dropped = set() if report_only else {m.line for m in matches}
    write_jsonl(report_path, (m.to_dict() for m in matches))
    write_jsonl(out_path, (p for i, p in enumerate(pairs, start=1) if i not in dropped))
    encoder_name = None
    if checker.encoder is not None:
        from thinkj.inference.identity import model_identity

        encoder_name = "all-MiniLM-L6-v2 (bundled)" if checker.encoder == DEFAULT_ENCODER \
            else model_identity(checker.encoder)
    summary = {"stage": "decontaminate", "input": str(in_path), "output": str(out_path), "report": str(report_path),
               "n_in": len(pairs), "n_out": len(pairs) - len(dropped), "removed": len(dropped),
               "report_only": report_only, "rules": {**checker.rules(), "encoder_identity": encoder_name},
               **summarise(matches, benchmarks, len(pairs)),
               "removed_ids": [pairs[i - 1].id for i in sorted(dropped)][:1000]}
    write_json(summary_path or out_path.with_suffix(".summary.json"), summary)
    return summary
