"""REM state: per-project schedule cursors, the run ledger, stored findings, applied actions,
community runs and summaries.

A finding is built as a pydantic model only when one is read whole (`finding_from_row`): the
schedule, the marks and the counts `rem status` reads import no pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mgcp.errors import InvalidInputError, NotFoundError
from mgcp.persistence import sessions
from mgcp.persistence.database import Database, dumps, utcnow
from mgcp.records import FindingMark, FindingStatus

if TYPE_CHECKING:
    from mgcp.models import RemFinding


def finding_from_row(row) -> RemFinding:
    from mgcp.models import FindingOption, RemFinding

    d = dict(row)
    return RemFinding(
        id=d["id"], operation=d["operation"], kind=d["kind"], title=d["title"],
        description=d["description"],
        options=[FindingOption(**o) for o in json.loads(d["options"])],
        recommended=d["recommended"], data=json.loads(d["data"]), subject=json.loads(d["subject"]),
        fingerprint=d["fingerprint"], project_id=d["project_id"], run_id=d["run_id"],
        status=d["status"], created_at=d["created_at"], resolved_at=d["resolved_at"],
        chosen_option=d["chosen_option"],
    )


def _where(project_id: str | None, status: str | None, run_id: int | None, after: str | None):
    """The WHERE clause (and its parameters) selecting findings, for `findings` and its count."""
    clauses, params = ["1"], []
    if project_id is not None:
        clauses.append(sessions.VISIBLE_TO_PROJECT)
        params.append(project_id)
    if after is not None:
        clauses.append("(created_at, rowid) > (SELECT created_at, rowid FROM rem_findings WHERE id = ?)")
        params.append(after)
    if status:
        clauses.append("status = ?")
        params.append(status)
    if run_id is not None:
        clauses.append("run_id = ?")
        params.append(run_id)
    return " AND ".join(clauses), params


MIN_PREFIX = 8  # the shortest finding-id prefix accepted in place of the whole id
FINDING_ID_LENGTH = 16  # hex digits of a finding id (64 bits)


class RemLedger:
    """REM state: schedule cursors, runs, findings, applied actions, communities, summaries."""

    def __init__(self, db: Database):
        self.db = db

    # -- schedule state -----------------------------------------------------------------------

    async def state(self, project_id: str) -> dict[str, dict]:
        rows = await self.db.fetchall("SELECT * FROM rem_state WHERE project_id = ?", [project_id])
        return {r["operation"]: dict(r) for r in rows}

    async def record_operation_run(self, project_id: str, operation: str, session: int,
                                   next_due_session: int, result: dict) -> None:
        await self.db.upsert("rem_state", {"project_id": project_id, "operation": operation}, {
            "last_run_session": session, "last_run_timestamp": utcnow(),
            "last_run_result": dumps(result), "next_due_session": next_due_session})

    # -- runs ---------------------------------------------------------------------------------

    async def start_run(self, project_id: str, session: int, operations: list[str], auto: bool) -> int:
        return await self.db.insert("rem_runs", {
            "project_id": project_id, "session_number": session, "started_at": utcnow(),
            "operations": dumps(operations), "auto": int(auto)})

    async def finish_run(self, run_id: int, duration_ms: float, finding_count: int, errors: list[str],
                         results: list[dict]) -> None:
        await self.db.update("rem_runs", {"id": run_id}, {
            "finished_at": utcnow(), "duration_ms": duration_ms, "finding_count": finding_count,
            "errors": dumps(errors), "operations": dumps(results)})

    async def last_run(self, project_id: str) -> dict | None:
        row = await self.db.fetchone(
            "SELECT * FROM rem_runs WHERE project_id = ? AND finished_at IS NOT NULL ORDER BY id DESC LIMIT 1",
            [project_id])
        return dict(row) if row else None

    async def unfinished_since(self, project_id: str, run_id: int | None) -> int | None:
        """The latest run of the project after `run_id` (None: any) that never finished (interrupted,
        killed, or still running), or None."""
        row = await self.db.fetchone(
            "SELECT max(id) FROM rem_runs WHERE project_id = ? AND finished_at IS NULL AND id > ?",
            [project_id, run_id or 0])
        return row[0] if row else None

    async def get_run(self, run_id: int) -> dict:
        row = await self.db.fetchone("SELECT * FROM rem_runs WHERE id = ?", [run_id])
        if row is None:
            raise NotFoundError(f"no REM run with id {run_id}")
        return dict(row)

    # -- findings -----------------------------------------------------------------------------

    async def finding_by_fingerprint(self, fingerprint: str) -> RemFinding | None:
        """The finding with this fingerprint that still speaks: pending, or rejected (remembered)."""
        row = await self.db.fetchone(
            """SELECT * FROM rem_findings WHERE fingerprint = ? AND status IN ('pending', 'rejected')
               ORDER BY created_at DESC LIMIT 1""", [fingerprint])
        return finding_from_row(row) if row else None

    async def finding_speaks(self, fingerprint: str) -> bool:
        """Whether a finding with this fingerprint still speaks (`finding_by_fingerprint` is not
        None), without reading it: a community finding's data lists every member."""
        return await self.db.fetchone(
            "SELECT 1 FROM rem_findings WHERE fingerprint = ? AND status IN ('pending', 'rejected') LIMIT 1",
            [fingerprint]) is not None

    async def answers(self, *operations: str) -> tuple:
        """How many of the operations' findings people (or --auto) have answered, when the last
        answer was given, and when the last action (of any run) was undone: an answer or an undo
        changes this, a new or retired finding does not."""
        row = await self.db.fetchone(
            f"""SELECT count(*), max(resolved_at), (SELECT max(undone_at) FROM rem_actions)
                FROM rem_findings WHERE operation IN ({", ".join("?" * len(operations))})
                AND status IN ('applied', 'rejected')""", list(operations))
        return tuple(row)

    async def was_applied(self, fingerprint: str) -> bool:
        """Whether a finding with this fingerprint was answered with an action that still stands."""
        return await self.db.fetchone("SELECT 1 FROM rem_findings WHERE fingerprint = ? AND status = 'applied'",
                                      [fingerprint]) is not None

    async def settled(self, operation: str) -> frozenset[str]:
        """Fingerprints of an operation's findings answered "don't ask again": the rejected ones, and
        those a rejected summary stood for."""
        rows = await self.db.fetchall(
            "SELECT fingerprint, kind, data FROM rem_findings WHERE operation = ? AND status = 'rejected'",
            [operation])
        found = set()
        for fingerprint, kind, data in rows:
            found.add(fingerprint)
            if kind == "summary":
                found.update(json.loads(data or "{}").get("fingerprints", []))
        return frozenset(found)

    async def retire(self, fingerprints: Iterable[str]) -> None:
        """Mark stale the pending findings with these fingerprints (an answer elsewhere settled them)."""
        await self.db.conn.executemany(
            "UPDATE rem_findings SET status = 'stale', resolved_at = ? WHERE fingerprint = ? AND status = 'pending'",
            [(utcnow(), fingerprint) for fingerprint in sorted(set(fingerprints))])

    async def rejected_subjects(self, kind: str) -> list[dict[str, int]]:
        """The subjects (lesson id -> version) of the findings of a kind answered "don't ask again"."""
        rows = await self.db.fetchall(
            "SELECT subject FROM rem_findings WHERE status = 'rejected' AND kind = ?", [kind])
        return [json.loads(subject or "{}") for (subject,) in rows]

    async def insert_finding(self, finding: RemFinding) -> None:
        await self.db.insert("rem_findings", {
            "id": finding.id, "run_id": finding.run_id, "project_id": finding.project_id,
            "operation": finding.operation, "kind": finding.kind, "fingerprint": finding.fingerprint,
            "title": finding.title, "description": finding.description,
            "options": dumps([o.model_dump() for o in finding.options]),
            "recommended": finding.recommended, "data": dumps(finding.data),
            "subject": dumps(finding.subject), "status": finding.status.value,
            "created_at": finding.created_at or utcnow()})

    async def retire_summaries(self, project_id: str, operation: str, of_kind: str) -> None:
        """Mark stale the pending summaries of `of_kind` findings a project's review would show: a
        new summary of the same kind replaces them. A stale finding is never applied, and the new
        summary lists what is left now, so a retired one keeps its title, kind and count but not
        its list of findings (megabytes at 100k lessons, which every cycle would otherwise add)."""
        await self.db.conn.execute(
            f"""UPDATE rem_findings SET status = 'stale', resolved_at = ?,
                       data = json_set(data, '$.items', json('[]'), '$.fingerprints', json('[]'),
                                       '$.bulk_action', NULL)
                WHERE status = 'pending' AND kind = 'summary' AND operation = ?
                AND json_extract(data, '$.of_kind') = ? AND {sessions.VISIBLE_TO_PROJECT}""",
            [utcnow(), operation, of_kind, project_id])

    async def get_finding(self, finding_id: str) -> RemFinding:
        """The finding with this id, or with this id's unique prefix (at least MIN_PREFIX long)."""
        row = await self.db.fetchone("SELECT * FROM rem_findings WHERE id = ?", [finding_id])
        if row is None and len(finding_id) < MIN_PREFIX:
            raise InvalidInputError(f"finding id {finding_id!r} is too short: give at least {MIN_PREFIX} "
                                    f"of its {FINDING_ID_LENGTH} characters")
        if row is None:
            rows = await self.db.fetchall(
                "SELECT * FROM rem_findings WHERE id >= ? AND id < ? LIMIT 2", [finding_id, finding_id + "\uffff"])
            if len(rows) > 1:
                raise InvalidInputError(f"finding id {finding_id!r} is ambiguous; give more of it")
            row = rows[0] if rows else None
        if row is None:
            raise NotFoundError(f"no finding with id {finding_id!r}")
        return finding_from_row(row)

    async def findings(self, project_id: str | None = None, status: str | None = "pending",
                       run_id: int | None = None, after: str | None = None) -> list[RemFinding]:
        """Findings in queue order (oldest first). `project_id`: those a review of that project
        shows (its own, and every finding about the shared lessons). `after`: only those queued
        after that finding."""
        where, params = _where(project_id, status, run_id, after)
        rows = await self.db.fetchall(f"SELECT * FROM rem_findings WHERE {where} ORDER BY created_at, rowid", params)
        return [finding_from_row(r) for r in rows]

    async def marks(self, project_id: str | None = None, status: str | None = "pending",
                    after: str | None = None) -> list[FindingMark]:
        """What tells whether each finding `findings` would list still holds (`FindingMark`), in
        the same order, read without the rest of the finding. A summary's data (which can run to
        megabytes) is not read at all: it drafts nothing."""
        where, params = _where(project_id, status, None, after)
        rows = await self.db.fetchall(
            f"""SELECT id, kind, subject,
                       CASE WHEN kind = 'orphan' THEN json_extract(data, '$.lesson') END,
                       CASE WHEN kind = 'summary' THEN NULL
                            WHEN json_type(data, '$.draft.trigger') = 'text'
                             AND json_type(data, '$.draft.action') = 'text'
                            THEN json_array(json_extract(data, '$.draft.trigger'),
                                            json_extract(data, '$.draft.action')) END
                FROM rem_findings WHERE {where} ORDER BY created_at, rowid""", params)
        return [FindingMark(finding_id, kind, json.loads(subject), lesson, tuple(json.loads(draft)) if draft else None)
                for finding_id, kind, subject, lesson, draft in rows]

    async def set_finding_status(self, finding_id: str, status: FindingStatus,
                                 chosen_option: int | None = None, input_text: str | None = None) -> None:
        await self.db.update("rem_findings", {"id": finding_id}, {
            "status": status.value, "chosen_option": chosen_option, "input": input_text,
            "resolved_at": None if status == FindingStatus.pending else utcnow()})

    # -- applied actions ----------------------------------------------------------------------

    async def record_action(self, finding_id: str, run_id: int | None, action: str,
                            changes: list[dict], auto: bool) -> int:
        return await self.db.insert("rem_actions", {
            "finding_id": finding_id, "run_id": run_id, "action": action, "changes": dumps(changes),
            "applied_at": utcnow(), "auto": int(auto)})

    async def actions_for(self, finding_id: str | None = None, run_id: int | None = None) -> list[dict]:
        sql, params = "SELECT * FROM rem_actions WHERE undone_at IS NULL", []
        if finding_id is not None:
            sql += " AND finding_id = ?"
            params.append(finding_id)
        if run_id is not None:
            sql += " AND (run_id = ? OR finding_id IN (SELECT id FROM rem_findings WHERE run_id = ?))"
            params += [run_id, run_id]
        rows = await self.db.fetchall(sql + " ORDER BY id", params)
        return [{**dict(r), "changes": json.loads(r["changes"])} for r in rows]

    async def undone(self, findings: list[RemFinding]) -> set[str]:
        """The ids of those of `findings` that ask again what a person took back: a finding of theirs
        with the same fingerprint, or of the same kind about the same lessons (whatever their versions
        are now: a lesson edited since the undo is still the pair they took apart), had an action
        that was undone."""
        rows = await self.db.fetchall(
            """SELECT DISTINCT f.fingerprint, f.kind, f.subject FROM rem_findings f
               JOIN rem_actions a ON a.finding_id = f.id WHERE a.undone_at IS NOT NULL""")
        prints = {row[0] for row in rows}
        subjects = {(row[1], frozenset(json.loads(row[2] or "{}"))) for row in rows}
        return {f.id for f in findings
                if f.fingerprint in prints or (f.subject and (f.kind, frozenset(f.subject)) in subjects)}

    async def mark_action_undone(self, action_id: int) -> None:
        await self.db.conn.execute("UPDATE rem_actions SET undone_at = ? WHERE id = ?", [utcnow(), action_id])

    # -- communities and summaries ------------------------------------------------------------

    async def last_community_run(self) -> dict | None:
        row = await self.db.fetchone("SELECT * FROM community_runs ORDER BY id DESC LIMIT 1")
        return {**dict(row), "communities": json.loads(row["communities"])} if row else None

    async def record_community_run(self, run_id: int | None, graph_hash: str, modularity: float,
                                   communities: list[dict]) -> None:
        await self.db.insert("community_runs", {
            "run_id": run_id, "graph_hash": graph_hash, "modularity": modularity,
            "communities": dumps(communities), "created_at": utcnow()})

    async def write_community_summaries(self, communities: list[dict], gone: Iterable[str] = ()) -> None:
        """Insert or refresh each community's summary (the legacy table), in a few statements: a row
        that already says the same is left as it is, a changed one keeps when it was created. The
        rows of `gone` (communities of the last run that no longer exist) are deleted, so that the
        table holds the communities as they are; the runs keep every earlier partition."""
        now = utcnow()
        existing = {row["community_id"]: dict(row) for row in await self.db.fetchall_in(
            "SELECT * FROM community_summaries WHERE community_id IN ({marks})",
            [c["community_id"] for c in communities])}
        rows = []
        for community in communities:
            values = {"community_id": community["community_id"], "title": community["title"],
                      "summary": community["summary"], "member_ids": dumps(community["member_ids"]),
                      "member_count": len(community["member_ids"])}
            before = existing.get(community["community_id"])
            if before is None or any(before[k] != v for k, v in values.items()):
                rows.append({**values, "created_at": before["created_at"] if before else now, "updated_at": now})
        await self.db.upsert_many("community_summaries", rows)
        await self.db.delete_many("community_summaries", gone)

    async def last_summary(self, project_id: str) -> dict | None:
        row = await self.db.fetchone(
            "SELECT * FROM context_summaries WHERE project_id = ? ORDER BY to_session DESC, id DESC LIMIT 1",
            [project_id])
        return {**dict(row), "data": json.loads(row["data"])} if row else None

    async def write_summary(self, project_id: str, from_session: int, to_session: int,
                            narrative: str, data: dict) -> int:
        return await self.db.insert("context_summaries", {
            "project_id": project_id, "from_session": from_session, "to_session": to_session,
            "narrative": narrative, "data": dumps(data), "created_at": utcnow()})

    async def count(self, table: str) -> int:
        return (await self.db.fetchone(f"SELECT count(*) FROM {table}"))[0]
