"""What is due, running REM operations, and the run ledger.

For a project at session `s`, an operation is due when `s >= next_due(last)` (mgcp.schedule, the
one implementation); running it records `last = s`, so missed runs never pile up. Each operation is
a pure function in `mgcp.operations`; this module feeds it data from the store and stores what it
finds. A finding whose fingerprint is already pending, or was rejected, is not stored again.
Community summaries and context summaries are written automatically and recorded as the run's own
actions, so undoing the run removes them too.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Callable

from mgcp import schedule
from mgcp.config import OPERATIONS, RemConfig, normalize_path
from mgcp.errors import InvalidInputError
from mgcp.models import (OperationResult, OperationSchedule, ProjectContext, RemCycleReport, RemFinding,
                         RemStatus)
from mgcp.operations.shared import cycle_cache
from mgcp.persistence import Store
from mgcp.persistence.core import utcnow
from mgcp.persistence.sessions import project_id_for

Progress = Callable[[str], None]


def check_operations(names: list[str] | None) -> list[str] | None:
    if not names:
        return None
    unknown = [n for n in names if n not in OPERATIONS]
    if unknown:
        raise InvalidInputError(f"unknown operation {unknown[0]!r}; allowed: {', '.join(OPERATIONS)}")
    return list(dict.fromkeys(names))


def schedules(config: RemConfig, project_path: str, state: dict[str, dict], session: int) -> list[OperationSchedule]:
    last_runs = {op: row.get("last_run_session") for op, row in state.items()}
    return [
        OperationSchedule(operation=op, strategy=strategy, params=params, last_run_session=last,
                          last_run_timestamp=state.get(op, {}).get("last_run_timestamp"),
                          next_due_session=due_at, due=due)
        for op, strategy, params, last, due_at, due in schedule.plan(config.for_project(project_path),
                                                                     last_runs, session)
    ]


async def known_project(store: Store, project_path: str) -> ProjectContext:
    """The project, or (without writing anything) a new one at session 0."""
    project = await store.find_project(project_path)
    if project is None:
        path = normalize_path(project_path)
        project = ProjectContext(project_id=project_id_for(path), project_name=os.path.basename(path),
                                 project_path=path, last_accessed=utcnow())
    return project


async def status(store: Store, config: RemConfig, project_path: str) -> RemStatus:
    project = await known_project(store, project_path)
    ops = schedules(config, project.project_path, await store.rem_state(project.project_id),
                    project.session_count)
    from mgcp.engine.findings import pending_findings

    pending = await pending_findings(store, project_path)
    return RemStatus(project_id=project.project_id, project_path=project.project_path,
                     session_number=project.session_count, operations=ops,
                     pending_findings=len(pending))


def _finding_id(fingerprint: str, run_id: int) -> str:
    return hashlib.sha256(f"{fingerprint}:{run_id}".encode()).hexdigest()[:8]


async def run_cycle(store: Store, config: RemConfig, project_path: str,
                    operations: list[str] | None = None, progress: Progress | None = None,
                    auto: bool = False) -> RemCycleReport:
    """Run the due operations (or the named ones) for the project and store their findings."""
    operations = check_operations(operations)
    progress = progress or (lambda message: None)
    project = await store.ensure_project(project_path)
    session = project.session_count
    plan = schedules(config, project.project_path, await store.rem_state(project.project_id), session)
    chosen = [p for p in plan if (p.operation in operations if operations else p.due)]
    settings = config.for_project(project.project_path)
    started, t0 = utcnow(), time.perf_counter()
    run_id = await store.start_run(project.project_id, session, [p.operation for p in chosen], auto)
    report = RemCycleReport(run_id=run_id, project_id=project.project_id,
                            project_path=project.project_path, session_number=session,
                            started_at=started, auto=auto)
    errors = []
    inputs = _Inputs(store, project.project_id)
    with cycle_cache():  # operations share vectorised lessons and mined notes
        for index, plan_item in enumerate(chosen, 1):
            op = plan_item.operation
            progress(f"[{index}/{len(chosen)}] {op} ...")
            result, stored = await _run_operation(store, project, plan_item, settings[op], session,
                                                  run_id, inputs)
            if result.error:
                errors.append(f"{op}: {result.error}")
            report.findings.extend(stored)
            progress(f"[{index}/{len(chosen)}] {op}: {result.findings} finding(s) in {result.duration_ms:.0f} ms"
                     + (f" - FAILED: {result.error}" if result.error else ""))
            report.operations.append(result)
    report.duration_ms = round((time.perf_counter() - t0) * 1000, 1)
    async with store.transaction():
        await store.finish_run(run_id, report.duration_ms, len(report.findings), errors,
                               [r.model_dump() for r in report.operations])
    return report


async def _run_operation(store: Store, project: ProjectContext, plan_item: OperationSchedule,
                         settings: dict, session: int, run_id: int,
                         inputs: _Inputs) -> tuple[OperationResult, list[RemFinding]]:
    """One operation: the analysis outside any transaction (it may take a while and must not hold
    the write lock), then what it produced, its findings and its schedule cursor in one transaction.
    A failure is reported in the result; it must not lose the other operations' work."""
    op, t0, stored = plan_item.operation, time.perf_counter(), []
    try:
        findings, summary, output = await RUNNERS[op](store, project, settings, run_id, inputs)
        async with store.transaction():
            if output:
                name, write = output
                async with store.recording() as changes:
                    await write()
                if changes:
                    await store.record_action(None, run_id, name, changes, auto=True)
            stored = await _store_findings(store, findings, project.project_id, run_id)
            await store.record_operation_run(
                project.project_id, op, session, schedule.next_due(plan_item.strategy, plan_item.params, session),
                {"findings": len(stored), **summary})
        result = OperationResult(operation=op, findings=len(stored), summary=summary)
    except Exception as exc:
        stored, result = [], OperationResult(operation=op, error=f"{type(exc).__name__}: {exc}")
    result.duration_ms = round((time.perf_counter() - t0) * 1000, 1)
    return result, stored


