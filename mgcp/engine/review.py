"""The review queue: which findings a project sees, which still speak, and which comes next.

A review of project P -- from the CLI, the MCP server or `--auto` -- shows the findings about the
lessons every project shares, and P's own context findings; never another project's. Findings
are queued oldest first. A finding whose subject changed since it was raised (a lesson refined,
merged, archived, deleted, or an orphan linked), whose draft an active lesson now holds (its
action) or another finding's answer made a lesson of (the same decision drafted by two
operations, the first answered with edits), or whose failure streak has ended is stale: it is
marked so and leaves the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mgcp import quality
from mgcp.config import SHARED_KINDS, SHARED_OPERATIONS
from mgcp.errors import NotFoundError
from mgcp.records import FindingMark, FindingStatus, LessonStatus

if TYPE_CHECKING:  # the queue's checks read plain rows; only a finding read whole is a model
    from mgcp.models import RemFinding, ReviewStep
    from mgcp.persistence.store import Store


def visible_to(finding: RemFinding, project_id: str) -> bool:
    """Whether a review of the project shows the finding: one about the lessons (of a shared
    operation, or of a shared kind, alone or summed up) from any project, the others from their own."""
    kind = finding.data.get("of_kind") if finding.kind == "summary" else finding.kind
    return finding.operation in SHARED_OPERATIONS or kind in SHARED_KINDS or finding.project_id == project_id


async def finding_for(store: Store, project_path: str, finding_id: str) -> RemFinding:
    """The finding, if a review of this project may show it (else NotFoundError, as if unknown)."""
    finding = await store.rem.get_finding(finding_id)
    project = await store.queue.project(project_path)
    if not visible_to(finding, project.project_id):
        owner = (await store.context.project_by_id(finding.project_id)).project_path
        raise NotFoundError(f"finding {finding_id} belongs to project {owner}; "
                            f"review it from there (--project {owner})")
    return finding


def why_stale(mark: FindingMark, states: dict, held: dict, drafted: dict) -> str | None:
    """Why the finding no longer applies, or None. `states`: `QueueReads.lesson_states` of (at
    least) the lessons it reads (`_lessons_read`); `held`: `QueueReads.same_texts` of (at least)
    its draft; `drafted`: `QueueReads.drafted`."""
    for lesson_id, version in mark.subject.items():
        if lesson_id not in states:
            return f"lesson {lesson_id} no longer exists"
        current, status, _ = states[lesson_id]
        if current != version:
            return f"lesson {lesson_id} was refined (v{version} -> v{current})"
        if status != LessonStatus.active:
            return f"lesson {lesson_id} is {status.value}"
    if mark.kind == "orphan":  # links are not versioned: look at them directly
        if mark.lesson not in states:
            return f"lesson {mark.lesson} no longer exists"
        if states[mark.lesson][2]:
            return f"lesson {mark.lesson} has been linked since"
    if mark.draft in held:  # e.g. the same decision drafted by two operations, one answered
        return f"lesson {held[mark.draft]} already says what its draft says (its action)"
    if mark.draft and drafted.get(quality.normalized(mark.draft[1]), mark.id) != mark.id:
        return (f"finding {drafted[quality.normalized(mark.draft[1])]} drafted a lesson from the same text "
                "(edited as it was answered)")
    return None


async def kept_apart(store: Store) -> frozenset[str]:
    """The duplicate pairs (`duplicate_detection.pair_fingerprints`) a person answered to keep:
    pairs answered "keep both" or in a summary answered "don't ask again", and every pair of a set
    of look-alike lessons pattern reinforcement raised, answered "keep them all" (at the versions
    then). Such a pair is not raised again, and no merge of it is applied by --auto or a bulk
    answer: a person's answer in one operation holds in the other."""
    from mgcp.operations import duplicate_detection

    kept = set(await store.rem.settled(duplicate_detection.OPERATION))
    for subject in await store.rem.rejected_subjects("reinforced_duplicates"):
        kept |= duplicate_detection.pair_fingerprints(subject)
    return frozenset(kept)


async def is_stale(store: Store, finding: RemFinding) -> str | None:
    """Why the finding no longer applies (its subject changed since it was raised, or the failure
    streak it is about ended), or None."""
    from mgcp.engine.outcomes import KIND as FAILURE_STREAK

    mark = FindingMark.of(finding)
    why = why_stale(mark, *await _read_for(store, [mark]))
    if why is None and finding.kind == FAILURE_STREAK:
        lesson_id = finding.data.get("lesson")
        # shorter than it reported: a success (or a change of its text) ended the streak since; the
        # count, unlike the outcome ids, reads the same after an import renumbered them
        if await store.outcomes.streak(lesson_id) < int(finding.data.get("streak") or 0):
            why = f"the failure streak of lesson {lesson_id} has ended since (a success was reported)"
    return why


def _lessons_read(mark: FindingMark) -> list[str]:
    """The lessons whose state `why_stale` reads: the subject's, and an orphan's own."""
    return [*mark.subject, *([mark.lesson] if mark.kind == "orphan" else [])]


async def _read_for(store: Store, marks: list[FindingMark]) -> tuple[dict, dict, dict]:
    """What `why_stale` reads of the lessons, for all the findings at once."""
    states = await store.queue.lesson_states(lesson_id for mark in marks for lesson_id in _lessons_read(mark))
    held = await store.queue.same_texts((mark.draft for mark in marks if mark.draft), action_only=True)
    drafted = await store.queue.drafted() if any(mark.draft for mark in marks) else {}
    return states, held, drafted


async def _still_speaking(store: Store, marks: list[FindingMark]) -> list[FindingMark]:
    """The findings that are not stale; the stale ones are marked so on the way. The lessons are
    read once for all the findings."""
    read = await _read_for(store, marks)
    result = []
    for mark in marks:
        if why_stale(mark, *read):
            async with store.transaction():
                # Again under the write lock: another process may have answered the finding since
                # it was read, and its answer may be what makes it look stale (an orphan it linked).
                current = await store.rem.get_finding(mark.id)
                if current.status == FindingStatus.pending and await is_stale(store, current):
                    await store.rem.set_finding_status(mark.id, FindingStatus.stale)
            continue
        result.append(mark)
    return result


async def pending_findings(store: Store, project_path: str) -> list[RemFinding]:
    """The project's review queue: pending findings it may see, oldest first."""
    project = await store.queue.project(project_path)
    findings = await store.rem.findings(project.project_id, "pending")
    speaking = {mark.id for mark in await _still_speaking(store, [FindingMark.of(f) for f in findings])}
    return [finding for finding in findings if finding.id in speaking]


async def pending_count(store: Store, project_id: str) -> int:
    """How many findings `pending_findings` lists for the project, without reading them whole."""
    return len(await _still_speaking(store, await store.rem.marks(project_id, "pending")))


async def next_finding(store: Store, project_path: str, after: str | None = None) -> ReviewStep:
    """What the project reviews next: the first pending finding queued after `after` (the one
    just answered or skipped; None: from the start), with how many wait after it and in all."""
    from mgcp.models import ReviewStep

    project = await store.queue.project(project_path)
    # every pending finding is checked, not only those ahead: an answer (a merge) can make one
    # skipped earlier stale, and the count must not hold it
    speaking = {mark.id for mark in await _still_speaking(store, await store.rem.marks(project.project_id, "pending"))}
    ahead = [mark for mark in await store.rem.marks(project.project_id, "pending", after=after) if mark.id in speaking]
    return ReviewStep(finding=await store.rem.get_finding(ahead[0].id) if ahead else None,
                      remaining=max(len(ahead) - 1, 0), pending=len(speaking))
