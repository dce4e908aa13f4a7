"""Pydantic models and enums shared by every layer. No I/O here.

The enums and plain records that cheap reads return live in `mgcp.records` (stdlib only) and are
re-exported here: import them from either.

Timestamps are ISO-8601 UTC text, as in the legacy tables (`datetime.isoformat()` of an aware UTC
datetime). JSON-ish fields are plain Python lists and dicts.
"""


from enum import Enum
from typing import Any, NamedTuple

from pydantic import BaseModel as _PydanticModel
from pydantic import ConfigDict, Field

from mgcp.records import (FindingMark, FindingStatus, LessonStatus, OperationSchedule,  # noqa: F401
                          ProjectRef, RemStatus)


class BaseModel(_PydanticModel):
    # Build each model's validator on first use, not at import: most commands touch two or three
    # models, and building all of them would double the CLI's start-up time.
    model_config = ConfigDict(defer_build=True)


class RelationshipType(str, Enum):
    related = "related"
    prerequisite = "prerequisite"
    sequence_next = "sequence_next"
    alternative = "alternative"
    complements = "complements"
    specializes = "specializes"
    generalizes = "generalizes"
    contradicts = "contradicts"
    child_of = "child_of"


class Relationship(BaseModel):
    target: str
    type: str = "related"  # a RelationshipType value (legacy rows may hold others: kept as written)
    weight: float = 0.5
    context: list[str] = Field(default_factory=list)
    bidirectional: bool = True


class Lesson(BaseModel):
    id: str
    trigger: str
    action: str
    rationale: str | None = None
    examples: list[Any] = Field(default_factory=list)
    version: int = 1
    created_at: str
    last_refined: str
    last_used: str | None = None
    usage_count: int = 0
    tags: list[str] = Field(default_factory=list)
    parent_id: str | None = None
    relationships: list[Relationship] = Field(default_factory=list)
    status: LessonStatus = LessonStatus.active
    superseded_by: str | None = None
    project_id: str | None = None  # set when the lesson was marked project-specific
    # Kind and confidence are versioned with the text; outcomes and the tier are retrieval facts.
    kind: str = "pattern"
    confidence: float = 0.8
    helped: int = 0
    failed: int = 0
    failure_streak: int = 0
    success_rate: float | None = None  # helped / (helped + failed); None before any outcome
    tier: str = "candidate"  # candidate, validated or archived (mgcp.ranking.tier)
    importance: float | None = None  # the write-time heuristic (mgcp.quality); set where shown


class LessonUse(NamedTuple):
    """What is read of every active lesson to judge its use: its texts, version, use, times,
    confidence and helpful outcomes, but not its tags, examples or links (a read of all lessons far
    cheaper than `Lesson`'s)."""

    id: str
    trigger: str
    action: str
    version: int
    usage_count: int
    created_at: str
    last_refined: str
    last_used: str | None
    confidence: float = 0.8
    helped: int = 0


class LessonLink(NamedTuple):
    """A relationship as `LessonRow` holds it: its target and type."""

    target: str
    type: str = "related"


class LessonRow(NamedTuple):
    """What the REM operations read of a lesson, read-only: `Lesson`'s texts, tags, links, version,
    use, times and status under the same names, without its examples, rationale or outcomes (a
    read of 100k lessons at a seventh of `Lesson`'s memory and time)."""

    id: str
    trigger: str
    action: str
    tags: list[str]
    relationships: tuple[LessonLink, ...]
    version: int
    usage_count: int
    created_at: str
    last_refined: str
    status: LessonStatus = LessonStatus.active


class HistoryRow(NamedTuple):
    """What the REM operations read of a context snapshot (`ContextSnapshot` without its catalogue):
    a read of a project's whole history far cheaper than building a model per row."""

    id: int
    project_id: str
    session_number: int
    session_id: str | None
    timestamp: str
    notes: str | None
    active_files: list[str]
    todos: list["Todo"]
    recent_decisions: list[str]


class LessonVersion(BaseModel):
    lesson_id: str
    version: int
    trigger: str
    action: str | None  # None: a reconstructed row whose action text was lost before versioning
    rationale: str | None = None
    tags: list[str] = Field(default_factory=list)
    timestamp: str
    refinement_reason: str | None = None  # why this version was insufficient (set when refined)
    session_id: str | None = None
    reconstructed: bool = False
    kind: str | None = None  # None: written before kinds were recorded (reads as the default)
    confidence: float | None = None


class Todo(BaseModel):
    """A todo as every MGCP version wrote it: older ones wrote integer priorities, left the status
    out, or added keys of their own (kept as they are, so a re-save never loses them)."""

    model_config = ConfigDict(defer_build=True, extra="allow")

    content: str
    status: str = "pending"
    priority: str | int = "medium"
    created_at: str | None = None
    notes: str | None = None

    @classmethod
    def from_stored(cls, value: Any) -> "Todo":
        """A stored todo of any shape: an object, or a plain string (the oldest shape)."""
        if not isinstance(value, dict):
            return cls(content=str(value))
        fields = {k: v for k, v in value.items() if v is not None or k not in ("status", "priority")}
        fields["content"] = str(value.get("content") or value.get("text") or value.get("title") or "")
        for key, kinds in (("status", str), ("created_at", str), ("notes", str), ("priority", (str, int))):
            value = fields.get(key)
            if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
                fields[key] = str(value)
        return cls(**fields)


