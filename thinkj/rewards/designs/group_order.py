"""The order in which a group judge sees a group's completions: fixed by their texts, never by their arrival.

verl's reward loop hands a group's rollouts to ``adapters/verl_group.py`` as they finish, an order that changes from
run to run; TRL hands them over in sampling order. A judge that sees the members in either order gives rewards that
depend on it: a knockout bracket, the anchor of ``anchor=first`` (``pairwise_group``), the position of each reply
in a listwise prompt (``grm``, where the judge's position bias follows the reply). Sorting by the SHA-256 of the
texts is as good as a random draw with respect to quality and the same under both engines and in every run.
"""

from __future__ import annotations

import hashlib


def content_order(texts: list[str]) -> list[int]:
    """Member indices sorted by the SHA-256 of their texts; position breaks equal texts."""
    digests = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
    return sorted(range(len(texts)), key=lambda i: (digests[i], i))
