"""A name → object table shared by the prompt templates, reward presets, group rewards and inference backends.

Registering a name twice is an error (two modules silently fighting over one name is worse than a crash at
import), and an unknown name lists what is registered, so a typo in a config is fixed from the message alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from thinkj.errors import ThinkJError, UnknownNameError

T = TypeVar("T")


class Registry(dict[str, T]):
    def __init__(self, kind: str, items: Mapping[str, T] | None = None) -> None:
        super().__init__(items or {})
        self.kind = kind

    def add(self, name: str, item: T) -> T:
        if name in self:
            raise ThinkJError(f"{self.kind} {name!r} is already registered")
        self[name] = item
        return item

    def lookup(self, name: str) -> T:
        try:
            return self[name]
        except KeyError:
            raise UnknownNameError(f"unknown {self.kind} {name!r}; registered: {', '.join(sorted(self))}") from None
