"""Outcome feedback: whether a lesson helped or failed when it was applied.

Each report is logged (see persistence.outcomes). When a lesson has failed `failure_threshold`
times in a row (rem-config.yaml `outcomes:`, default 3), a finding is raised at once for review:
refine it, archive it, or keep it; its options go through the engine's undoable actions like every
other finding's. Nothing is purged. A success resets the streak, and a pending finding about the
streak it ended is marked stale. The failures counted are those of the lesson's current text: the
first failure after its trigger or action changed starts a new streak (a change of confidence,
tags or links does not). A streak answered "keep" is not raised again; a new streak (after a
success) or a refined lesson is a new subject. Only an active lesson's outcome is taken.
"""

from __future__ import annotations

import hashlib

from mgcp.config import RemConfig
from mgcp.engine.lessons import require_active
from mgcp.models import FindingOption, FindingStatus, RemFinding
from mgcp.operations import fingerprint, subject_identity, subject_of
from mgcp.persistence.database import utcnow
from mgcp.persistence.store import Store

OPERATION = "staleness_scan"  # a failing lesson is knowledge gone stale; reviewed with the lessons
KIND = "failure_streak"


async def record_outcome(store: Store, config: RemConfig, lesson_id: str, helped: bool,
                         note: str | None = None, session_id: str | None = None,
                         project_path: str | None = None) -> dict:
    """Log the outcome; returns the lesson's counts and, when this report completed a failure
    streak, the finding it raised ({"finding": RemFinding | None, ...counts})."""
    threshold = int(config.outcomes["failure_threshold"])
    async with store.transaction():
        lesson = await store.lessons.get(lesson_id)
        # a failure streak of a lesson no agent is given would raise a finding already out of date
        require_active(lesson, "report the outcome of", "to report its outcomes")
        project = await store.context.find_project(project_path) if project_path else None
        stats = await store.outcomes.record(lesson.id, helped, note, session_id,
                                            project.project_id if project else None,
                                            since=await store.lessons.text_changed_at(lesson.id))
        finding = None
        if helped:
            await _retire(store, lesson.id)
        elif stats["streak"] >= threshold:
            finding = _finding(lesson, stats, threshold)
            if not await store.rem.finding_speaks(finding.fingerprint) \
                    and not await store.rem.was_applied(finding.fingerprint):
                # The failure count grows with every report: a finding raised again for the same
                # streak (its first went stale, then an undo brought the lesson back) gets a new id.
                finding = finding.model_copy(update={
                    "id": hashlib.sha256(f"{finding.fingerprint}:{stats['failed']}:outcome".encode()).hexdigest()[:16],
                    "created_at": utcnow()})
                await store.rem.insert_finding(finding)
            else:
                finding = None
    return {"lesson_id": lesson.id, "outcome": "helped" if helped else "failed", **stats,
            "failure_threshold": threshold, "finding": finding}


async def _retire(store: Store, lesson_id: str) -> None:
    """A success ends the streak: a pending finding about it no longer speaks."""
    for finding in await store.rem.findings(None, "pending"):
        if finding.kind == KIND and finding.data.get("lesson") == lesson_id:
            await store.rem.set_finding_status(finding.id, FindingStatus.stale)


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _finding(lesson, stats: dict, threshold: int) -> RemFinding:
    subject = subject_of(lesson)
    streak = stats["streak"]
    description = "\n".join([
        f'Lesson "{lesson.id}" was reported as failing {streak} times in a row (threshold {threshold}); '
        f"in all it helped {stats['helped']} and failed {stats['failed']} times.",
        "",
        f"Trigger: {shorten(lesson.trigger, 200)}",
        f"Action: {shorten(lesson.action, 200)}",
        "", "What should we do?",
    ])
    options = [
        FindingOption(label="Refine it", action="refine", description="Write a better action text (a new version)",
                      needs_input=f'New action text for "{lesson.id}"'),
        FindingOption(label="Archive it", action="archive", description="Remove from retrieval, keep in history"),
        FindingOption(label="Keep it", action="keep",
                      description="Keep it as it is; this streak is not raised again"),
        FindingOption(label="Skip for now", action="skip", description="Leave this finding pending"),
    ]
    return RemFinding(
        operation=OPERATION, kind=KIND, title=f'Lesson "{lesson.id}" failed {streak} times in a row',
        description=description, options=options, recommended=1,
        data={"lesson": lesson.id, "streak": streak, "helped": stats["helped"], "failed": stats["failed"],
              "streak_started": stats["streak_started"]},
        subject=subject,
        fingerprint=fingerprint(OPERATION, KIND, f"{subject_identity(subject)}#{stats['streak_started']}"))


async def stats(store: Store) -> dict:
    return await store.outcomes.stats()
