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
    """Computed values by key, for one cycle. Values must be treated as read-only.

    `progress`, when set, hears how far the long loop of the running operation has come (a
    fraction from 0 to 1): `tick(done, total)` passes it on about once per percent."""

    def __init__(self, progress: Callable[[float], None] | None = None) -> None:
        self._values: dict = {}
        self.progress = progress

    def tick(self, done: int, total: int) -> None:
        if self.progress is not None and total and done % max(1, total // 100) == 0:
            self.progress(done / total)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        if key not in self._values:
            self._values[key] = compute()
        return self._values[key]


def shared(cache: CycleCache | None, key: Hashable, compute: Callable[[], T]) -> T:
    """compute() once per key in `cache`; always afresh without one."""
    return compute() if cache is None else cache.get(key, compute)


def ticker(cache: CycleCache | None) -> Callable[[int, int], None]:
    """`cache.tick`, or a no-op without a cache."""
    return cache.tick if cache is not None else (lambda done, total: None)
