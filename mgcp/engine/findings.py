"""Which stored findings still speak: a finding whose subject changed since it was raised (a lesson
refined, merged, archived, deleted, or an orphan linked) is stale and is marked so, never applied."""

from __future__ import annotations

from mgcp.engine.cycle import known_project
from mgcp.models import FindingStatus, LessonStatus, RemFinding
from mgcp.persistence import Store


async def is_stale(store: Store, finding: RemFinding) -> str | None:
    """Why the finding no longer applies, or None."""
    for lesson_id, version in finding.subject.items():
        if not await store.lesson_exists(lesson_id):
            return f"lesson {lesson_id} no longer exists"
        lesson = await store.get_lesson(lesson_id)
        if lesson.version != version:
            return f"lesson {lesson_id} was refined (v{version} -> v{lesson.version})"
        if lesson.status != LessonStatus.active:
            return f"lesson {lesson_id} is {lesson.status.value}"
    if finding.kind == "orphan":  # links are not versioned: look at them directly
        lesson = await store.get_lesson(finding.data["lesson"])
        if lesson.relationships:
            return f"lesson {lesson.id} has been linked since"
    return None


async def pending_findings(store: Store, project_path: str) -> list[RemFinding]:
    """Pending findings for the project, oldest first; findings gone stale are marked so."""
    project = await known_project(store, project_path)
    result = []
    for finding in await store.findings(project.project_id, "pending"):
        if await is_stale(store, finding):
            async with store.transaction():
                await store.set_finding_status(finding.id, FindingStatus.stale)
            continue
        result.append(finding)
    return result