class ProjectContext(BaseModel):
    project_id: str
    project_name: str
    project_path: str
    catalogue: dict[str, Any] = Field(default_factory=dict)
    todos: list[Todo] = Field(default_factory=list)
    active_files: list[str] = Field(default_factory=list)
    recent_decisions: list[str] = Field(default_factory=list)
    last_session_id: str | None = None
    last_accessed: str
    session_count: int = 0
    notes: str | None = None


class ContextSnapshot(BaseModel):
    """One row of context_history: the project's state after a save, in a session."""

    id: int
    project_id: str
    session_number: int
    session_id: str | None = None
    timestamp: str
    notes: str | None = None
    active_files: list[str] = Field(default_factory=list)
    todos: list[Todo] = Field(default_factory=list)
    recent_decisions: list[str] = Field(default_factory=list)
    catalogue_hash: str | None = None
    catalogue_delta: dict[str, Any] | None = None


class ContextAt(BaseModel):
    """The project's context at the end of a session, the catalogue rebuilt from the history's
    deltas and verified against the recorded hash."""

    session: int  # the session asked for
    snapshot: ContextSnapshot  # the last save at or before the end of that session
    catalogue: dict[str, Any]
    verified: bool = True


class SessionRegistration(BaseModel):
    project_id: str
    session_id: str
    session_number: int
    is_new: bool


# The answers that keep what a finding questioned ("keep", "keep both", "project-specific"): the
# finding is then 'rejected', remembered, and not raised again for the same subject.
REJECTING_ACTIONS = frozenset({"keep", "keep_both", "project_specific"})


class FindingOption(BaseModel):
    label: str
    description: str = ""
    action: str  # the engine's action name, e.g. "archive", "merge", "keep", "skip"
    needs_input: str | None = None  # a prompt when the option asks for text (e.g. new trigger keywords)
    multi_select: list[str] | None = None  # choices the user picks a subset of (e.g. lessons to link)


class RemFinding(BaseModel):
    id: str = ""
    operation: str
    kind: str  # e.g. "stale_unused", "duplicate_merge", "unlinked_cluster", "theme"
    title: str
    description: str
    options: list[FindingOption]
    recommended: int = 1  # 1-based index into options
    data: dict[str, Any] = Field(default_factory=dict)
    # The subject: lesson ids -> the version the finding saw (a changed version makes it stale).
    subject: dict[str, int] = Field(default_factory=dict)
    fingerprint: str = ""
    project_id: str | None = None
    run_id: int | None = None
    status: FindingStatus = FindingStatus.pending
    created_at: str | None = None
    resolved_at: str | None = None
    chosen_option: int | None = None


class OperationResult(BaseModel):
    operation: str
    findings: int = 0
    duration_ms: float = 0.0
    error: str | None = None
    summary: dict[str, Any] = Field(default_factory=dict)


class RemCycleReport(BaseModel):
    run_id: int | None = None
    project_id: str
    project_path: str | None = None
    session_number: int
    started_at: str
    duration_ms: float = 0.0
    operations: list[OperationResult] = Field(default_factory=list)
    findings: list[RemFinding] = Field(default_factory=list)
    auto: bool = False


class RemReport(BaseModel):
    """What `rem report` shows: the project's last run, and every finding waiting for review."""

    project_id: str
    project_path: str
    last_run: RemCycleReport | None = None
    pending: list[RemFinding] = Field(default_factory=list)
    unfinished_run: int | None = None  # a later run that never finished (its finished operations' findings are pending)


class AutoResult(BaseModel):
    """What --auto did with one finding: applied (with why the policy allowed it), or left."""

    id: str
    kind: str
    title: str
    option: str
    why: str | None = None
    result: str | None = None


class RemRun(BaseModel):
    """One `rem run`: the cycle's report and, with --auto, what was applied, what was left, and
    what was skipped as no longer pending: answered by another process meanwhile, or stale."""

    report: RemCycleReport
    auto: bool = False
    dry_run: bool = False
    applied: list[AutoResult] = Field(default_factory=list)
    left_pending: list[AutoResult] = Field(default_factory=list)
    settled_elsewhere: list[AutoResult] = Field(default_factory=list)


class ReviewStep(BaseModel):
    """The finding a project reviews next, and how many wait after it and in all."""

    finding: RemFinding | None = None
    remaining: int = 0  # pending findings after this one in the queue
    pending: int = 0    # pending findings of the project in all (skipped ones included)


# -- pattern reinforcement -------------------------------------------------------------------------

class ReinforcedPattern(BaseModel):
    """What recurred across sessions, clustered by `cluster_key` (category::normalized text).

    `canonical` is the member that stands for the cluster (a lesson id for lessons; the latest
    source for decisions and notes); `lesson_id` is the lesson reinforced by it (the canonical
    lesson, or the lesson holding a decision's or note's text), None when no lesson holds it.
    `derived_from` lists the sources: "lesson:<id>" or "session:<project id>:<session number>"."""

    id: str
    cluster_key: str
    category: str  # "lesson", "decision" or "note"
    text: str
    lesson_id: str | None = None
    canonical: str
    reinforcement_count: int
    last_reinforced_at: str
    derived_from: list[str] = Field(default_factory=list)
    derived_via: str = "pattern-reinforcement"
    created_at: str
    updated_at: str


class PatternMember(BaseModel):
    """A lesson superseded by a pattern's canonical lesson."""

    id: str
    status: str
    superseded_at: str | None = None
    action: str


class PatternExplanation(BaseModel):
    """`patterns explain`: the pattern, its canonical text, its sources described, its superseded members."""

    pattern: ReinforcedPattern
    canonical_text: str
    lesson_status: str | None = None
    sources: list[dict[str, Any]] = Field(default_factory=list)
    members: list[PatternMember] = Field(default_factory=list)
