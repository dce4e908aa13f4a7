"""The REM operations: one module per operation, each a pure function from data to findings.

No SQL, no I/O, no global state; deterministic (fixed seeds, stable sort orders). The engine feeds
them data from the store and stores what they return. networkx and python-louvain are imported only
in `community_detection`.

Shared finding conventions live here: the fingerprint (sha256 of operation, kind and the stable
subject identity) and small formatting helpers.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from datetime import datetime, timezone

from mgcp import text
from mgcp.models import Lesson
from mgcp.operations.shared import CycleCache, shared


def fingerprint(operation: str, kind: str, identity: str) -> str:
    return hashlib.sha256(f"{operation}|{kind}|{identity}".encode()).hexdigest()


def subject_identity(subject: dict[str, int]) -> str:
    """Sorted lesson ids with their versions: a changed version gives a new identity."""
    return ",".join(f"{lesson_id}@{version}" for lesson_id, version in sorted(subject.items()))


def subject_of(*lessons: Lesson) -> dict[str, int]:
    return {lesson.id: lesson.version for lesson in lessons}


def parse_time(value: str | None) -> datetime | None:
    """An ISO-8601 timestamp as an aware UTC datetime (naive values are taken as UTC)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)


def lesson_text(lesson: Lesson) -> str:
    """What similarity compares: trigger, action and tags."""
    return " ".join([lesson.trigger or "", lesson.action or "", " ".join(lesson.tags)])


def copies(lessons: list[Lesson], cache: CycleCache | None = None) -> dict[str, tuple[str, ...]]:
    """The lessons whose action another lesson also has, word for word once normalised (the same
    rule copied into two places), each with that normalised action: equal values are copies."""
    def compute():
        groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for lesson in lessons:
            key = tuple(text.stems(text.terms(lesson.action)))
            if key:
                groups[key].append(lesson.id)
        return {lesson_id: key for key, ids in groups.items() if len(ids) > 1 for lesson_id in ids}

    return shared(cache, ("copies", tuple((lesson.id, lesson.action) for lesson in lessons)), compute)
