"""`recall`: the budgeted memory section for a task (mgcp.recall assembles it).

It reads through persistence.recall_data on a connection of its own in a worker thread -- the
SessionStart hook reads the same way, so the command and the hook cannot disagree about what a
recall holds -- and counts the relevant lessons it returns as used, logging the task as a query.
"""

from __future__ import annotations

import asyncio

from mgcp import recall as assembly
from mgcp.config import MIN_RECALL_BUDGET, RemConfig
from mgcp.errors import InvalidInputError
from mgcp.persistence import recall_data, sessions
from mgcp.persistence.database import utcnow
from mgcp.persistence.lessons import Lessons
from mgcp.persistence.store import Store
from mgcp.validation import MAX_QUERY, check_text

BUSY_TIMEOUT_S = 10.0


async def recall(store: Store, config: RemConfig, project_path: str | None, task: str,
                 budget: int | None = None) -> assembly.Recall:
    task = check_text("task", task, limit=MAX_QUERY)
    budget = int(config.recall["budget"]) if budget is None else budget
    if budget < MIN_RECALL_BUDGET:
        raise InvalidInputError(f"the budget must be at least {MIN_RECALL_BUDGET} characters; got {budget}")
    # a lesson sharing only "add" or "fix" with the task is not relevant to it: with the relevance
    # cut relative to the best match, a weak best match let such lessons in
    match = Lessons.match_expression(task, topical=True)
    return await asyncio.to_thread(_recall, store.path, config, project_path, task, match, budget)


def _recall(path: str, config: RemConfig, project_path: str | None, task: str, match: str,
            budget: int) -> assembly.Recall:
    conn = sessions.open_current(path, BUSY_TIMEOUT_S)
    if conn is None:
        raise InvalidInputError(f"no database at {path}")
    try:
        reader = recall_data.Reader(conn)
        result = assembly.build(reader, project_path, budget, match=match, weights=config.ranking,
                                shares=config.recall["shares"], reinforcement=config.reinforcement)
        reader.mark_used(result.matched, utcnow(), query=task, project_id=result.project_id)
        return result
    finally:
        conn.close()
