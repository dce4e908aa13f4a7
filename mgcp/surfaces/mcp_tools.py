"""The MCP tools' bodies: each parses its arguments, calls the store or the engine, and returns
JSON. The server plumbing (registration, errors, transport) is in `mcp_server`, the only importer
of the `mcp` SDK. Each method's docstring is the tool's description for the agent; the numbered
findings are shaped for an AskUserQuestion-style prompt by `finding_prompt`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Annotated, Any, Awaitable, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from mgcp.errors import InvalidInputError
from mgcp.models import RelationshipType, RemFinding, ReviewStep
from mgcp.surfaces.common import to_jsonable
from mgcp.validation import MAX_QUERY, MAX_SESSION_ID, check_no_nul

# AskUserQuestion headers are short chips (at most 12 characters).
HEADERS = {
    "duplicate_merge": "Duplicate", "duplicate_review": "Near-dup", "unlinked_cluster": "Cluster",
    "orphan": "Orphan", "stale_unused": "Unused", "popular_unrefined": "Needs update",
    "unmatched_trigger": "Old trigger", "theme": "New lesson", "uncaptured_decision": "Decision",
    "stale_todo": "Old todo", "summary": "Many more",
    "reinforced_duplicates": "Reinforced", "reinforced_draft": "Recurring", "contradiction": "Contradicts",
}
OPERATION_HEADERS = {
    "staleness_scan": "Stale", "duplicate_detection": "Duplicate", "community_detection": "Links",
    "knowledge_extraction": "Extraction", "context_summary": "Summary",
    "pattern_reinforcement": "Pattern", "contradiction_scan": "Contradicts",
}
HEADERS.update({"failure_streak": "Failing", "speculative_unconfirmed": "Speculative"})
MAX_PROMPT_OPTIONS = 4  # AskUserQuestion offers at most four options
# A reply the agent reads stays well under what a client takes in one piece (Claude Code moves a tool
# result over 50,000 characters out of the conversation; the SDK's HTTP client refuses an event over
# 1 MB): lists come a page at a time, findings as one line each.
LISTED, MAX_LISTED = 100, 500  # list_lessons' page
MAX_FOUND = 20  # query_lessons' lessons, each whole
HISTORY_SHOWN = 10  # get_context_history's snapshots, get_lesson_history's versions, unless a limit is given
FINDINGS_LISTED = 50  # rem_report's findings of each list

ProjectPath = Annotated[str, Field(description="The project's absolute path (the agent's working "
                                               "directory); it need not exist on disk.")]
LessonId = Annotated[str, Field(description="The lesson id, e.g. 'verify-api-signatures'.")]
SessionId = Annotated[str | None, Field(description=f"The agent's session id, if known (at most {MAX_SESSION_ID} characters).")]
Kind = Annotated[Literal["constraint", "preference", "architecture", "pattern", "error_solution", "project_fact",
                         "style", "decision"] | None,
                 Field(description="What sort of knowledge it is (default pattern; a constraint with confidence "
                                   ">= 0.9 is always recalled).")]
Confidence = Annotated[float | None, Field(ge=0, le=1, description="How sure, 0 to 1 (default 0.8; below 0.5 is speculative).")]


class TodoInput(BaseModel):
    """A todo as `get_project_context` returns it: every key is kept, those of an older writer's
    todos too (a list read and saved back loses nothing)."""

    model_config = ConfigDict(extra="allow")

    content: str = Field(description="What is to be done.")
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: str | int = Field("medium", description="low, medium or high (an older writer's values are kept).")
    notes: str | None = Field(None, description="Anything worth knowing about it.")
    created_at: str | None = Field(None, description="As returned: read, not written (the store keeps when each "
                                                     "todo was first saved).")


def _listed(findings: list[RemFinding]) -> list[dict[str, Any]]:
    """The first FINDINGS_LISTED findings, each as the line a report shows of it."""
    return [{"id": f.id, "operation": f.operation, "kind": f.kind, "title": f.title, "status": f.status.value,
             "created_at": f.created_at} for f in findings[:FINDINGS_LISTED]]


def header_for(finding: RemFinding) -> str:
    header = HEADERS.get(finding.kind) or OPERATION_HEADERS.get(finding.operation)
    return (header or finding.kind.replace("_", " ").capitalize())[:12]


def finding_prompt(finding: RemFinding) -> dict[str, Any]:
    """One finding as an AskUserQuestion-style question: options in the engine's order, numbered
    from 1 (the number is what rem_answer takes); multi-select where an option picks a subset."""
    options, needs_input, choices = [], [], None
    for number, option in enumerate(finding.options, 1):
        entry = {"number": number,
                 "label": option.label + (" (Recommended)" if number == finding.recommended else ""),
                 "description": option.description}
        if option.needs_input:
            entry["needs_input"] = option.needs_input
            needs_input.append({"option": number, "prompt": option.needs_input})
        if option.multi_select:
            entry["multi_select"] = True
            choices = choices or list(option.multi_select)
        options.append(entry)
    skip = next((n for n, o in enumerate(finding.options, 1) if o.action == "skip"), None)
    if len(options) > MAX_PROMPT_OPTIONS and skip is not None:
        # "skip for now" is what not answering means.
        options = [o for o in options if o["number"] != skip]
    how = [f"Call rem_answer with project_path, finding_id={finding.id!r} and the chosen option number."]
    for item in needs_input:
        how.append(f"Option {item['option']} needs text: pass it as input ({item['prompt']}).")
    if choices:
        subset = next(n for n, o in enumerate(finding.options, 1) if o.multi_select)
        how.append(f"Option {subset} picks a subset: ask which of choices (multi-select), then pass "
                   "them as selection.")
    return {
        "finding_id": finding.id,
        "operation": finding.operation,
        "question": f"{finding.title}\n\n{finding.description}",
        "header": header_for(finding),
        "options": options,
        "recommended": finding.recommended,
        "multiSelect": choices is not None,
        "choices": choices or [],
        "needs_input": needs_input,
        "skip_option": skip,
        "how_to_answer": " ".join(how),
    }


class Service:
    """What every tool needs: the database and the REM config, both resolved per call. Each call
    opens the store and closes it before returning, so no lock is held between calls."""

    def __init__(self, db: str | None, config: str | None, log: Callable[..., None]):
        self.db, self.config, self.log = db, config, log

    async def run(self, work: Callable[[Any], Awaitable[Any]], create: bool = True) -> Any:
        from mgcp.config import db_path
        from mgcp.persistence.store import Store

        async with Store.open(db_path(self.db), create=create) as store:
            return await work(store)

    def rem_config(self):
        from mgcp.config import load_config

        return load_config(self.config)


def _path(project_path: str) -> str:
    """The project an agent's project_path names. It must be absolute: a relative or empty path
    would resolve against the server's own working directory, which on a shared server is no
    agent's project (the CLI's --project resolves against the user's own directory instead)."""
    from mgcp.config import normalize_path

    check_no_nul("project_path", project_path)
    if not os.path.isabs(project_path):
        raise InvalidInputError(f"project_path must be the project's absolute path "
                                f"(got {json.dumps(project_path, ensure_ascii=False)[:200]})")
    return normalize_path(project_path)


