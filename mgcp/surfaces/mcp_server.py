"""The MCP server (`mgcp serve`): lessons, project context and REM review as tools, over stdio.

The only importer of the `mcp` SDK (2.x: `mcp.server.mcpserver.MCPServer`, the successor of
FastMCP). Like the CLI it is a thin skin: each tool parses its arguments, calls the store or the
engine, and returns JSON. Contract:

- stdout carries nothing but the protocol; logs go to stderr.
- Every call opens the store and closes it before returning, so the server never holds a write lock
  between calls and other processes (the CLI, the hook) can use the database meanwhile.
- An `MgcpError` becomes a tool error (isError) whose text is the message the CLI prints after
  "Error: "; any other exception becomes a tool error too (and a traceback on stderr); the server
  keeps running.
- REM review: `rem_run` and `rem_answer` return one pending finding at a time, shaped for an
  AskUserQuestion-style prompt (see `finding_prompt`), with options numbered from 1 as everywhere.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Annotated, Any, Awaitable, Callable, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from mgcp import __version__
from mgcp.errors import InvalidInputError, MgcpError
from mgcp.models import RemFinding
from mgcp.surfaces.common import project_path as normalize_project_path
from mgcp.surfaces.common import to_jsonable

log = logging.getLogger("mgcp.mcp")

INSTRUCTIONS = """\
mgcp keeps versioned lessons (what to do in which situation, and why) and each project's context
across sessions. Call query_lessons before unfamiliar work; add_lesson when you learn something
reusable, refine_lesson when a lesson proved insufficient (say why). Call get_project_context at the
start of a session and save_project_context before it ends. When reminded that a REM cycle is due,
call rem_run and walk the user through each finding with rem_answer, one question at a time."""

RELATIONSHIP_TYPES = Literal["related", "prerequisite", "sequence_next", "alternative", "complements",
                             "specializes", "generalizes", "contradicts", "child_of"]

# AskUserQuestion headers are short chips (at most 12 characters).
HEADERS = {
    "duplicate_merge": "Duplicate", "duplicate_review": "Near-dup", "unlinked_cluster": "Cluster",
    "orphan": "Orphan", "stale_unused": "Unused", "popular_unrefined": "Needs update",
    "unmatched_trigger": "Old trigger", "theme": "New lesson", "uncaptured_decision": "Decision",
    "stale_todo": "Old todo",
}
OPERATION_HEADERS = {
    "staleness_scan": "Stale", "duplicate_detection": "Duplicate", "community_detection": "Links",
    "knowledge_extraction": "Extraction", "context_summary": "Summary",
}

ProjectPath = Annotated[str, Field(description="The project's absolute path (the agent's working "
                                               "directory); it need not exist on disk.")]
LessonId = Annotated[str, Field(description="The lesson id, e.g. 'verify-api-signatures'.")]
SessionId = Annotated[str | None, Field(description="The agent's session id, if known.")]


class TodoInput(BaseModel):
    content: str = Field(description="What is to be done.")
    status: Literal["pending", "in_progress", "completed"] = "pending"


# -- the AskUserQuestion shape --------------------------------------------------------------------

def header_for(finding: RemFinding) -> str:
    header = HEADERS.get(finding.kind) or OPERATION_HEADERS.get(finding.operation)
    return (header or finding.kind.replace("_", " ").capitalize())[:12]


MAX_PROMPT_OPTIONS = 4


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
        # AskUserQuestion offers at most four options; "skip for now" is what not answering means.
        options = [o for o in options if o["number"] != skip]
    how = [f"Call rem_answer with finding_id={finding.id!r} and the chosen option number."]
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


# -- plumbing -------------------------------------------------------------------------------------

class Service:
    """What every tool needs: the database and the REM config, both resolved per call."""

    def __init__(self, db: str | None, config: str | None):
        self.db = db
        self.config = config

    async def run(self, work: Callable[[Any], Awaitable[Any]]) -> Any:
        from mgcp.config import db_path
        from mgcp.persistence import Store

        async with Store.open(db_path(self.db)) as store:
            return await work(store)

    def rem_config(self):
        from mgcp.config import load_config

        return load_config(self.config)


def tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def guarded(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn MgcpError into a tool error whose text is exactly the CLI's message, and anything else
    into a tool error that names the failure (with a traceback on stderr) instead of ending the
    server. (A raised ToolError would reach the client prefixed with "Error executing tool ...".)"""

    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except MgcpError as exc:
            return tool_error(str(exc))
        except Exception as exc:
            log.exception("tool %s failed unexpectedly", fn.__name__)
            return tool_error(f"unexpected error in {fn.__name__}: {type(exc).__name__}: {exc} "
                              "(a bug in mgcp; the traceback is in the server's log)")

    return wrapper


