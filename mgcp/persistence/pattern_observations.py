"""What pattern reinforcement observed in the context history, kept between cycles
(`pattern_observations` and `pattern_observation_marks`, migration 0014).

A `pattern_observations` row is one cluster key's observations: its latest wording (`said`, observed
at `said_at`), how many sessions observed it (`size`), and those sessions' sources with when each
first observed it (`sources`, `firsts`: one per line, in the same order). A
`pattern_observation_marks` row says how far a history was read: for a project (`source` its id),
the last history row read (`last_id`), how many rows that makes (`rows`), and that row's notes and
recent decisions as stored (what the next row is compared with); for the decisions as saved
(`source` "decisions"), the last `decision_observations` rowid read and how many rows that makes;
and the rules the observations were made by (`source` "rules", the rules' name in `notes`).

It is a cache: nothing else refers to it, it is not exported and no undo touches it. It is written
in the transaction of the run that read the history (a dry run rolls it back with the rest), and
only if no other run kept something in between. When the history below a mark is not what was read
(rows removed or added below it) or the rules changed, it is read again whole; deleting every row
only costs that time.

It also reads one project's own saves in given sessions (`stated`): where a draft finds that
project's wording of a key other projects stated too.
"""

from __future__ import annotations

import json
from typing import AsyncIterator

from mgcp.persistence.columns import json_list
from mgcp.persistence.database import Database


def _decisions(value: str | None) -> list[str]:
    """A snapshot's recent decisions (its texts only)."""
    return [d for d in json_list(value) if isinstance(d, str)]


DECISIONS, RULES = "decisions", "rules"


