"""Transactions nest as savepoints; undo restores content and leaves retrieval counters."""

import asyncio

import pytest

from mgcp.errors import ConflictError
from mgcp.persistence.database import Database


def run(path, work):
    async def main():
        async with Database.open(path) as db:
            return await work(db)
    return asyncio.run(main())


async def names(db):
    return [r[0] for r in await db.fetchall("SELECT id FROM lessons ORDER BY id")]


def lesson(lesson_id):
    return {"id": lesson_id, "trigger": "t", "action": "a", "version": 1, "created_at": "2026-01-01T00:00:00+00:00",
            "last_refined": "2026-01-01T00:00:00+00:00"}


def test_a_failed_inner_block_rolls_back_only_its_own_writes(db):
    async def work(d):
        async with d.transaction():
            await d.insert("lessons", lesson("outer"))
            with pytest.raises(RuntimeError):
                async with d.transaction():
                    await d.insert("lessons", lesson("inner"))
                    raise RuntimeError("inner fails")
        return await names(d)

    assert run(db, work) == ["outer"]


def test_a_commit_interrupted_while_sqlite_runs_it_ends_cancelled_with_its_outcome_kept(db):
    """Ctrl-C cancels the task while the COMMIT waits in SQLite's own thread, where it goes on:
    the cancellation is passed on (not a "no transaction is active" error from a ROLLBACK queued
    behind it), and what was committed is there."""
    import time

    async def work(d):
        async def write():
            async with d.transaction():
                await d.insert("lessons", lesson("kept"))
                # SQLite's thread is busy for a moment, so the COMMIT waits behind it
                asyncio.ensure_future(d.conn._execute(time.sleep, 0.3))
                await asyncio.sleep(0)  # queued before the COMMIT

        task = asyncio.create_task(write())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return d.conn.in_transaction, await names(d)

    assert run(db, work) == (False, ["kept"])


def test_restore_leaves_counters_and_refuses_a_content_change(db):
    async def work(d):
        async with d.recording() as changes:
            await d.insert("lessons", lesson("x"))
            await d.update("lessons", {"id": "x"}, {"action": "changed"})
        await d.conn.execute("UPDATE lessons SET usage_count = 7, last_used = 'now' WHERE id = 'x'")
        update = [c for c in changes if c["before"] is not None]
        await d.restore(update)
        row = await d.row("lessons", {"id": "x"})
        await d.conn.execute("UPDATE lessons SET action = 'later' WHERE id = 'x'")
        with pytest.raises(ConflictError) as refused:
            await d.restore(update)
        return row, refused.value.details, await d.row("lessons", {"id": "x"})

    restored, details, after = run(db, work)
    assert (restored["action"], restored["usage_count"], restored["last_used"]) == ("a", 7, "now")
    assert details == ["lessons row x changed since (action)"] and after["action"] == "later"


def test_an_insert_into_an_append_only_table_is_recorded_without_its_bulk_and_undone_by_the_rest(db):
    communities = '[{"community_id": "c1", "member_ids": ["a", "b"]}]' * 50
    run_row = {"run_id": None, "graph_hash": "h", "modularity": 0.5, "communities": communities, "created_at": "now"}

    async def work(d):
        async with d.recording() as changes:
            run_id = await d.insert("community_runs", run_row)
            await d.insert("lessons", lesson("x"))
        recorded = {c["table"]: c for c in changes}
        # another row under the recorded id (as an import's record may name): refused, kept
        await d.conn.execute("UPDATE community_runs SET graph_hash = 'another run' WHERE id = ?", [run_id])
        with pytest.raises(ConflictError) as refused:
            await d.restore(changes)
        kept = await d.fetchall("SELECT count(*) FROM community_runs")
        await d.conn.execute("UPDATE community_runs SET graph_hash = 'h' WHERE id = ?", [run_id])
        await d.restore(changes)
        left = await d.fetchall("SELECT count(*) FROM community_runs")
        return run_id, recorded, refused.value.details, kept[0][0], left[0][0], await names(d)

    run_id, recorded, details, kept, left, lessons = run(db, work)
    assert recorded["community_runs"]["after"] == {"id": run_id, **{k: v for k, v in run_row.items()
                                                                    if k != "communities"}}  # no partition copy
    assert recorded["lessons"]["after"]["action"] == "a"  # any other table: the whole row
    assert details == ["community_runs row 1 changed since (graph_hash)"] and kept == 1
    assert left == 0 and lessons == []