def build_server(db: str | None = None, config: str | None = None) -> MCPServer:
    """The MCP server with every tool registered (not started)."""
    from mgcp import engine

    service = Service(db, config)
    server = MCPServer("mgcp", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(fn):
        server.add_tool(guarded(fn), name=fn.__name__)
        return fn

    # -- lessons ----------------------------------------------------------------------------------

    @tool
    async def add_lesson(
        lesson_id: LessonId,
        trigger: Annotated[str, Field(description="When the lesson applies: the situation and keywords an agent would search for.")],
        action: Annotated[str, Field(description="What to do in that situation.")],
        rationale: Annotated[str | None, Field(description="Why.")] = None,
        tags: Annotated[list[str] | None, Field(description="Tags, e.g. ['testing', 'sqlite'].")] = None,
        parent_id: Annotated[str | None, Field(description="The id of a broader parent lesson.")] = None,
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Store a new reusable lesson (version 1). Call it when you learned something that will help
        in future sessions: a mistake to avoid, a check that paid off. Returns the lesson."""
        return to_jsonable(await service.run(lambda s: s.add_lesson(
            lesson_id, trigger, action, rationale, tags or [], parent_id, session_id=session_id)))

    @tool
    async def refine_lesson(
        lesson_id: LessonId,
        reason: Annotated[str, Field(description="Why the current version was insufficient (required; kept in the history).")],
        trigger: Annotated[str | None, Field(description="A new trigger (omit to keep).")] = None,
        action: Annotated[str | None, Field(description="A new action (omit to keep).")] = None,
        rationale: Annotated[str | None, Field(description="A new rationale (omit to keep).")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, replacing the old (omit to keep).")] = None,
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Improve an existing lesson: writes version N+1 and keeps every earlier version with the
        reason. Call it when a lesson proved wrong, vague or incomplete. Returns the new lesson."""
        return to_jsonable(await service.run(lambda s: s.refine_lesson(
            lesson_id, reason, trigger, action, rationale, tags, session_id)))

    @tool
    async def query_lessons(
        text: Annotated[str, Field(description="The situation or task, in words, e.g. 'writing a database migration'.")],
        limit: Annotated[int, Field(ge=1, le=100, description="How many lessons at most.")] = 5,
        project_path: Annotated[str | None, Field(description="The project's path, to attribute the query (optional).")] = None,
    ) -> dict[str, Any]:
        """Find the active lessons most relevant to a situation, best first. Call it before starting
        unfamiliar work. Each returned lesson counts as retrieved (usage count, last used), and the
        query is logged for REM's staleness scan. Returns {"results": [lesson + score]}."""
        async def work(store):
            project = await store.find_project(normalize_project_path(project_path)) if project_path else None
            return await store.query_lessons(text, limit, project.project_id if project else None)

        results = await service.run(work)
        return {"results": [{"score": round(score, 4), **to_jsonable(lesson)} for lesson, score in results]}

    @tool
    async def get_lesson_history(lesson_id: LessonId) -> dict[str, Any]:
        """Every version of a lesson, oldest first, each with the reason it was refined. Call it to
        see how a lesson evolved before refining it. Returns {"lesson_id", "versions": [...]}."""
        versions = await service.run(lambda s: s.lesson_versions(lesson_id))
        return {"lesson_id": lesson_id, "versions": to_jsonable(versions)}

    @tool
    async def link_lessons(
        source: Annotated[str, Field(description="One lesson id.")],
        target: Annotated[str, Field(description="The other lesson id.")],
        type: Annotated[RELATIONSHIP_TYPES, Field(description="The relationship.")] = "related",
    ) -> dict[str, Any]:
        """Link two lessons (both directions) so that finding one leads to the other. Returns
        {"source", "target", "type", "added"} (added is false when they were already linked)."""
        added = await service.run(lambda s: s.link_lessons(source, target, type))
        return {"source": source, "target": target, "type": type, "added": added}

    # -- project context ---------------------------------------------------------------------------

    @tool
    async def save_project_context(
        project_path: ProjectPath,
        session_id: SessionId = None,
        notes: Annotated[str | None, Field(description="Where things stand, for the next session (replaces the notes).")] = None,
        todos: Annotated[list[TodoInput] | None, Field(description="The full todo list (replaces the previous list).")] = None,
        decisions: Annotated[list[str] | None, Field(description="Decisions made this session (appended; the last 10 are kept current).")] = None,
        active_files: Annotated[list[str] | None, Field(description="Files in play (replaces the list).")] = None,
        catalogue: Annotated[dict[str, Any] | None, Field(description="The project's catalogue: a JSON object of what the project contains (replaces it; history keeps deltas).")] = None,
    ) -> dict[str, Any]:
        """Save where the project stands so the next session can pick up: call it before a session
        ends or after a milestone. Omitted fields keep their values. A save that changes anything is
        kept as a history row. Returns {"saved", "snapshot", "message"}."""
        from mgcp.models import Todo

        path = normalize_project_path(project_path)
        todo_models = None if todos is None else [Todo(content=t.content, status=t.status) for t in todos]
        snap = await service.run(lambda s: s.save_context(
            path, session_id, notes, todo_models, decisions, active_files, catalogue))
        message = (f"saved session {snap.session_number} of {path}" if snap
                   else "nothing changed; no history row written")
        return {"saved": snap is not None, "snapshot": to_jsonable(snap), "message": message}

    @tool
    async def get_project_context(project_path: ProjectPath) -> dict[str, Any]:
        """The project's current context: notes, todos, recent decisions, active files, catalogue and
        session count. Call it at the start of a session to resume where the last one stopped."""
        return to_jsonable(await service.run(lambda s: s.get_project(normalize_project_path(project_path))))

    @tool
    async def get_context_history(
        project_path: ProjectPath,
        limit: Annotated[int | None, Field(ge=1, description="Only the last N snapshots.")] = None,
    ) -> dict[str, Any]:
        """The project's saved snapshots, oldest first (the last N with limit): what changed from
        session to session. Returns {"history": [snapshot, ...]}."""
        rows = await service.run(lambda s: s.context_history(normalize_project_path(project_path), limit))
        return {"history": to_jsonable(rows)}

    @tool
    async def get_context_at_session(
        project_path: ProjectPath,
        session: Annotated[int, Field(ge=0, description="The session number.")],
    ) -> dict[str, Any]:
        """The project's context as it was at the end of a session, with the catalogue rebuilt from
        history and verified against its recorded hash. Call it to see what was known back then."""
        snap, catalogue = await service.run(lambda s: s.context_at(normalize_project_path(project_path), session))
        return {"session": session, "snapshot_session": snap.session_number, "verified": True,
                "notes": snap.notes, "todos": to_jsonable(snap.todos), "active_files": snap.active_files,
                "recent_decisions": snap.recent_decisions, "catalogue": catalogue,
                "catalogue_hash": snap.catalogue_hash}

    # -- REM ---------------------------------------------------------------------------------------

    @tool
    async def rem_status(project_path: ProjectPath) -> dict[str, Any]:
        """REM schedule for the project: for each operation its last run, the session it is next due
        and whether it is due now, plus the number of findings awaiting review. Read-only."""
        cfg = service.rem_config()
        return to_jsonable(await service.run(lambda s: engine.status(s, cfg, normalize_project_path(project_path))))

    @tool
    async def rem_report(project_path: ProjectPath) -> dict[str, Any]:
        """The project's last REM run and every finding it raised (with its status now), without
        running anything. Returns {"report": ... or null, "message"}."""
        result = await service.run(lambda s: engine.report(s, normalize_project_path(project_path)))
        if result is None:
            return {"report": None, "message": "no REM run yet for this project; start one with rem_run"}
        return {"report": to_jsonable(result),
                "message": f"last run {result.run_id} at session {result.session_number}: "
                           f"{len(result.findings)} finding(s)"}

    @tool
    async def rem_run(
        project_path: ProjectPath,
        operations: Annotated[list[str] | None, Field(description=(
            "Operations to run even if not due: staleness_scan, duplicate_detection, "
            "community_detection, knowledge_extraction, context_summary. Omit to run what is due."))] = None,
    ) -> dict[str, Any]:
        """Run a REM consolidation cycle (the due operations, or the named ones) and start the review.
        Returns {"run": summary, "finding": the first pending finding or null, "remaining": how many
        more are pending, "message"}. Present the finding to the user as one question
        (AskUserQuestion: question, header, options, multiSelect), then call rem_answer with their
        choice; it returns the next finding. Nothing is changed until the user answers."""
        path = normalize_project_path(project_path)
        engine.check_operations(operations)
        cfg = service.rem_config()

        async def work(store):
            report = await engine.run_cycle(store, cfg, path, operations, progress=log.info)
            return report, await engine.pending_findings(store, path)

        report, pending = await service.run(work)
        ran = [{"operation": o.operation, "new_findings": o.findings, "duration_ms": o.duration_ms,
                **({"error": o.error} if o.error else {})} for o in report.operations]
        failed = [o.operation for o in report.operations if o.error]
        message = (f"REM run {report.run_id} at session {report.session_number}: ran "
                   + (", ".join(o.operation for o in report.operations) or "nothing (no operation is due)")
                   + f"; {len(report.findings)} new finding(s), {len(pending)} pending review"
                   + (f"; FAILED: {', '.join(failed)}" if failed else ""))
        return {
            "run": {"run_id": report.run_id, "session_number": report.session_number,
                    "duration_ms": report.duration_ms, "operations": ran,
                    "new_findings": len(report.findings)},
            "finding": finding_prompt(pending[0]) if pending else None,
            "remaining": max(len(pending) - 1, 0),
            "message": message if pending else message + "; no findings to review",
        }

    @tool
    async def rem_answer(
        finding_id: Annotated[str, Field(description="The finding_id of the question answered.")],
        option: Annotated[int, Field(ge=1, description="The chosen option's number (from 1).")],
        input: Annotated[str | None, Field(description="Text for an option that needs input (see needs_input).")] = None,
        selection: Annotated[list[str] | None, Field(description="For a multi-select option: the chosen ids (a subset of choices).")] = None,
    ) -> dict[str, Any]:
        """Apply the user's answer to a REM finding (one transaction, undoable with rem_undo) and get
        the next question. Returns {"result": what changed, "finding": the next pending finding in
        the same shape or null, "remaining": how many more after it, "message"}. A "skip" answer
        leaves the finding pending and moves on."""
        cfg = service.rem_config()

        async def work(store):
            finding = await store.get_finding(finding_id)
            project = await store.get_project_by_id(finding.project_id)
            order = [f.id for f in await engine.pending_findings(store, project.project_path)]
            outcome = await engine.resolve(store, cfg, finding_id, option, input or None, selection)
            pending = await engine.pending_findings(store, project.project_path)
            return outcome, order, pending

        outcome, order, pending = await service.run(work)
        # Move forward through the list, so that a skipped finding is not asked again at once.
        here = order.index(finding_id) if finding_id in order else -1
        ahead = [f for f in pending if f.id in order and order.index(f.id) > here]
        following = ahead[0] if ahead else None
        behind = len(pending) - len(ahead)
        if following:
            message = f"{outcome.message}. Next question: finding {following.id} ({len(ahead) - 1} more after it)."
        elif pending:
            message = (f"{outcome.message}. No more findings in this pass; {behind} skipped "
                       "finding(s) stay pending (rem_run shows them again).")
        else:
            message = f"{outcome.message}. No findings remain."
        return {
            "result": to_jsonable(outcome),
            "finding": finding_prompt(following) if following else None,
            "remaining": len(ahead) - 1 if following else 0,
            "pending": len(pending),
            "message": message,
        }

    @tool
    async def rem_undo(
        finding_id: Annotated[str | None, Field(description="Undo this applied finding.")] = None,
        run_id: Annotated[int | None, Field(description="Or: undo every action of this REM run.")] = None,
    ) -> dict[str, Any]:
        """Undo an applied REM finding, or every action of a run, restoring exactly what changed
        (refused if later edits would be overwritten). Give finding_id or run_id. Returns {"message"}."""
        if (finding_id is None) == (run_id is None):
            raise InvalidInputError("name a finding id or a run id (one of them)")
        message = await service.run(lambda s: engine.undo_finding(s, finding_id) if finding_id
                                    else engine.undo_run(s, run_id))
        return {"message": message}

    return server


def serve(db: str | None, config: str | None) -> None:
    """Run the MCP server on stdio until the client closes it."""
    from mgcp.config import db_path

    # Plain one-line logs on stderr; configured first, so the SDK's own setup (a rich console
    # handler) leaves it alone.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    log.setLevel(logging.INFO)  # mgcp's own progress lines; the SDK's stay at WARNING
    server = build_server(db, config)
    log.info("mgcp %s: MCP server on stdio, database %s", __version__, db_path(db))
    server.run("stdio")
