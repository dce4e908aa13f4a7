"""The review queue: which findings a project sees, which still speak, and which comes next.

A review of project P -- from the CLI, the MCP server or `--auto` -- shows the findings about the
lessons every project shares, and P's own context findings; never another project's. Findings
are queued oldest first. A finding whose subject changed since it was raised (a lesson refined,
merged, archived, deleted, or an orphan linked) is stale: it is marked so and leaves the queue.
"""

from __future__ import annotations

from mgcp.config import SHARED_OPERATIONS
from mgcp.errors import NotFoundError
from mgcp.models import FindingStatus, LessonStatus, RemFinding, ReviewStep
from mgcp.persistence.store import Store


def visible_to(finding: RemFinding, project_id: str) -> bool:
    return finding.operation in SHARED_OPERATIONS or finding.project_id == project_id


async def finding_for(store: Store, project_path: str, finding_id: str) -> RemFinding:
    """The finding, if a review of this project may show it (else NotFoundError, as if unknown)."""
    finding = await store.rem.get_finding(finding_id)
    project = await store.context.known_project(project_path)
    if not visible_to(finding, project.project_id):
        raise NotFoundError(f"finding {finding_id} belongs to another project; review it from that project")
    return finding


async def is_stale(store: Store, finding: RemFinding, states: dict | None = None) -> str | None:
    """Why the finding no longer applies, or None. `states`: `Lessons.states` of (at least) the
    lessons it reads (`_lessons_read`), when already read for many findings at once."""
    if states is None:
        states = await store.lessons.states(_lessons_read(finding))
    for lesson_id, version in finding.subject.items():
        if lesson_id not in states:
            return f"lesson {lesson_id} no longer exists"
        current, status, _ = states[lesson_id]
        if current != version:
            return f"lesson {lesson_id} was refined (v{version} -> v{current})"
        if status != LessonStatus.active:
            return f"lesson {lesson_id} is {status.value}"
    if finding.kind == "orphan":  # links are not versioned: look at them directly
        lesson_id = finding.data["lesson"]
        if lesson_id not in states:
            return f"lesson {lesson_id} no longer exists"
        if states[lesson_id][2]:
            return f"lesson {lesson_id} has been linked since"
    draft = finding.data.get("draft")
    if isinstance(draft, dict) and isinstance(draft.get("trigger"), str) and isinstance(draft.get("action"), str):
        held = await store.lessons.same_text(draft["trigger"].strip(), draft["action"].strip())
        if held is not None:  # e.g. the same decision drafted by two operations, one answered
            return f"lesson {held.id} already says what its draft says"
    return None


def _lessons_read(finding: RemFinding) -> list[str]:
    """The lessons whose state `is_stale` reads: the subject's, and an orphan's own."""
    return [*finding.subject, *([finding.data["lesson"]] if finding.kind == "orphan" else [])]


async def _still_speaking(store: Store, findings: list[RemFinding]) -> list[RemFinding]:
    """The findings that are not stale; the stale ones are marked so on the way. The subjects'
    lessons are read once for all the findings."""
    states = await store.lessons.states(lesson_id for finding in findings for lesson_id in _lessons_read(finding))
    result = []
    for finding in findings:
        if await is_stale(store, finding, states):
            async with store.transaction():
                # Again under the write lock: another process may have answered the finding since
                # it was read, and its answer may be what makes it look stale (an orphan it linked).
                current = await store.rem.get_finding(finding.id)
                if current.status == FindingStatus.pending and await is_stale(store, current):
                    await store.rem.set_finding_status(finding.id, FindingStatus.stale)
            continue
        result.append(finding)
    return result


async def pending_findings(store: Store, project_path: str) -> list[RemFinding]:
    """The project's review queue: pending findings it may see, oldest first."""
    project = await store.context.known_project(project_path)
    return await _still_speaking(store, await store.rem.findings(project.project_id, "pending"))


async def next_finding(store: Store, project_path: str, after: str | None = None) -> ReviewStep:
    """What the project reviews next: the first pending finding queued after `after` (the one
    just answered or skipped; None: from the start), with how many wait after it and in all."""
    project = await store.context.known_project(project_path)
    ahead = await _still_speaking(store, await store.rem.findings(project.project_id, "pending", after=after))
    total = await store.rem.count_findings(project.project_id, "pending")
    return ReviewStep(finding=ahead[0] if ahead else None, remaining=max(len(ahead) - 1, 0), pending=total)
