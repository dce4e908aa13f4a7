"""Outcome feedback and the figures of `mgcp stats`.

Every reported outcome is a row of `lesson_outcomes`, never rewritten; `lesson_outcome_stats` keeps
each lesson's helped and failed counts and its current failure streak (failures since the last
success and since its trigger or action last changed, and the id of the first of them) in step,
in the same transaction.
"""

from __future__ import annotations

from mgcp import ranking
from mgcp.persistence.database import Database, utcnow
from mgcp.validation import MAX_SHORT, check_session_id, check_text


class Outcomes:
    def __init__(self, db: Database):
        self.db = db

    async def record(self, lesson_id: str, helped: bool, note: str | None = None,
                     session_id: str | None = None, project_id: str | None = None,
                     since: str | None = None) -> dict:
        """Log one outcome and return the lesson's counts after it: helped, failed, streak,
        streak_started (the outcome id where the current failure streak began), success_rate.
        `since`: when the lesson's trigger or action last changed; a failure streak begun before it
        starts again with this failure (the failures counted are the current text's)."""
        note = check_text("note", note, required=False, limit=MAX_SHORT)
        session_id = check_session_id(session_id)
        now = utcnow()
        async with self.db.transaction():
            outcome_id = await self.db.insert("lesson_outcomes", {
                "lesson_id": lesson_id, "outcome": "helped" if helped else "failed", "note": note,
                "session_id": session_id, "project_id": project_id, "created_at": now})
            row = await self.db.fetchone("SELECT * FROM lesson_outcome_stats WHERE lesson_id = ?", [lesson_id])
            stats = dict(row) if row else {"lesson_id": lesson_id, "helped": 0, "failed": 0, "streak": 0,
                                           "streak_started": None}
            if not helped and since is not None and stats["streak_started"] is not None:
                began = await self.db.fetchone("SELECT created_at FROM lesson_outcomes WHERE id = ?",
                                               [stats["streak_started"]])
                if began is None or began[0] < since:
                    stats.update(streak=0, streak_started=None)
            if helped:
                stats.update(helped=stats["helped"] + 1, streak=0, streak_started=None)
            else:
                stats.update(failed=stats["failed"] + 1, streak=stats["streak"] + 1,
                             streak_started=stats["streak_started"] or outcome_id)
            stats["last_outcome_at"] = now
            await self.db.conn.execute(
                """INSERT INTO lesson_outcome_stats (lesson_id, helped, failed, streak, streak_started, last_outcome_at)
                   VALUES (:lesson_id, :helped, :failed, :streak, :streak_started, :last_outcome_at)
                   ON CONFLICT (lesson_id) DO UPDATE SET helped = excluded.helped, failed = excluded.failed,
                   streak = excluded.streak, streak_started = excluded.streak_started,
                   last_outcome_at = excluded.last_outcome_at""", stats)
        stats["outcome_id"] = outcome_id
        stats["success_rate"] = ranking.success_rate(stats["helped"], stats["failed"])
        return stats

    async def streak(self, lesson_id: str) -> int:
        """How many failures in a row the lesson's current streak holds (0: none)."""
        row = await self.db.fetchone("SELECT streak FROM lesson_outcome_stats WHERE lesson_id = ?", [lesson_id])
        return int(row[0] or 0) if row else 0

    async def records(self) -> dict[str, tuple[int, int]]:
        """(helped, failed) of each lesson with a reported outcome."""
        rows = await self.db.fetchall_tuples("SELECT lesson_id, helped, failed FROM lesson_outcome_stats")
        return {lesson_id: (helped, failed) for lesson_id, helped, failed in rows}

    async def stats(self) -> dict:
        """The knowledge base in figures: active lessons by kind and by tier, lessons never used,
        queries that found something and nothing, outcomes and the success rate."""
        rows = await self.db.fetchall(
            """SELECT COALESCE(c.status, 'active') AS status, COALESCE(t.kind, 'pattern') AS kind,
                      COALESCE(s.helped, 0) AS helped, l.usage_count AS usage_count, count(*) AS n
               FROM lessons l LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id
               LEFT JOIN lesson_traits t ON t.lesson_id = l.id AND t.version = l.version
               LEFT JOIN lesson_outcome_stats s ON s.lesson_id = l.id
               WHERE COALESCE(c.status, 'active') IN ('active', 'archived')
               GROUP BY 1, 2, s.helped > 0, l.usage_count >= ?, l.usage_count = 0""",
            [ranking.VALIDATED_AFTER_USES])
        by_kind: dict[str, int] = {}
        by_tier = {tier: 0 for tier in ranking.TIERS}
        never_used = active = 0
        for r in rows:
            by_tier[ranking.tier(r["status"], r["helped"], r["usage_count"])] += r["n"]
            if r["status"] == "active":
                active += r["n"]
                by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + r["n"]
                never_used += r["n"] if r["usage_count"] == 0 else 0
        queries = await self.db.fetchone(
            """SELECT count(*) AS total, COALESCE(sum(result_ids NOT IN ('[]', '')), 0) AS found
               FROM query_log""")
        outcomes = await self.db.fetchone(
            """SELECT COALESCE(sum(outcome = 'helped'), 0) AS helped, COALESCE(sum(outcome = 'failed'), 0) AS failed
               FROM lesson_outcomes""")
        failing = await self.db.fetchone("SELECT count(*) FROM lesson_outcome_stats WHERE streak > 0")
        return {
            "lessons": active,
            "by_kind": dict(sorted(by_kind.items())),
            "by_tier": by_tier,
            "never_used": never_used,
            "queries": {"total": queries["total"], "found": queries["found"],
                        "found_nothing": queries["total"] - queries["found"]},
            "outcomes": {"helped": outcomes["helped"], "failed": outcomes["failed"],
                         "success_rate": ranking.success_rate(outcomes["helped"], outcomes["failed"]),
                         "lessons_on_a_failure_streak": failing[0]},
        }
