"""The REM operations: one module per operation, each a pure function from data to findings.

No SQL, no I/O, no global state; deterministic (fixed seeds, stable sort orders). The engine feeds
them data from the store and stores what they return. networkx and python-louvain are imported only
in `community_detection`.

Shared finding conventions live here: the fingerprint (sha256 of operation, kind and the stable
subject identity), the cap on findings of one kind (`cap`: a diverse selection plus one summary of
the rest, with its bulk action) and small formatting helpers.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Hashable
from datetime import datetime, timezone
from itertools import chain
from operator import attrgetter

from mgcp import text
from mgcp.models import FindingOption, Lesson, RemFinding
from mgcp.operations.shared import CycleCache, shared, terms


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
    rule copied into two places), each with that normalised action (its words' stems, each word
    stemmed alone, those `text.stems` leaves out dropped): equal values are copies.

    The actions' words come as word ids (through the cache's `Reader` when it has one: the kept
    action corpus), each distinct word is stemmed once, and numpy finds the rows whose stems may
    repeat another row's (`sparse.repeated_rows`); only those few are compared as tuples."""
    def compute():
        import numpy as np

        from mgcp.operations import sparse

        lengths, ids, vocabulary = _words_of([lesson.action or "" for lesson in lessons], cache)
        stem_index: dict[str, int] = {}
        stem_of = np.array([stem_index.setdefault(s, len(stem_index)) if (s := "".join(text.stems([w]))) else -1
                            for w in vocabulary], dtype=np.int64)
        said = stem_of.take(ids)
        kept = np.flatnonzero(said >= 0)
        # where each row's kept words start: how many kept words come before its first word
        start = np.searchsorted(kept, sparse.starts(lengths))
        said = said.take(kept)
        stems = list(stem_index)
        groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for r in sparse.repeated_rows(start, said).tolist():
            groups[tuple(stems[s] for s in said[start[r]:start[r + 1]].tolist())].append(lessons[r].id)
        return {lesson_id: key for key, ids in groups.items() if len(ids) > 1 for lesson_id in ids}

    return shared(cache, ("copies", tuple(map(attrgetter("id"), lessons)), tuple(map(attrgetter("action"), lessons))),
                  compute)


def _words_of(docs: list[str], cache: CycleCache | None):
    """(lengths, ids, vocabulary): the words of each of `docs` (`text.terms`) as ids into the
    vocabulary, one document after the other; from the cache's `Reader` when it has one."""
    import numpy as np

    def read(i: int) -> tuple[str, ...]:
        return terms(cache, docs[i])

    if cache is not None and cache.reader is not None:
        corpus = cache.reader.corpus(docs, read)
        return corpus.lengths, corpus.ids, corpus.vocabulary
    words = [read(i) for i in range(len(docs))]
    index: dict[str, int] = {}
    ids = np.fromiter((index.setdefault(w, len(index)) for w in chain.from_iterable(words)), dtype=np.int64)
    return np.fromiter(map(len, words), dtype=np.int64, count=len(words)), ids, list(index)


def draft_options(draft_id: str) -> list[FindingOption]:
    """The options of a finding that offers a draft lesson (data["draft"]): draft it, say it is the
    project's own context, or skip."""
    return [
        FindingOption(label="Yes, draft a lesson for me to review", action="draft_lesson",
                      description=f'Create lesson "{draft_id}" from the draft (you can edit it first)',
                      needs_input="Edits to the draft (JSON with any of id, trigger, action, rationale, "
                                  "tags), or empty to use it as is"),
        FindingOption(label="No, this is project-specific context", action="project_specific",
                      description="Not reusable; remember this answer"),
        FindingOption(label="Skip for now", action="skip", description="Leave this finding pending"),
    ]


# The answer a summary can give to all the findings it holds, per kind: additive links, and merges
# of copies (the same rule word for word). Other kinds are summarised without a bulk answer.
BULK_ACTIONS = {"orphan": "link_suggested", "unlinked_cluster": "link_all", "duplicate_merge": "merge"}
BULK_WORDS = {"link_suggested": "link each orphan to its suggested lessons",
              "link_all": "link the lessons of each cluster", "merge": "merge each set of copies"}
