"""Reinforcement: the rules shared by pattern reinforcement and ranking. Pure, stdlib only.

- `normalize`: a text's identity for clustering: trimmed, lower-cased, whitespace collapsed, its
  first 200 characters (a long text with a stable opening still clusters with its variants).
- `cluster_key`: `category::normalized text`; the category keeps a decision, a note and a lesson
  with the same words apart.
- `reinforcement_boost`: what a reinforced lesson adds to its ranking score,
  min(max_boost, weight x reinforcement_count); 0 for a lesson never reinforced.
"""

from __future__ import annotations

import hashlib
import re

DERIVED_VIA = "pattern-reinforcement"
KEY_LENGTH = 200
MIN_COUNT_RANGE = (2, 1000)  # a cluster of one is no pattern; larger minimums are typos
_SPACE = re.compile(r"\s+")


def normalize(text: str | None) -> str:
    return _SPACE.sub(" ", (text or "").strip().lower())[:KEY_LENGTH]


def cluster_key(category: str, text: str | None) -> str:
    return f"{category}::{normalize(text)}"


def pattern_id(key: str) -> str:
    """A pattern's id: stable for its cluster key."""
    return "pat-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def min_count(value: int) -> int:
    """The configured minimum cluster size, clamped to MIN_COUNT_RANGE."""
    low, high = MIN_COUNT_RANGE
    return min(max(int(value), low), high)


def reinforcement_boost(count: int, weight: float, max_boost: float) -> float:
    """The additive ranking boost of a lesson reinforced `count` times."""
    if count <= 0:
        return 0.0
    return min(max_boost, weight * count)
