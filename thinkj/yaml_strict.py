"""Read the YAML a user writes (sweep specs, model profiles, stage configs, ``--set`` values) strictly.

``yaml.safe_load`` accepts things that later turn into a silently wrong value or a traceback far from the file:
a key written twice (the last one wins without a word), an alias that refers to itself or expands into millions
of nodes (``json.dumps`` of it never ends), nesting deep enough to exhaust Python's recursion, an integer past
Python's int-string limit (a bare ``ValueError``). Here each is a :class:`~thinkj.records.RecordError` naming the
file (and line, where YAML knows it).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import yaml

from thinkj.records import RecordError

MAX_NODES = 1_000_000  # values in a document, an alias counted each time it is used; far above any config
MAX_DEPTH = 100


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key written twice."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base" merges; its keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: construct_mapping says so with its position
            break
        if duplicate:
            raise yaml.constructor.ConstructorError("while reading a mapping", node.start_mark,
                                                    f"the key {key!r} is written twice", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _check_tree(data: Any, path: str | os.PathLike | None, line: int | None) -> None:
    """Every value visited once per path to it: a self-referencing or exploding alias stops at MAX_NODES."""
    stack, nodes = [(data, 1)], 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise RecordError(f"not a usable document: more than {MAX_NODES:,} values once its aliases are "
                              "expanded (an alias that refers to itself?)", path=path, line=line)
        if depth > MAX_DEPTH:
            raise RecordError(f"not a usable document: nested deeper than {MAX_DEPTH} levels", path=path, line=line)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for pair in item.items() for v in pair)
        elif isinstance(item, (list, tuple, set)):
            stack.extend((v, depth + 1) for v in item)


def parse_yaml(text: str, *, path: str | os.PathLike | None = None, line: int | None = None) -> Any:
    """A YAML document (or one ``--set`` value) or a RecordError naming ``path`` and the line of the problem."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - _StrictLoader is a SafeLoader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        raise RecordError(f"not valid YAML: {problem}", path=path,
                          line=mark.line + 1 if mark is not None and line is None else line) from None
    except RecursionError:
        raise RecordError("not valid YAML: nested too deeply", path=path, line=line) from None
    except ValueError as err:  # an integer past sys.get_int_max_str_digits()
        reason = (f"an integer longer than Python's limit of {sys.get_int_max_str_digits()} digits"
                  if "integer string conversion" in str(err) else " ".join(str(err).split()))
        raise RecordError(f"not a usable document: {reason}", path=path, line=line) from None
    _check_tree(data, path, line)
    return data


def read_yaml(path: str | os.PathLike) -> Any:
    """A YAML file read strictly (:func:`parse_yaml`); a folder or non-UTF-8 bytes are a RecordError too."""
    if os.path.isdir(path):
        raise RecordError("is a folder, expected a YAML file", path=path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except UnicodeDecodeError as err:
        raise RecordError(f"not UTF-8 text (byte {err.start}); a binary file?", path=path) from None
    return parse_yaml(text, path=path)