class PatternObservations:
    def __init__(self, db: Database):
        self.db = db

    async def marks(self) -> dict[str, tuple]:
        """Every mark: source -> (last_id, rows, notes, recent decisions as stored)."""
        rows = await self.db.fetchall(
            "SELECT source, last_id, rows, notes, decisions FROM pattern_observation_marks")
        return {r[0]: tuple(r[1:]) for r in rows}

    async def intact(self, marks: dict[str, tuple], rules: str) -> bool:
        """Whether what was kept under `marks` is still exactly the history below them, read by
        these `rules`."""
        if not marks or marks.get(RULES, (None, None, None))[2] != rules:
            return False
        for source, (last_id, rows, _, _) in marks.items():
            if source == RULES:
                continue
            if source == DECISIONS:
                row = await self.db.fetchone("SELECT count(*) FROM decision_observations WHERE rowid <= ?", [last_id])
            else:
                row = await self.db.fetchone(
                    "SELECT count(*) FROM context_history WHERE project_id = ? AND id <= ?", [source, last_id])
            if row[0] != rows:
                return False
        return True

    async def unread(self, marks: dict[str, tuple]) -> list[str]:
        """The projects with history rows past their mark (or never read), by id."""
        rows = await self.db.fetchall("SELECT project_id, max(id) FROM context_history GROUP BY project_id ORDER BY 1")
        return [project_id for project_id, newest in rows
                if project_id not in marks or newest > marks[project_id][0]]

    async def decisions_after(self, mark: tuple | None) -> tuple[list[dict], tuple]:
        """The decisions as saved after the mark, and the mark after them."""
        last_id, count = (mark or (0, 0))[:2]
        rows = await self.db.fetchall(
            """SELECT rowid, project_id, session_number, decision, observed_at FROM decision_observations
               WHERE rowid > ? ORDER BY rowid""", [last_id])
        if rows:
            last_id, count = rows[-1][0], count + len(rows)
        return [dict(r) for r in rows], (last_id, count, None, None)

    async def history_after(self, project_id: str, mark: tuple | None, read: dict[str, tuple],
                            size: int = 20_000) -> AsyncIterator[list[tuple]]:
        """The project's history rows after its mark (all of them without one), by id, in pages of
        `size` rows: (project id, session number, timestamp, notes, recent decisions) - only what
        patterns read. The recent decisions are None where they are the previous row's (saves carry
        them over), so that nothing parses or compares them again. When done, `read[project_id]`
        holds the project's new mark."""
        last_id, count, notes, raw = mark or (-1, 0, None, None)
        known = mark is not None  # the row before is known: rows that repeat its decisions carry None
        parsed: dict[str | None, list[str]] = {}
        while True:
            rows = await self.db.fetchall_tuples(
                """SELECT id, session_number, timestamp, coalesce(notes, ''), recent_decisions
                   FROM context_history WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?""",
                [project_id, last_id, size])
            if not rows:
                break
            page = []
            for row_id, session, at, notes, stored in rows:
                if known and stored == raw:
                    decisions = None
                else:
                    decisions = parsed.get(stored)
                    if decisions is None:
                        if len(parsed) > 10_000:
                            parsed.clear()
                        decisions = parsed[stored] = _decisions(stored)
                    raw, known = stored, True
                page.append((project_id, session, at, notes, decisions))
            last_id, count = rows[-1][0], count + len(rows)
            yield page
        if count:
            read[project_id] = (last_id, count, notes, raw)

    async def stated(self, project_id: str, sessions) -> tuple[list[tuple], list[dict]]:
        """The project's own saves in these sessions: its snapshots, by id, as `history_after`
        gives them (every row's recent decisions read), and its decisions as saved."""
        numbers = json.dumps(sorted(set(sessions)))
        rows = await self.db.fetchall_tuples(
            """SELECT project_id, session_number, timestamp, coalesce(notes, ''), recent_decisions
               FROM context_history
               WHERE project_id = ? AND session_number IN (SELECT value FROM json_each(?)) ORDER BY id""",
            [project_id, numbers])
        decided = await self.db.fetchall(
            """SELECT project_id, session_number, decision, observed_at FROM decision_observations
               WHERE project_id = ? AND session_number IN (SELECT value FROM json_each(?)) ORDER BY rowid""",
            [project_id, numbers])
        return [(*row[:4], _decisions(row[4])) for row in rows], [dict(r) for r in decided]

    @staticmethod
    def decisions_of(mark: tuple) -> list[str]:
        """The recent decisions of a project's mark."""
        return _decisions(mark[3])

    async def seen(self, keys) -> dict[str, tuple]:
        """The kept observations of these keys: key -> (said_at, said, sources, firsts)."""
        rows = await self.db.fetchall_in(
            "SELECT key, said_at, said, sources, firsts FROM pattern_observations WHERE key IN ({marks})", keys)
        return {r[0]: (r[1], r[2], r[3].split("\n"), r[4].split("\n")) for r in rows}

    async def sized(self, needed: int, skip) -> dict[str, tuple]:
        """The kept observations of the keys of at least `needed` sessions, but those in `skip`:
        key -> (said_at, said, number of sources, the sources one per line); their first times are
        left unread."""
        out = {}
        rows = await self.db.fetchall_tuples(
            "SELECT key, said_at, said, size, sources FROM pattern_observations WHERE size >= ?", [needed])
        for key, said_at, said, size, sources in rows:
            if key not in skip:
                out[key] = (said_at, said, size, sources)
        return out

    async def keep(self, seen: dict[str, tuple], marks: dict[str, tuple], read_under: dict[str, tuple],
                   rebuild: bool) -> bool:
        """Keep `seen` (key -> (said_at, said, sources, firsts)) and `marks` (source -> mark), all of
        it anew with `rebuild`; only if the marks are still `read_under` (no other run kept anything
        since they were read). Inside the caller's transaction, never recorded for undo (raw
        statements). Returns whether it kept them."""
        if await self.marks() != read_under:
            return False
        rows = [(key, said_at, said, len(sources), "\n".join(sources), "\n".join(firsts))
                for key, (said_at, said, sources, firsts) in seen.items()]
        if any(row[4].count("\n") != row[3] - 1 for row in rows):
            return False  # a project id with a line break (not one mgcp makes): nothing is kept
        conn = self.db.conn
        if rebuild:
            await conn.execute("DELETE FROM pattern_observations")
            await conn.execute("DELETE FROM pattern_observation_marks")
        await conn.executemany(
            """INSERT OR REPLACE INTO pattern_observations (key, said_at, said, size, sources, firsts)
               VALUES (?, ?, ?, ?, ?, ?)""", rows)
        await conn.executemany(
            """INSERT OR REPLACE INTO pattern_observation_marks (source, last_id, rows, notes, decisions)
               VALUES (?, ?, ?, ?, ?)""", ((source, *mark) for source, mark in marks.items()))
        return True
