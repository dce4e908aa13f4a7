"""Reading reinforced patterns: the list (`patterns list`) and one pattern's explanation
(`patterns explain`), with their arguments checked. Surfaces call these and only format.
"""

from __future__ import annotations

from datetime import datetime, timezone

from mgcp.config import PATTERN_CATEGORIES
from mgcp.errors import InvalidInputError
from mgcp.models import PatternExplanation, ReinforcedPattern
from mgcp.persistence.store import Store
from mgcp.validation import numeral

MAX_LIMIT = 10_000


def check_since(since: str | None) -> str | None:
    """An ISO-8601 date or timestamp as the UTC timestamp patterns are compared with."""
    if since is None:
        return None
    try:
        parsed = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(f"invalid --since {since!r}; allowed: an ISO-8601 date or time, "
                                "such as 2026-04-27 or 2026-04-27T08:00:00Z") from None
    parsed = parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)
    return parsed.isoformat()


def check_kinds(kinds: list[str] | None) -> list[str] | None:
    """Kinds given as repeated or comma-separated values, each a pattern category."""
    if not kinds:
        return None
    named = [k.strip() for value in kinds for k in value.split(",") if k.strip()]
    wrong = [k for k in named if k not in PATTERN_CATEGORIES]
    if wrong or not named:
        raise InvalidInputError(f"invalid --kind {(wrong or [''])[0]!r}; allowed: {', '.join(PATTERN_CATEGORIES)}")
    return list(dict.fromkeys(named))


async def list_patterns(store: Store, limit: int = 50, kinds: list[str] | None = None,
                        since: str | None = None) -> list[ReinforcedPattern]:
    """Reinforced patterns, highest count first."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"invalid --limit {limit}; allowed: a whole number from 1 to {MAX_LIMIT}")
    return await store.patterns.list(limit, check_kinds(kinds), check_since(since))


async def explain(store: Store, ident: str) -> PatternExplanation:
    """A pattern (by its id, or by the id of the lesson it reinforces): count, provenance with
    each source described, canonical text, and the lessons superseded by its canonical lesson.
    PatternNotFoundError (exit 1) for an unknown or unreinforced id."""
    pattern = await store.patterns.get(ident)
    lesson = None
    if pattern.lesson_id and await store.lessons.exists(pattern.lesson_id):
        lesson = await store.lessons.get(pattern.lesson_id)
    paths = await store.patterns.project_paths()
    sources = []
    for ref in pattern.derived_from:
        kind, _, rest = ref.partition(":")
        if kind == "lesson":
            source = {"ref": ref, "lesson": rest}
            if await store.lessons.exists(rest):
                member = await store.lessons.get(rest)
                source.update(status=member.status.value, created_at=member.created_at)
            else:
                source["status"] = "missing"
        else:
            project_id, _, session = rest.rpartition(":")
            source = {"ref": ref, "project_id": project_id, "project": paths.get(project_id, project_id),
                      "session": int(session) if numeral(session) else session}
        sources.append(source)
    canonical_text = lesson.action if lesson is not None and pattern.category == "lesson" else pattern.text
    members = await store.patterns.superseded_into(pattern.lesson_id) if pattern.category == "lesson" else []
    return PatternExplanation(pattern=pattern, canonical_text=canonical_text,
                              lesson_status=lesson.status.value if lesson else None,
                              sources=sources, members=members)