def _optional_path(project_path: str | None) -> str | None:
    return None if project_path is None else _path(project_path)


class Tools:
    """The tools, one method each (registered by name in NAMES order)."""

    NAMES = ("add_lesson", "refine_lesson", "query_lessons", "get_lesson_history", "link_lessons",
             "save_project_context", "get_project_context", "get_context_history", "get_context_at_session",
             "rem_status", "rem_report", "rem_run", "rem_answer", "rem_undo")
    NAMES += ("list_lessons", "get_lesson")
    # Tools that change nothing in the database (query_lessons counts retrievals; rem_status and
    # rem_report mark findings whose subject changed as stale).
    READ_ONLY = frozenset({"get_lesson_history", "get_project_context", "get_context_history",
                           "get_context_at_session", "list_lessons", "get_lesson",
                           "lesson_stats"})
    NAMES += ("lesson_outcome", "recall", "lesson_stats")
    NAMES += ("pattern_reinforcement_run",)

    def __init__(self, service: Service):
        self.service = service

    # -- lessons ------------------------------------------------------------------------------------

    async def add_lesson(
        self,
        lesson_id: LessonId,
        trigger: Annotated[str, Field(description="When the lesson applies: the situation and keywords an agent would search for.")],
        action: Annotated[str, Field(description="What to do in that situation.")],
        rationale: Annotated[str | None, Field(description="Why.")] = None,
        tags: Annotated[list[str] | None, Field(description="Tags, e.g. ['testing', 'sqlite'].")] = None,
        parent_id: Annotated[str | None, Field(description="The id of a broader parent lesson.")] = None,
        session_id: SessionId = None,
        kind: Kind = None,
        confidence: Confidence = None,
    ) -> dict[str, Any]:
        """Store a new reusable lesson (version 1). Call it when you learned something that will help
        in future sessions: a mistake to avoid, a check that paid off. Trivial text is refused. If an
        active lesson already says the same (same trigger and action up to case, spacing and
        punctuation), that lesson is returned with "existing": true and nothing is added; "similar"
        names near matches you may rather refine. Returns the lesson with existing, similar, message."""
        from mgcp.engine.lessons import add_lesson

        cfg = self.service.rem_config()
        result = await self.service.run(lambda s: add_lesson(
            s, cfg, lesson_id, trigger, action, rationale, tags or [], parent_id, session_id, kind, confidence))
        return result.to_dict()

    async def refine_lesson(
        self,
        lesson_id: LessonId,
        reason: Annotated[str, Field(description="Why the current version was insufficient (required; kept in the history).")],
        trigger: Annotated[str | None, Field(description="A new trigger (omit to keep).")] = None,
        action: Annotated[str | None, Field(description="A new action (omit to keep).")] = None,
        rationale: Annotated[str | None, Field(description="A new rationale (omit to keep).")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, replacing the old (omit to keep).")] = None,
        session_id: SessionId = None,
        kind: Kind = None,
        confidence: Confidence = None,
    ) -> dict[str, Any]:
        """Improve an active lesson: writes version N+1 and keeps every earlier version with the
        reason. Call it when a lesson proved wrong, vague or incomplete (one merged into another is
        refused, naming the lesson to refine). Returns the new lesson."""
        from mgcp.engine.lessons import refine_lesson

        return to_jsonable(await self.service.run(lambda s: refine_lesson(
            s, lesson_id, reason, trigger, action, rationale, tags, session_id, kind, confidence), create=False))

    async def query_lessons(
        self,
        text: Annotated[str, Field(description="The situation or task, in words, e.g. 'writing a database migration' "
                                               f"(at most {MAX_QUERY:,} characters).")],
        limit: Annotated[int, Field(ge=1, le=MAX_FOUND, description="How many lessons at most.")] = 5,
        project_path: Annotated[str | None, Field(description="The project's absolute path, to attribute the query (optional).")] = None,
        explain: Annotated[bool, Field(description="Add each result's score parts (relevance, confidence, use, success, importance, tier).")] = False,
    ) -> dict[str, Any]:
        """Find the active lessons most relevant to a situation, best first (text relevance combined
        with confidence, use and success rate). Call it before starting unfamiliar work. Each
        returned lesson counts as retrieved (usage count, last used), and the query is logged for
        REM's staleness scan. Returns {"results": [lesson + score (+ score_parts)]}."""
        cfg = self.service.rem_config()
        check_no_nul("text", text)  # the query is logged
        results = await self.service.run(
            lambda s: s.ranked(text, limit, _optional_path(project_path), cfg.ranking,
                               cfg.reinforcement), create=False)
        return {"results": [{"score": round(score, 4), **({"score_parts": parts} if explain else {}),
                             **to_jsonable(lesson)} for lesson, score, parts in results]}

    async def get_lesson_history(
        self,
        lesson_id: LessonId,
        limit: Annotated[int, Field(ge=1, le=1_000_000, description="How many of the last versions.")] = HISTORY_SHOWN,
    ) -> dict[str, Any]:
        """A lesson's last versions (the last 10 unless limit says otherwise), oldest first, each
        with the reason it was refined. Call it to see how a lesson evolved before refining it.
        Returns {"lesson_id", "versions": [...], "total": how many versions it has}."""
        versions = await self.service.run(lambda s: s.lessons.versions(lesson_id), create=False)
        return {"lesson_id": lesson_id, "versions": to_jsonable(versions[-limit:]), "total": len(versions)}

    async def link_lessons(
        self,
        source: Annotated[str, Field(description="One lesson id.")],
        target: Annotated[str, Field(description="The other lesson id.")],
        type: Annotated[RelationshipType, Field(description="The relationship.")] = RelationshipType.related,
    ) -> dict[str, Any]:
        """Link two lessons (both directions) so that finding one leads to the other; two lessons
        already linked keep one link, which takes the type given. Returns {"source", "target", "type",
        "added", "changed_from"} (added is false when they were already linked; changed_from is the
        type the link had when this call changed it, else null)."""
        rel = RelationshipType(type).value
        added, previous = await self.service.run(lambda s: s.lessons.relate(source, target, rel), create=False)
        return {"source": source, "target": target, "type": rel, "added": added, "changed_from": previous}

    async def list_lessons(
        self,
        tag: Annotated[str | None, Field(description="Only lessons with this tag.")] = None,
        status: Annotated[Literal["active", "archived", "deleted", "superseded", "all"],
                          Field(description="Lifecycle status to list.")] = "active",
        after: Annotated[str | None, Field(description="Only lessons whose id comes after this one: the "
                                                       "next_after of the page before.")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LISTED, description="How many lessons at most.")] = LISTED,
    ) -> dict[str, Any]:
        """List lessons by id, a page at a time (no search, no retrieval counted): id, version,
        status, tags and trigger of each. Call get_lesson for one lesson whole. Returns
        {"lessons": [...], "next_after": the last id listed when more follow (pass it as after for
        the next page), else null}."""
        lessons = await self.service.run(lambda s: s.lessons.list(tag, None if status == "all" else status,
                                                                  after, limit + 1), create=False)
        more = len(lessons) > limit
        lessons = lessons[:limit]
        return {"lessons": [{"id": x.id, "version": x.version, "status": x.status.value, "tags": x.tags,
                             "trigger": x.trigger} for x in lessons],
                "next_after": lessons[-1].id if more else None}

    async def get_lesson(self, lesson_id: LessonId) -> dict[str, Any]:
        """One lesson as it is now, whole: trigger, action, rationale, tags, links, version, status
        and usage. Reading it counts no retrieval. Returns the lesson."""
        return to_jsonable(await self.service.run(lambda s: s.lessons.get(lesson_id), create=False))

    # -- project context -----------------------------------------------------------------------------

    async def save_project_context(
        self,
        project_path: ProjectPath,
        session_id: SessionId = None,
        notes: Annotated[str | None, Field(description="Where things stand, for the next session (replaces the notes).")] = None,
        todos: Annotated[list[TodoInput] | None, Field(description="The full todo list (replaces the previous list).")] = None,
        decisions: Annotated[list[str] | None, Field(description="Decisions made this session (appended; the last 10 are kept current, so at most 10 new ones a save).")] = None,
        active_files: Annotated[list[str] | None, Field(description="Files in play (replaces the list).")] = None,
        catalogue: Annotated[dict[str, Any] | None, Field(description="The project's catalogue: a JSON object of what the project contains (replaces it; history keeps deltas).")] = None,
    ) -> dict[str, Any]:
        """Save where the project stands so the next session can pick up: call it before a session
        ends or after a milestone. Omitted fields keep their values. A save that changes anything is
        kept as a history row. Returns {"saved", "snapshot", "message"}."""
        from mgcp.models import Todo

        path = _path(project_path)
        todo_models = None if todos is None else [Todo(**t.model_dump(exclude={"created_at"})) for t in todos]
        snap = await self.service.run(lambda s: s.context.save(
            path, session_id, notes, todo_models, decisions, active_files, catalogue))
        message = (f"saved session {snap.session_number} of {path}" if snap
                   else "nothing changed; no history row written")
        return {"saved": snap is not None, "snapshot": to_jsonable(snap), "message": message}

    async def get_project_context(self, project_path: ProjectPath) -> dict[str, Any]:
        """The project's current context: notes, todos, recent decisions, active files, catalogue and
        session count. Call it at the start of a session to resume where the last one stopped."""
        return to_jsonable(await self.service.run(lambda s: s.context.get_project(_path(project_path)), create=False))

    async def get_context_history(
        self,
        project_path: ProjectPath,
        limit: Annotated[int, Field(ge=1, le=1_000_000, description="How many of the last snapshots.")] = HISTORY_SHOWN,
    ) -> dict[str, Any]:
        """The project's last saved snapshots (the last 10 unless limit says otherwise), oldest
        first: what changed from session to session. Returns {"history": [snapshot, ...], "total":
        how many the project has}."""
        path = _path(project_path)

        async def work(store):
            rows = await store.context.history(path, limit)
            project = await store.context.get_project(path)
            return rows, (await store.context.history_mark(project.project_id))[0]

        rows, total = await self.service.run(work, create=False)
        return {"history": to_jsonable(rows), "total": total}

    async def get_context_at_session(
        self,
        project_path: ProjectPath,
        session: Annotated[int, Field(ge=0, le=2**62, description="The session number.")],
    ) -> dict[str, Any]:
        """The project's context as it was at the end of a session, with the catalogue rebuilt from
        history and verified against its recorded hash. Call it to see what was known back then."""
        return to_jsonable(await self.service.run(lambda s: s.context.at(_path(project_path), session), create=False))

    # -- REM --------------------------------------------------------------------------------------

    async def rem_status(self, project_path: ProjectPath) -> dict[str, Any]:
        """REM schedule for the project: for each operation its last run, the session it is next due
        and whether it is due now, plus the number of findings awaiting review. Marks findings whose
        subject changed since as stale; changes nothing else."""
        from mgcp import engine

        cfg = self.service.rem_config()
        return to_jsonable(await self.service.run(lambda s: engine.status(s, cfg, _path(project_path)), create=False))

    async def rem_report(self, project_path: ProjectPath) -> dict[str, Any]:
        """The project's last REM run with the findings it raised (their status now), and the
        findings waiting for this project's review, without running anything; each finding as a
        line (id, operation, kind, title, status), the first 50 of each list. rem_run shows them
        whole, one at a time. Returns {"report": last run or null, "pending": [...],
        "pending_count", "pending_by_kind", "message"}."""
        from mgcp import engine
        from mgcp.surfaces import format

        result = await self.service.run(lambda s: engine.report(s, _path(project_path)), create=False)
        waiting = f"{len(result.pending)} finding(s) waiting for review"
        if result.last_run is None and not result.unfinished_run:
            message = f"no REM run yet for this project (start one with rem_run); {waiting}"
        elif result.last_run is None:
            message = f"no REM run of this project finished yet; {waiting}"
        else:
            message = (f"last run {result.last_run.run_id} at session {result.last_run.session_number}: "
                       f"{len(result.last_run.findings)} finding(s); {waiting}")
        if result.unfinished_run:
            message += f" ({format.unfinished(result.unfinished_run)})"

        if len(result.pending) > FINDINGS_LISTED:
            message += f" (the first {FINDINGS_LISTED} listed; rem_run shows each in turn)"
        report = None
        if result.last_run is not None:
            findings = result.last_run.findings
            report = {**to_jsonable(result.last_run.model_copy(update={"findings": []})),
                      "findings": _listed(findings), "findings_count": len(findings)}
        return {"report": report, "pending": _listed(result.pending), "pending_count": len(result.pending),
                "pending_by_kind": dict(Counter(f.kind for f in result.pending)), "message": message}

    def _step(self, step: ReviewStep) -> dict[str, Any]:
        return {"finding": finding_prompt(step.finding) if step.finding else None,
                "remaining": step.remaining, "pending": step.pending}

    async def rem_run(
        self,
        project_path: ProjectPath,
        operations: Annotated[list[str] | None, Field(description=(
            "Operations to run even if not due: staleness_scan, duplicate_detection, "
            "community_detection, knowledge_extraction, context_summary, pattern_reinforcement, "
            "contradiction_scan. Omit to run what is due."))] = None,
    ) -> dict[str, Any]:
        """Run a REM consolidation cycle (the due operations, or the named ones) and start the review.
        Returns {"run": summary, "finding": the first pending finding or null, "remaining": how many
        more are pending after it, "message"}. Present the finding to the user as one question
        (AskUserQuestion: question, header, options, multiSelect), then call rem_answer with their
        choice; it returns the next finding. Nothing is changed until the user answers."""
        from mgcp import engine

        path = _path(project_path)
        engine.check_operations(operations)
        cfg = self.service.rem_config()

        async def work(store):
            result = await engine.run(store, cfg, path, operations, progress=self.service.log)
            return result.report, await engine.next_finding(store, path)

        report, step = await self.service.run(work)
        failed = [o.operation for o in report.operations if o.error]
        message = (f"REM run {report.run_id} at session {report.session_number}: ran "
                   + (", ".join(o.operation for o in report.operations) or "nothing (no operation is due)")
                   + f"; {len(report.findings)} new finding(s), {step.pending} pending review"
                   + (f"; FAILED: {', '.join(failed)}" if failed else "")
                   + ("" if step.finding else "; no findings to review"))
        ran = [{"operation": o.operation, "new_findings": o.findings, "duration_ms": o.duration_ms,
                **({"error": o.error} if o.error else {})} for o in report.operations]
        return {"run": {"run_id": report.run_id, "session_number": report.session_number,
                        "duration_ms": report.duration_ms, "operations": ran,
                        "new_findings": len(report.findings)},
                **self._step(step), "message": message}

    async def rem_answer(
        self,
        project_path: ProjectPath,
        finding_id: Annotated[str, Field(description="The finding_id of the question answered.")],
        option: Annotated[int, Field(ge=1, le=1000, description="The chosen option's number (from 1).")],
        input: Annotated[str | dict[str, Any] | None, Field(description=(
            "Text for an option that needs input (see needs_input). For a drafted lesson, edits as an "
            "object such as {\"action\": \"...\", \"tags\": [\"...\"]} (or the same as a JSON string)."))] = None,
        selection: Annotated[list[str] | None, Field(description="For a multi-select option: the chosen ids (a subset of choices).")] = None,
    ) -> dict[str, Any]:
        """Apply the user's answer to a REM finding of this project (one transaction, undoable with
        rem_undo) and get the next question of the same project. Returns {"result": what changed,
        "finding": the next pending finding in the same shape or null, "remaining": how many more
        after it, "pending": how many in all, "message"}. A "skip" answer leaves the finding pending
        and moves on."""
        from mgcp import engine

        path = _path(project_path)
        cfg = self.service.rem_config()
        if isinstance(input, dict):
            input = json.dumps(input, ensure_ascii=False)

        async def work(store):
            outcome = await engine.resolve(store, cfg, finding_id, option, input or None, selection,
                                           project_path=path)
            return outcome, await engine.next_finding(store, path, after=outcome.finding_id)

        outcome, step = await self.service.run(work, create=False)
        if step.finding:
            message = f"{outcome.message}. Next question: finding {step.finding.id} ({step.remaining} more after it)."
        elif step.pending:
            message = (f"{outcome.message}. No more findings after it in the queue; {step.pending} "
                       "earlier finding(s) stay pending (rem_run shows them again).")
        else:
            message = f"{outcome.message}. No findings remain."
        return {"result": to_jsonable(outcome), **self._step(step), "message": message}

    async def rem_undo(
        self,
        project_path: ProjectPath,
        finding_id: Annotated[str | None, Field(description="Undo this applied finding.")] = None,
        run_id: Annotated[int | None, Field(ge=1, le=2**62, description="Or: undo every action of this REM run.")] = None,
        force: Annotated[bool, Field(description="Overwrite later changes (ask the user first: without force the refusal lists them).")] = False,
    ) -> dict[str, Any]:
        """Undo an applied REM finding of this project, or every action of one of its runs,
        restoring exactly what changed. Refused, with what would be overwritten, if the content
        changed since (retrieval counts never block it); force overwrites. Give finding_id or
        run_id. Returns {"message"}."""
        from mgcp import engine

        if (finding_id is None) == (run_id is None):
            raise InvalidInputError("name a finding id or a run id (one of them)")
        path = _path(project_path)
        message = await self.service.run(
            lambda s: engine.undo_finding(s, finding_id, force, project_path=path) if finding_id
            else engine.undo_run(s, run_id, force, project_path=path), create=False)
        return {"message": message}

    # -- recall and outcomes ------------------------------------------------------------------------

    async def lesson_outcome(
        self,
        lesson_id: LessonId,
        helped: Annotated[bool, Field(description="true: applying the lesson helped; false: it did not.")],
        note: Annotated[str | None, Field(description="What happened (optional).")] = None,
        project_path: Annotated[str | None, Field(description="The project's absolute path (optional).")] = None,
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Report whether a lesson you applied helped. Call it after using a lesson from recall or
        query_lessons. Failures in a row raise a REM finding for the user (refine, archive, keep);
        a success resets the streak. Returns the lesson's counts, success rate and any finding raised."""
        from mgcp.engine.outcomes import record_outcome

        cfg = self.service.rem_config()
        result = await self.service.run(lambda s: record_outcome(
            s, cfg, lesson_id, helped, note, session_id, _optional_path(project_path)), create=False)
        finding = result.pop("finding")
        result.pop("streak_started", None)  # a row id of the outcome log: nothing an agent can use
        message = (f"recorded: {lesson_id} {result['outcome']} ({result['helped']} helped, {result['failed']} failed)"
                   + (f"; raised finding {finding.id} for review: {finding.title}" if finding else ""))
        return {**result, "finding": finding_prompt(finding) if finding else None, "message": message}

    async def recall(
        self,
        task: Annotated[str, Field(description=f"The task at hand, in words (at most {MAX_QUERY:,} characters).")],
        project_path: Annotated[str | None, Field(description="The project's absolute path, for its state (optional).")] = None,
        budget: Annotated[int | None, Field(ge=400, le=1_000_000, description="At most this many characters (default 8000).")] = None,
    ) -> dict[str, Any]:
        """One Markdown memory section for a task: the project's state, constraints that always
        apply, preferences, the lessons most relevant to the task and recent error solutions, within
        a character budget. Call it when starting a task; use it, do not quote it. Its lessons count
        as used. Returns {"text", "chars", "budget", "lessons", "sections", "trimmed"}."""
        from mgcp.engine.recall import recall as build

        cfg = self.service.rem_config()
        result = await self.service.run(
            lambda s: build(s, cfg, _optional_path(project_path), task, budget), create=False)
        return result.to_dict()

    async def lesson_stats(self) -> dict[str, Any]:
        """The knowledge base in figures: lessons by kind and tier, lessons never used, queries that
        found something or nothing, outcomes and the success rate."""
        from mgcp.engine.outcomes import stats

        return await self.service.run(stats, create=False)

    # -- pattern reinforcement ----------------------------------------------------------------------

    async def pattern_reinforcement_run(
        self,
        project_path: ProjectPath,
        force: Annotated[bool, Field(description="Run even when the operation is off or not due.")] = False,
    ) -> dict[str, Any]:
        """Run pattern reinforcement now: what recurred across sessions (lessons added again,
        decisions, note sentences) becomes reinforced patterns with counts and provenance. It runs
        when enabled and due; force runs it regardless. Returns {"ran", "reason", "run": summary or
        null, "finding": the first pending finding or null, "remaining", "message"}."""
        from mgcp import engine

        path = _path(project_path)
        cfg = self.service.rem_config()

        async def work(store):
            result, why = await engine.run_on_demand(store, cfg, path, "pattern_reinforcement", force,
                                                     progress=self.service.log)
            return result, why, await engine.next_finding(store, path)

        result, why, step = await self.service.run(work)
        if result is None:
            return {"ran": False, "reason": why, "run": None, **self._step(step),
                    "message": f"pattern_reinforcement did not run: {why}"}
        report = result.report
        op = report.operations[0]
        if op.summary.get("skipped"):
            message = (f"pattern_reinforcement ran ({why}) in run {report.run_id}: nothing it reads changed "
                       "since its last run, so its patterns and findings stand")
        else:
            message = (f"pattern_reinforcement ran ({why}) in run {report.run_id}: {op.summary.get('patterns', 0)} "
                       f"pattern(s), {op.summary.get('written', 0)} written, {op.findings} new finding(s)"
                       + (f"; FAILED: {op.error}" if op.error else ""))
        return {"ran": True, "reason": why,
                "run": {"run_id": report.run_id, "session_number": report.session_number,
                        "duration_ms": report.duration_ms, "summary": op.summary, "new_findings": op.findings,
                        **({"error": op.error} if op.error else {})},
                **self._step(step), "message": message}
