"""Text normalisation and word n-gram matching by hashing, for the decontamination rules.

Normalisation follows the overlap rules of GPT-3 (Brown et al. 2020, Appendix C: "ignoring all punctuation,
whitespace, and casing") and lm-evaluation-harness's ``lm_eval/decontamination/janitor.py`` (lower case, the
punctuation deleted, words split on whitespace): :func:`words` case-folds, deletes every Unicode punctuation or
symbol character and splits on whitespace.

Matching is vectorised: every word becomes a 64-bit hash, the words of many texts are laid end to end in one
array, and the hash of every window of ``n`` words is computed for the whole array at once with ``n`` numpy
operations. Windows that cross a text boundary are masked out; the rest are looked up in a sorted array of the
reference n-gram hashes (``searchsorted``). No Python loop runs over n-grams or over (text, reference) pairs. A
hash hit only nominates a candidate: :func:`shared_ngrams` confirms it on the words themselves, so a hash
collision can never become a reported match.

Python's ``hash`` of a string is salted per process (``PYTHONHASHSEED``), which is fine here: both sides are
hashed in the same process and nothing hashed is stored.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier (2^64 / golden ratio): spreads each step of the fold


@functools.lru_cache(maxsize=1)
def _delete_table() -> dict[int, None]:
    """Every Unicode punctuation (P*) and symbol (S*) code point, mapped to deletion (built once, ~0.3 s)."""
    return {cp: None for cp in range(sys.maxunicode + 1)
            if unicodedata.category(chr(cp))[0] in "PS"}


def words(text: str) -> list[str]:
    """The normalised words of ``text``: case-folded, punctuation and symbols deleted, split on whitespace."""
    return text.casefold().translate(_delete_table()).split()


def normalised(text: str) -> str:
    """``text`` as the exact rule compares it: its normalised words joined by single spaces."""
    return " ".join(words(text))


def word_hashes(tokens: Iterable[str], count: int) -> np.ndarray:
    """One uint64 hash per word (``count`` words)."""
    return np.fromiter(map(hash, tokens), dtype=np.int64, count=count).view(np.uint64)


def window_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """The hash of every window of ``n`` consecutive words (``len - n + 1`` of them; none when shorter).

    A multiply-xor fold over the window, computed for all windows at once (uint64 arithmetic wraps)."""
    m = hashes.size - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    out = hashes[:m].copy()
    for k in range(1, n):
        np.multiply(out, _MIX, out=out)
        np.bitwise_xor(out, hashes[k:k + m], out=out)
    return out


@dataclass
class NgramIndex:
    """Reference n-grams of one length ``n``: their sorted hashes and which reference texts hold each."""

    n: int
    hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    owners: dict[int, list[int]] = field(default_factory=dict)  # hash -> reference indices (ascending)

    @classmethod
    def build(cls, n: int, references: Sequence[tuple[int, list[str]]]) -> NgramIndex:
        """Index the n-grams of each ``(reference index, words)``; a reference holding one n-gram twice counts once."""
        owners: dict[int, list[int]] = {}
        for ref, tokens in references:
            for h in np.unique(window_hashes(word_hashes(tokens, len(tokens)), n)).tolist():
                owners.setdefault(h, []).append(ref)
        hashes = np.fromiter(owners, dtype=np.uint64, count=len(owners))
        hashes.sort()
        return cls(n, hashes, owners)

    def candidates(self, texts: Sequence[list[str]]) -> dict[int, set[int]]:
        """text index -> reference indices sharing at least one n-gram hash with it (to be confirmed)."""
        if not self.hashes.size or not texts:
            return {}
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        total = int(lengths.sum())
        if total < self.n:
            return {}
        flat = word_hashes(chain.from_iterable(texts), total)
        windows = window_hashes(flat, self.n)
        doc = np.repeat(np.arange(len(texts)), lengths)[:windows.size]
        ends = np.cumsum(lengths)
        inside = np.arange(windows.size) + self.n <= ends[doc]  # the window does not run into the next text
        slot = np.minimum(np.searchsorted(self.hashes, windows), self.hashes.size - 1)
        hit = np.flatnonzero(inside & (self.hashes[slot] == windows))
        found: dict[int, set[int]] = {}
        for text, h in zip(doc[hit].tolist(), windows[hit].tolist()):
            found.setdefault(text, set()).update(self.owners[h])
        return found


def ngram_set(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The distinct n-grams of ``tokens`` (as word tuples)."""
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def shared_ngrams(text: Sequence[str], reference: Sequence[str], n: int) -> tuple[int, int]:
    """(distinct n-grams of ``reference`` found in ``text``, distinct n-grams of ``reference``), on the words."""
    ref = ngram_set(reference, n)
    return len(ref & ngram_set(text, n)), len(ref)
