"""duplicate_detection: pairs of active lessons that say the same thing.

Similarity is the cosine of TF-IDF vectors over each lesson's trigger, action and tags, found for all
pairs at or above `review_threshold` by prefix-filtered all-pairs search (see
`mgcp.operations.similarity`: exact, sub-quadratic in practice, memory linear in the text). Word order
does not count, so reordered clauses stay near 1.0; a few swapped, added or removed words cost a
little each; distinct lessons on one topic share their topic words but not the rest, and stay well
below 0.80.

Findings, strongest first, at most `max_findings`:
- `duplicate_merge` (similarity >= merge_threshold): recommended "merge".
- `duplicate_review` (review_threshold <= similarity < merge_threshold): recommended "keep_both".
Each carries data {"similarity", "canonical", "other", "lessons": {id: {trigger, action, usage_count,
version}}}; canonical is the one to keep: more usage, then more versions, then older, then smaller id.
"""

from __future__ import annotations

from mgcp.models import FindingOption, Lesson, RemFinding
from mgcp.operations import fingerprint, lesson_text, parse_time, subject_identity, subject_of
from mgcp.operations.shared import CycleCache
from mgcp.operations.similarity import LexicalBackend, SimilarityBackend
from mgcp.text import shorten

OPERATION = "duplicate_detection"


def run(lessons: list[Lesson], settings: dict,
        backend: SimilarityBackend | None = None, cache: CycleCache | None = None) -> list[RemFinding]:
    backend = backend or LexicalBackend(cache)
    ordered = sorted(lessons, key=lambda lesson: lesson.id)
    by_id = {lesson.id: lesson for lesson in ordered}
    docs = {lesson.id: lesson_text(lesson) for lesson in ordered}
    merge_at = float(settings["merge_threshold"])
    review_at = float(settings["review_threshold"])
    pairs = backend.pairs(docs, review_at)
    pairs.sort(key=lambda p: (-round(p[2], 9), min(p[0], p[1]), max(p[0], p[1])))
    limit = int(settings.get("max_findings", 50))
    return [_finding(by_id[a], by_id[b], s, merge_at) for a, b, s in pairs[:limit]]


def canonical_order(a: Lesson, b: Lesson) -> tuple[Lesson, Lesson]:
    """(keep, other): more usage, then more versions, then older, then the smaller id."""
    def key(lesson: Lesson):
        created = parse_time(lesson.created_at)
        return (-lesson.usage_count, -lesson.version, created.timestamp() if created else float("inf"),
                lesson.id)
    first, second = sorted([a, b], key=key)
    return first, second


def _reason(keep: Lesson, other: Lesson) -> str:
    if keep.usage_count != other.usage_count:
        return f"retrieved {keep.usage_count} times vs {other.usage_count}"
    if keep.version != other.version:
        return f"v{keep.version} vs v{other.version}"
    if keep.created_at != other.created_at:
        return "older"
    return "first by id"


def _finding(a: Lesson, b: Lesson, similarity: float, merge_at: float) -> RemFinding:
    keep, other = canonical_order(a, b)
    kind = "duplicate_merge" if similarity >= merge_at else "duplicate_review"
    subject = subject_of(keep, other)
    lines = [
        f"Found potential duplicate lessons (similarity: {similarity:.2f}):",
        "",
        f'1. "{keep.id}" - {shorten(keep.trigger, 100)}',
        f"   Action: {shorten(keep.action, 160)}",
        f"   (retrieved {keep.usage_count} times, v{keep.version})",
        f'2. "{other.id}" - {shorten(other.trigger, 100)}',
        f"   Action: {shorten(other.action, 160)}",
        f"   (retrieved {other.usage_count} times, v{other.version})",
        "",
        f'A merge keeps "{keep.id}" ({_reason(keep, other)}) and supersedes "{other.id}".',
    ]
    options = [
        FindingOption(label="Merge into one lesson",
                      description=f'Keep "{keep.id}" and mark "{other.id}" superseded by it',
                      action="merge"),
        FindingOption(label="Keep both - they're different enough",
                      description="Remember this answer; not raised again unless one of them changes",
                      action="keep_both"),
        FindingOption(label="Delete one (specify which)",
                      description="Soft-delete one of the two; history is kept",
                      action="delete_one",
                      needs_input=f'Which lesson should be deleted: "{keep.id}" or "{other.id}"?'),
        FindingOption(label="Skip for now", description="Leave this finding pending", action="skip"),
    ]
    title = (f'Potential duplicates (similarity {similarity:.2f}): "{keep.id}" and "{other.id}"'
             if kind == "duplicate_merge" else
             f'Similar lessons to review (similarity {similarity:.2f}): "{keep.id}" and "{other.id}"')
    return RemFinding(
        operation=OPERATION, kind=kind, title=title, description="\n".join(lines), options=options,
        recommended=1 if kind == "duplicate_merge" else 2,
        data={
            "similarity": round(similarity, 4), "canonical": keep.id, "other": other.id,
            "lessons": {lesson.id: {"trigger": lesson.trigger, "action": lesson.action,
                                    "usage_count": lesson.usage_count, "version": lesson.version}
                        for lesson in (keep, other)},
        },
        subject=subject,
        fingerprint=fingerprint(OPERATION, kind, subject_identity(subject)),
    )
