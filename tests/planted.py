"""The planted knowledge base: the demo project (mgcp/demo_data.yaml), written by hand so that every
REM operation has known true cases to find, and a helper to load it into a database."""

import asyncio
import shutil
import sqlite3
from datetime import datetime, timezone

import yaml

from mgcp.persistence.store import Store
from mgcp.surfaces.demo import DATA, load

PROJECT = "/demo/harbor"

EXPECTED = {
    ("stale_unused", ("celery-acks-late-lost-tasks",)),
    ("stale_unused", ("react-admin-table-virtualization",)),
    ("popular_unrefined", ("pin-python-dependencies-lockfile",)),
    ("unmatched_trigger", ("docker-layer-order-for-fast-rebuilds",)),
    ("unmatched_trigger", ("postgres-autovacuum-hot-tables",)),
    ("duplicate_merge", ("fastapi-dependency-overrides-in-tests", "fastapi-override-dependencies-in-tests")),
    ("duplicate_review", ("correlate-api-and-job-logs-request-id", "structlog-request-id-in-jobs")),
    ("unlinked_cluster", ("webhook-dead-letter-replay", "webhook-delivery-retry-backoff",
                          "webhook-signature-verify-raw-body", "webhook-timeout-ack-fast")),
    ("orphan", ("alembic-data-backfill-in-batches",)),
    ("orphan", ("react-query-optimistic-calendar-update",)),
    ("orphan", ("time-machine-freeze-now-in-tests",)),
    ("contradiction", ("pgbouncer-no-server-side-cursors", "postgres-server-side-cursor-exports")),
}
THEME = "connection pool"
STALE_TODO = "Add per-IP rate limiting to the public availability search endpoint"
RECURRING_DECISION = "Store all timestamps as UTC timestamptz"  # stated in 3 sessions
DECISION_STARTS = ("Store all timestamps as UTC", "Keep money as integer minor units", "Archive slips with an archived_at")


def build(path) -> None:
    data = yaml.safe_load(DATA.read_text())

    async def main():
        async with Store.open(path) as store:
            async with store.transaction():
                await load(store, data, datetime.now(timezone.utc))
    asyncio.run(main())


def lesson_subject(finding) -> tuple:
    if finding.kind == "orphan":
        return (finding.data["lesson"],)
    if finding.kind == "unlinked_cluster":
        return tuple(sorted(finding.data["members"]))
    if finding.kind.startswith("duplicate"):
        return tuple(sorted([finding.data["canonical"], finding.data["other"]]))
    if finding.kind == "contradiction":
        return tuple(sorted(finding.subject))
    return (finding.data["lesson"],)


async def change_a_few(store) -> list[str]:
    """A few of the changes a day brings to the active lessons: the first (by id) refined, the second
    archived, the third's action copied into a new lesson, and a new rule. The active ids before, in order."""
    from mgcp.models import LessonStatus

    ids = [row.id for row in await store.lessons.rows()]
    first = await store.lessons.get(ids[0])
    await store.lessons.refine(ids[0], "sharper", action=first.action + " Check the result twice.")
    await store.lessons.set_lifecycle(ids[1], LessonStatus.archived, "not needed")
    copied = await store.lessons.get(ids[2])
    await store.lessons.add("copied-rule", "when the same rule comes up again", copied.action, tags=["copies"])
    await store.lessons.add("new-rule", "when naming feature flags",
                            "Name feature flags after the behaviour they switch, never after a ticket.")
    return ids


def copy_without(path, to, *tables):
    """A copy of the database at `to` with every row of `tables` deleted (what a cycle keeps, to
    compare with a cycle that has none of it)."""
    shutil.copy(path, to)
    conn = sqlite3.connect(to)
    for table in tables:
        conn.execute(f"DELETE FROM {table}")
    conn.commit()
    conn.close()
    return to
