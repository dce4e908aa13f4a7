"""Reinforcement: the rules shared by pattern reinforcement and ranking. Pure, stdlib only.

- `normalize`: a text's identity for clustering: trimmed, lower-cased, whitespace collapsed, its
  first 200 characters (a long text with a stable opening still clusters with its variants).
- `identity`: a whole text's identity as a copy: NFKC, case folded, its words only, single spaces
  ("Use WAL-mode!" and "use wal mode" are one text). It is the rule write-time dedup applies
  (mgcp.quality.normalized), so that what REM calls a copy is what the write gate calls one.
- `differences`: how a lesson differs from the kept one, under `identity`: its trigger, its action
  (after the first 200 characters when their cluster keys agree). None of them: a true copy.
- `cluster_key`: `category::normalized text`; the category keeps a decision, a note and a lesson
  with the same words apart.
- `reinforcement_boost`: what a reinforced lesson adds to its ranking score,
  min(max_boost, weight x reinforcement_count); 0 for a lesson never reinforced.
"""

from __future__ import annotations

import re

DERIVED_VIA = "pattern-reinforcement"
KEY_LENGTH = 200
MIN_COUNT_RANGE = (2, 1000)  # a cluster of one is no pattern; larger minimums are typos
_WORDS = re.compile(r"[^\W_]+")


def normalize(text: str | None) -> str:
    """The text of a cluster key: `normalize_whole`, its first KEY_LENGTH characters."""
    return normalize_whole(text)[:KEY_LENGTH]


def normalize_whole(text: str | None) -> str:
    """Lower-cased, whitespace collapsed, without the length limit."""
    # str.split's whitespace is the regex \s of Unicode strings (and lower-casing neither makes nor
    # removes any): the same as collapsing every run of it into one space.
    return " ".join((text or "").lower().split())


def identity(text: str | None) -> str:
    import unicodedata  # not on the SessionStart hook's path

    return " ".join(_WORDS.findall(unicodedata.normalize("NFKC", text or "").casefold()))


def differences(kept_trigger: str, kept_action: str, trigger: str, action: str) -> list[str]:
    """What differs between a lesson (trigger, action) and the kept one; [] for a true copy."""
    found = []
    if identity(trigger) != identity(kept_trigger):
        found.append("trigger")
    if identity(action) != identity(kept_action):
        found.append(f"action after the first {KEY_LENGTH} characters"
                     if normalize(action) == normalize(kept_action) else "action")
    return found


def cluster_key(category: str, text: str | None) -> str:
    return whole_key(category, normalize_whole(text))


def whole_key(category: str, whole: str) -> str:
    """The cluster key of a text already `normalize_whole`d."""
    return f"{category}::{whole[:KEY_LENGTH]}"


def key_of(category: str, text: str | None) -> str | None:
    """The text's cluster key, or None when it normalizes to nothing."""
    normalized = normalize(text)
    return f"{category}::{normalized}" if normalized else None


def pattern_id(key: str) -> str:
    """A pattern's id: stable for its cluster key."""
    import hashlib  # here, not at the top: ranking (on the SessionStart hook's path) imports this module

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
