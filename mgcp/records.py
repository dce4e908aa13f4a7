"""The plain part of the data model: enums, and the records a cheap read returns. Stdlib only.

`mgcp.models` re-exports all of them beside its pydantic models, so they are used as any model
is. They live here so that a read that needs nothing more (`rem status`: the schedule and how
many findings wait) never imports pydantic.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple


class LessonStatus(str, Enum):
    active = "active"
    archived = "archived"      # out of retrieval, kept in history
    deleted = "deleted"        # soft delete: out of everything but history; undoable
    superseded = "superseded"  # merged into another lesson (see superseded_by)


class FindingStatus(str, Enum):
    pending = "pending"
    applied = "applied"
    rejected = "rejected"  # a "keep" / "skip - coincidental" answer: not raised again unless the subject changes
    stale = "stale"        # the subject changed since it was raised


class FindingMark(NamedTuple):
    """What tells whether a finding still holds (`mgcp.engine.review`), without the rest of it: its
    subject (lesson id -> the version it saw), an orphan's own lesson, and the (trigger, action) of
    the lesson it drafts. A queue of findings is checked from these alone. A summary stands for
    other findings and drafts nothing itself: its data (which can run to megabytes) is not read."""

    id: str
    kind: str
    subject: dict[str, int]
    lesson: str | None = None
    draft: tuple[str, str] | None = None

    @classmethod
    def of(cls, finding) -> FindingMark:
        """The mark of a `models.RemFinding`."""
        draft = finding.data.get("draft") if finding.kind != "summary" else None
        if not (isinstance(draft, dict) and isinstance(draft.get("trigger"), str)
                and isinstance(draft.get("action"), str)):
            draft = None
        return cls(finding.id, finding.kind, finding.subject,
                   finding.data.get("lesson") if finding.kind == "orphan" else None,
                   (draft["trigger"], draft["action"]) if draft else None)


class ProjectRef(NamedTuple):
    """A project as a path names it (`persistence.sessions`): its id, its stored path and its
    current session number (0, and the id it would get, for a project never seen)."""

    project_id: str
    project_path: str
    session_count: int


@dataclass(kw_only=True)
class OperationSchedule:
    operation: str
    strategy: str
    params: dict[str, Any]
    last_run_session: int = 0
    last_run_timestamp: str | None = None
    next_due_session: int
    due: bool
    enabled: bool = True  # False: never due ("enabled: false"); runs only when named


@dataclass(kw_only=True)
class RemStatus:
    project_id: str
    project_path: str
    session_number: int
    operations: list[OperationSchedule]
    pending_findings: int
