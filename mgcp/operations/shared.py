"""What the operations of one REM cycle can share: the same lessons vectorised once, the same notes
mined once. The engine makes one `CycleCache` per cycle and passes it to each operation; an
operation called without one computes afresh, so it behaves the same on its own and nothing
outlives a cycle. No module-level state.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")


class CycleCache:
    """Computed values by key, for one cycle. Values must be treated as read-only."""

    def __init__(self) -> None:
        self._values: dict = {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        if key not in self._values:
            self._values[key] = compute()
        return self._values[key]


def shared(cache: CycleCache | None, key: Hashable, compute: Callable[[], T]) -> T:
    """compute() once per key in `cache`; always afresh without one."""
    return compute() if cache is None else cache.get(key, compute)