async def _store_findings(store: Store, findings: list[RemFinding], project_id: str, run_id: int) -> list[RemFinding]:
    stored = []
    now = utcnow()
    async with store.transaction():
        for finding in findings:
            if await store.finding_by_fingerprint(finding.fingerprint):
                continue  # already pending, or answered "keep" for this very subject
            finding = finding.model_copy(update={
                "id": _finding_id(finding.fingerprint, run_id), "project_id": project_id,
                "run_id": run_id, "created_at": now})
            await store.insert_finding(finding)
            stored.append(finding)
    return stored


async def report(store: Store, project_path: str) -> RemCycleReport | None:
    """The last finished run of the project and the findings it raised (with their status now)."""
    project = await known_project(store, project_path)
    run = await store.last_run(project.project_id)
    if run is None:
        return None
    return RemCycleReport(
        run_id=run["id"], project_id=project.project_id, project_path=project.project_path,
        session_number=run["session_number"], started_at=run["started_at"],
        duration_ms=run["duration_ms"] or 0.0, auto=bool(run["auto"]),
        operations=[OperationResult(**o) for o in json.loads(run["operations"]) if isinstance(o, dict)],
        findings=await store.findings(None, None, run_id=run["id"]))


# -- operation runners: data from the store in, findings out ---------------------------------------

def _now() -> datetime:
    return datetime.now(timezone.utc)


class _Inputs:
    """What the operations read, loaded once per cycle: the active lessons, and the project's
    history from the earliest session any operation asked for. No operation changes either (findings
    are applied later, by review or --auto), so every operation of the cycle sees the same data."""

    def __init__(self, store: Store, project_id: str):
        self.store, self.project_id = store, project_id
        self.active: list | None = None
        self.after: int | None = None
        self.snapshots: list = []

    async def lessons(self) -> list:
        if self.active is None:
            self.active = await self.store.list_lessons()
        return self.active

    async def history(self, after_session: int) -> list:
        """Snapshots of sessions after `after_session`, oldest first."""
        if self.after is None or after_session < self.after:
            self.snapshots = await self.store.history_since(self.project_id, after_session)
            self.after = after_session
        return [s for s in self.snapshots if s.session_number > after_session]


# Each returns (findings, summary, output): output is None or (action name, an async function that
# writes the operation's automatic output); the engine runs it in the operation's transaction and
# records it as an action of the run, so that `rem undo --run` takes it back.

async def _staleness(store, project, settings, run_id, inputs):
    from mgcp.operations import staleness_scan

    now = _now()
    since = (now - timedelta(days=settings["query_window_days"])).isoformat()
    queries = await store.recent_queries(since)
    findings = staleness_scan.run(await inputs.lessons(), queries, now, settings)
    return findings, {"queries_in_window": len(queries)}, None


async def _duplicates(store, project, settings, run_id, inputs):
    from mgcp.operations import duplicate_detection

    active = await inputs.lessons()
    return duplicate_detection.run(active, settings), {"lessons": len(active)}, None


async def _communities(store, project, settings, run_id, inputs):
    from mgcp.operations import community_detection

    previous = await store.last_community_run() or {}
    result = community_detection.run(await inputs.lessons(), previous.get("communities"), settings,
                                     previous.get("graph_hash"), previous.get("modularity") or 0.0)
    if result.unchanged:
        return [], {"communities": len(result.communities), "unchanged": True}, None

    async def write():
        await store.record_community_run(run_id, result.graph_hash, result.modularity, result.communities)
        for community in result.communities:
            await store.write_community_summary(community)

    return result.findings, {"communities": len(result.communities),
                             "modularity": round(result.modularity, 4),
                             **{k: len(v) for k, v in result.changes.items()}}, ("write_community_summaries", write)


async def _extraction(store, project, settings, run_id, inputs):
    from mgcp.operations import knowledge_extraction

    state = (await store.rem_state(project.project_id)).get("knowledge_extraction", {})
    history = await inputs.history(int(state.get("last_run_session") or 0) - 1)
    findings = knowledge_extraction.run(history, await inputs.lessons(), settings)
    for finding in findings:
        finding.fingerprint = hashlib.sha256(f"{project.project_id}:{finding.fingerprint}".encode()).hexdigest()
    return findings, {"snapshots": len(history)}, None


async def _summary(store, project, settings, run_id, inputs):
    from mgcp.operations import context_summary

    last = await store.last_summary(project.project_id)
    history = await inputs.history(last["to_session"] if last else -1)
    result = context_summary.run(history, settings)
    if result is None:
        return [], {"snapshots": 0}, None

    async def write():
        await store.write_summary(project.project_id, result.from_session, result.to_session,
                                  result.narrative, result.data)

    return [], {"snapshots": len(history), "from_session": result.from_session,
                "to_session": result.to_session}, ("write_context_summary", write)


RUNNERS = {
    "staleness_scan": _staleness,
    "duplicate_detection": _duplicates,
    "community_detection": _communities,
    "knowledge_extraction": _extraction,
    "context_summary": _summary,
}
