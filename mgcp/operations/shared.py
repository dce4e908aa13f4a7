"""What the operations of one REM cycle can share: the same lessons vectorised once, the same notes
mined once. Alive only inside `cycle_cache()` (the engine opens one per cycle); outside it every
call computes afresh, so an operation run on its own behaves the same and nothing outlives a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
_cache: dict | None = None


@contextmanager
def cycle_cache() -> Iterator[None]:
    global _cache
    _cache = {}
    try:
        yield
    finally:
        _cache = None


def shared(key: Hashable, compute: Callable[[], T]) -> T:
    """compute() once per key inside `cycle_cache()`; the result must be treated as read-only."""
    if _cache is None:
        return compute()
    if key not in _cache:
        _cache[key] = compute()
    return _cache[key]
