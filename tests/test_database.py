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


def test_an_insert_into_an_append_only_table_records_its_key_and_its_undo_deletes_it(db):
    communities = '[{"community_id": "c1", "member_ids": ["a", "b"]}]' * 50

    async def work(d):
        async with d.recording() as changes:
            run_id = await d.insert("community_runs", {"run_id": None, "graph_hash": "h", "modularity": 0.5,
                                                       "communities": communities, "created_at": "now"})
            await d.insert("lessons", lesson("x"))
        recorded = {c["table"]: c for c in changes}
        await d.restore(changes)
        left = await d.fetchall("SELECT count(*) FROM community_runs")
        return run_id, recorded, left[0][0], await names(d)

    run_id, recorded, left, lessons = run(db, work)
    assert recorded["community_runs"]["after"] == {"id": run_id}  # the key, not a copy of the partition
    assert recorded["lessons"]["after"]["action"] == "a"  # any other table: the whole row
    assert left == 0 and lessons == []


def test_records_a_migration_skips_are_one_line_at_each_open(tmp_path, capsys):
    """Every command opens the database and retries the pending migration: it says so in one line
    pointing at `mgcp db migrate`, not a line per record it skipped."""
    import sqlite3

    from legacy import build_legacy

    path = tmp_path / "legacy.db"
    build_legacy(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE project_contexts SET catalogue = 'not json'")  # both projects
    conn.commit()
    conn.close()
    for _ in range(2):
        run(path, names)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("mgcp: migration 0005_seed_context_history skipped 2 records, "
                                                        "the first project "), err
        assert "`mgcp db migrate` lists what it skips" in err
