"""A named table that a module fills by registering and readers look up by name.

The format, op, reference and knob registries are each one of these, so looking something up
behaves the same everywhere: an unknown name is a ``ValueError`` listing the known ones, and a
name is registered once (registering the same object again is harmless, as on a re-import).
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """``kind`` names what the table holds in messages ("format", "op", ...)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name``; a different item under a taken name is a ``ValueError``."""
        if name in self._items and self._items[name] is not item:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        return item

    def get(self, name: str, *, hint: str = "") -> T:
        """The item registered as ``name``; a ``ValueError`` listing the known names otherwise."""
        if name not in self._items:
            known = ", ".join(sorted(self._items)) or "none"
            raise ValueError(f"unknown {self.kind} {name!r}; known: {known}{hint}")
        return self._items[name]

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._items)

    def items(self) -> list[T]:
        return list(self._items.values())