PLURAL = {"orphan": "orphan lessons", "unlinked_cluster": "unlinked clusters",
          "duplicate_merge": "duplicate pairs", "duplicate_review": "pairs of similar lessons"}


def cap(findings: list[RemFinding], limit: int, group_of: Callable[[RemFinding], Hashable],
        settled: frozenset[str] = frozenset()) -> list[RemFinding]:
    """At most `limit` findings of each kind, plus one summary finding per kind that had more.

    `settled`: fingerprints of findings already answered "don't ask again" (alone, or as one of a
    summary's). They are left out before the cap, so answering the shown ones makes room for the
    next ones in a later run.

    Those shown are spread over the groups `group_of` names (a tag, a cluster's topic), each group's
    strongest first, in turns: a bulk import of one source does not fill the review with it. They
    keep their order (strongest first). The summary counts the rest and offers BULK_ACTIONS' answer
    for all of them at once (one action, undone in one step)."""
    kinds: dict[str, list[RemFinding]] = defaultdict(list)
    for finding in findings:
        if finding.fingerprint not in settled:
            kinds[finding.kind].append(finding)
    out: list[RemFinding] = []
    for kind, found in kinds.items():
        if len(found) <= limit:
            out += found
            continue
        chosen = _spread(found, max(limit, 0), group_of)
        out += [f for i, f in enumerate(found) if i in chosen]
        out.append(summary(kind, [f for i, f in enumerate(found) if i not in chosen]))
    return out


def _spread(found: list[RemFinding], limit: int, group_of) -> set[int]:
    """Indexes of `limit` findings taken in turns from each group, groups in order of their best."""
    groups: dict[Hashable, list[int]] = {}
    for i, finding in enumerate(found):
        groups.setdefault(group_of(finding), []).append(i)
    queues = list(groups.values())
    chosen: set[int] = set()
    depth = 0
    while len(chosen) < limit:
        for queue in queues:
            if depth < len(queue) and len(chosen) < limit:
                chosen.add(queue[depth])
        depth += 1
    return chosen


def summary(kind: str, rest: list[RemFinding]) -> RemFinding:
    """One finding standing for `rest` (findings of one kind beyond the cap), with the bulk answer."""
    operation = rest[0].operation
    bulk = BULK_ACTIONS.get(kind)
    # What the bulk answer needs of each finding: its data without the lessons' texts, its subject.
    items = [{"kind": f.kind, "data": {k: v for k, v in f.data.items() if k != "lessons"}, "subject": f.subject}
             for f in rest
             if bulk and f.options[f.recommended - 1].action == bulk
             and (bulk != "merge" or f.data.get("copy"))]
    what = PLURAL.get(kind, kind.replace("_", " ") + " findings")
    lines = [f"{len(rest)} more {what} than the review shows at once."]
    lines += [f"- {f.title}" for f in rest[:10]] + ([f"- ... and {len(rest) - 10} more"] if len(rest) > 10 else [])
    options = []
    if items:
        lines += ["", f"{len(items)} of them can be answered together: {BULK_WORDS[bulk]}."]
        options.append(FindingOption(
            label=f"Answer {len(items)} at once: {BULK_WORDS[bulk]}", action="apply_all",
            description="One action for all of them, undone in one step with `mgcp rem undo`"))
    options += [
        FindingOption(label="Don't ask about these again", action="keep",
                      description="Remember this answer; asked again only when the set changes"),
        FindingOption(label="Later - review them as the shown ones are answered", action="skip",
                      description="Leave this summary pending; later runs show the next ones"),
    ]
    identity = ",".join(sorted(f.fingerprint for f in rest))
    return RemFinding(
        operation=operation, kind="summary", title=f"{len(rest)} more {what}",
        description="\n".join(lines), options=options, recommended=len(options),
        data={"of_kind": kind, "count": len(rest), "bulk_action": bulk if items else None, "items": items,
              "fingerprints": sorted(f.fingerprint for f in rest)},
        subject={}, fingerprint=fingerprint(operation, f"summary:{kind}", identity))
