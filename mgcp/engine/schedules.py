"""What is due for a project: each operation's schedule, and `rem status`.

An operation is due at session `s` when `s >= next_due(last)` (mgcp.schedule, the one
implementation, which the run and the hook use too). Status reads plain rows only
(`store.queue`, `store.rem`'s cursors and marks): it imports no pydantic, networkx or numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mgcp import schedule
from mgcp.engine import review
from mgcp.records import OperationSchedule, RemStatus

if TYPE_CHECKING:
    from mgcp.config import RemConfig
    from mgcp.persistence.store import Store


def schedules(config: RemConfig, project_path: str, state: dict[str, dict], session: int) -> list[OperationSchedule]:
    last_runs = {op: row.get("last_run_session") for op, row in state.items()}
    settings = config.for_project(project_path)
    return [
        OperationSchedule(operation=op, strategy=strategy, params=params, last_run_session=last,
                          last_run_timestamp=state.get(op, {}).get("last_run_timestamp"),
                          next_due_session=due_at, due=due, enabled=settings[op].get("enabled", True) is not False)
        for op, strategy, params, last, due_at, due in schedule.plan(settings, last_runs, session)
    ]


async def status(store: Store, config: RemConfig, project_path: str) -> RemStatus:
    """Each operation's schedule for the project, and how many findings wait for its review.
    (Findings found stale on the way are marked so.)"""
    project = await store.queue.project(project_path)
    ops = schedules(config, project.project_path, await store.rem.state(project.project_id),
                    project.session_count)
    return RemStatus(project_id=project.project_id, project_path=project.project_path,
                     session_number=project.session_count, operations=ops,
                     pending_findings=await review.pending_count(store, project.project_id))
