"""A day of use on one database: the SessionStart hook, the CLI, the MCP server and a person at
`mgcp rem review` take turns on two projects, then every promise is checked at once.

P carries the demo project's lessons and 46 sessions of history (mgcp/demo_data.yaml, as in
tests/planted.py, under P's path); Q carries the first 20 of those sessions, so both projects raise
the same themes and each must see only its own context findings. In the evening CI leaves a
contradiction to a person, and a decision stated in sessions of both projects is reinforced.
"""

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone

import yaml
from mcp.client.stdio import StdioServerParameters

from clihelp import mgcp
from conftest import dump
from mgcp.config import SHARED_KINDS, SHARED_OPERATIONS
from mgcp.persistence.dump import CACHES
from mgcp.persistence.sessions import project_id_for
from mgcp.persistence.store import Store
from mgcp.surfaces.demo import DATA, load
from test_hook import HOOK, payload
from test_mcp_server import SERVE, Client

P, Q = "/work/day/p", "/work/day/q"
PID, QID = project_id_for(P), project_id_for(Q)
Q_SESSIONS = 20


def sql(db, query, *params) -> list:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def cli(db, *args, stdin="") -> str:
    code, out, err = mgcp(*args, "--db", db, stdin=stdin)
    assert code == 0, (args, err)
    return out


def hook(db, session_id, source, cwd) -> int:
    """Run the hook as Claude Code does; returns the project's session number (checked against the
    number the reminder names, when it prints one)."""
    result = subprocess.run([sys.executable, str(HOOK)], input=payload(session_id, source, cwd), text=True,
                            capture_output=True, env={**os.environ, "MGCP_DB": str(db)}, timeout=60)
    assert (result.returncode, result.stderr) == (0, ""), result
    number = sql(db, "SELECT session_count FROM project_contexts WHERE project_path = ?", cwd)[0][0]
    if result.stdout:
        text = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert int(re.search(r"session (\d+)", text).group(1)) == number, text
    return number


def finding(db, finding_id) -> dict:
    kind, op, owner, options, subject, status = sql(db, "SELECT kind, operation, project_id, options, subject, "
                                                        "status FROM rem_findings WHERE id = ?", finding_id)[0]
    return {"id": finding_id, "kind": kind, "operation": op, "project_id": owner, "status": status,
            "actions": [o["action"] for o in json.loads(options)], "subject": json.loads(subject)}


def option(db, finding_id, action) -> int:
    return finding(db, finding_id)["actions"].index(action) + 1


def assert_visible(db, project_id, finding_ids):
    """What a project is shown: shared lesson findings, and its own context findings only."""
    for finding_id in finding_ids:
        f = finding(db, finding_id)
        assert f["operation"] in SHARED_OPERATIONS or f["project_id"] == project_id, f


def query_affected(db, finding_id):
    """`mgcp lesson query` for every active lesson the finding touched (bumps usage counters)."""
    ids = set(finding(db, finding_id)["subject"])
    for (changes,) in sql(db, "SELECT changes FROM rem_actions WHERE finding_id = ? AND undone_at IS NULL", finding_id):
        ids |= {c["key"]["id"] for c in json.loads(changes) if c["table"] == "lessons"}
    for lesson_id in sorted(ids):
        trigger, status = sql(db, "SELECT trigger, status FROM lessons LEFT JOIN lesson_lifecycle ON lesson_id = id "
                                  "WHERE id = ?", lesson_id)[0]
        if status in (None, "active"):
            found = json.loads(cli(db, "lesson", "query", trigger, "--limit", "5", "--project", P, "--json"))
            assert lesson_id in [r["id"] for r in found], (lesson_id, trigger)


class Person:
    """A person at `mgcp rem review`, typing into its stdin: merges the agent's duplicate, keeps the
    first extraction finding's draft as it is, skips the rest."""

    def __init__(self, db, merge):
        self.db, self.merge, self.drafted, self.lines = db, merge, None, []

    def readline(self) -> str:
        if not self.lines:
            shown = re.findall(r"  -  finding (\w+)", sys.stdout.getvalue())[-1]
            f = finding(self.db, shown)
            if shown == self.merge:
                self.lines = [str(option(self.db, shown, "merge"))]
            elif f["operation"] == "knowledge_extraction" and self.drafted is None:
                self.drafted, self.lines = shown, [str(option(self.db, shown, "draft_lesson")), ""]
            else:
                self.lines = ["s"]
        return self.lines.pop(0) + "\n"


def undo(db, finding_id, *flags):
    return mgcp("rem", "undo", finding_id, *flags, "--db", db)


def test_a_day_of_use(tmp_path, db):
    data = yaml.safe_load(DATA.read_text())
    data["project"]["path"] = P
    q_data = {"project": {"path": Q}, "lessons": [], "sessions": data["sessions"][:Q_SESSIONS]}

    async def build():
        async with Store.open(db) as store:
            async with store.transaction():
                for d in (data, q_data):
                    await load(store, d, datetime.now(timezone.utc))
    asyncio.run(build())
    s0, saves, notes = len(data["sessions"]), [], None
    for n, session in enumerate(data["sessions"], 1):  # what `context at` must give, in time order
        notes = session.get("notes") or notes
        saves.append((n, notes))

    params = StdioServerParameters(command=sys.executable, args=[*SERVE, "--db", str(db)],
                                   env={"MGCP_DATA_DIR": str(tmp_path / "mcp-data"), "HOME": str(tmp_path / "home")})
    with open(tmp_path / "server.log", "w") as errlog:
        agent = Client(params, errlog)
        try:
            day(db, tmp_path, agent, s0, saves)
            assert agent.stream_errors == []
            assert agent.longest < 50_000  # every reply short enough for an agent's client to take whole
        finally:
            agent.close()


def day(db, tmp_path, agent, s0, saves):
    def save(surface, sid, notes, session=None):
        """A save of P from the CLI or over MCP; `session` None: an identical repeat, which must
        write nothing."""
        decision, todo = f"decided: {notes}", f"follow up {notes}"
        doc = (json.loads(cli(db, "context", "save", "--project", P, "--session-id", sid, "--notes", notes,
                              "--decision", decision, "--todo", todo, "--json")) if surface == "cli" else
               agent.ok("save_project_context", project_path=P, session_id=sid, notes=notes,
                        decisions=[decision], todos=[{"content": todo}]))
        assert doc["saved"] == (session is not None), doc
        if session is not None:
            assert doc["snapshot"]["session_number"] == session, doc
            saves.append((session, notes))

    # -- morning: sessions start, resume, clear and compact; saves from both surfaces ---------------
    assert hook(db, "A", "startup", P) == s0 + 1
    save("cli", "A", "a1: started the refund flow", s0 + 1)
    assert hook(db, "X", "startup", Q) == Q_SESSIONS + 1
    cli(db, "context", "save", "--project", Q, "--session-id", "X", "--notes", "q: audit log")
    assert hook(db, "B", "startup", P) == s0 + 2
    save("mcp", "B", "b1: refunds call stripe", s0 + 2)
    assert hook(db, "A", "resume", P) == s0 + 2  # a known id continues the CURRENT session
    save("cli", "A", "a2: resumed A, refunds idempotent", s0 + 2)
    assert hook(db, "C", "clear", P) == s0 + 3
    save("mcp", "C", "c1: webhooks for refunds", s0 + 3)
    save("mcp", "C", "c1: webhooks for refunds")
    assert hook(db, "C", "compact", P) == s0 + 3
    save("cli", "A", "a3: back in A after B and C", s0 + 3)
    save("cli", "A", "a3: back in A after B and C")
    assert sql(db, "SELECT count(*) FROM context_history WHERE project_id = ?", PID)[0][0] == len(saves)
    assert dict(sql(db, "SELECT session_id, session_number FROM project_sessions WHERE session_id IN "
                        "('A', 'B', 'C', 'X')")) == {"A": s0 + 1, "B": s0 + 2, "C": s0 + 3, "X": Q_SESSIONS + 1}

    # -- midday: a CI dry run writes nothing; the agent reviews P over MCP ----------------------------
    before = dump(db)
    preview = json.loads(cli(db, "rem", "run", "--auto", "--dry-run", "--project", P, "--json"))
    assert preview["dry_run"] and preview["applied"] and dump(db) == before

    f = agent.ok("rem_run", project_path=P)["finding"]
    shown_p = [f["finding_id"]]

    def answer(kind, action, **extra):
        fid = shown_p[-1]
        assert finding(db, fid)["kind"] == kind
        result = agent.ok("rem_answer", project_path=P, finding_id=fid, option=option(db, fid, action), **extra)
        assert result["result"]["action"] == action
        shown_p.extend([result["finding"]["finding_id"]] if result["finding"] else [])
        return fid, next(iter(finding(db, fid)["subject"]))

    answer("popular_unrefined", "skip")
    answer("stale_unused", "archive")
    answer("stale_unused", "keep")
    docker, lesson_id = shown_p[-1], next(iter(finding(db, shown_p[-1])["subject"]))
    old = sql(db, "SELECT trigger, version FROM lessons WHERE id = ?", lesson_id)
    answer("unmatched_trigger", "update_trigger", input="when docker rebuilds reinstall every dependency")
    query_affected(db, docker)
    assert undo(db, docker)[0] == 0
    assert sql(db, "SELECT trigger, version FROM lessons WHERE id = ?", lesson_id) == old
    vacuum, lesson_id = answer("unmatched_trigger", "update_trigger", input="when autovacuum lags on hot tables")
    cli(db, "lesson", "refine", lesson_id, "--action", "Tune autovacuum_vacuum_scale_factor per table",
        "--reason", "the global setting was too coarse")  # a real content change after the resolve
    query_affected(db, vacuum)
    before = dump(db)
    code, _, err = undo(db, vacuum)
    assert code == 1 and "overwrite" in err and dump(db) == before
    assert undo(db, vacuum, "--force", "--yes")[0] == 0
    merge = shown_p[-1]  # the agent shows it to its user; meanwhile a person reviews Q
    assert finding(db, merge)["kind"] == "duplicate_merge"

    # -- afternoon: a person reviews Q, typing into `mgcp rem review`'s stdin ----------------------------
    cli(db, "rem", "run", "--project", Q)
    queue = [q["id"] for q in json.loads(cli(db, "rem", "report", "--project", Q, "--json"))["pending"]]
    person = Person(db, merge)
    out = cli(db, "rem", "review", "--project", Q, stdin=person)
    shown_q, drafted = re.findall(r"  -  finding (\w+)", out), person.drafted
    assert drafted and "Review finished: 2 applied" in out
    assert shown_q == [q for q in queue if finding(db, q)["status"] != "stale"]  # the merge made some stale
    assert_visible(db, QID, shown_q)
    # `rem status` (plain rows, no pydantic) counts what the report lists whole, as the MCP tool does
    left_q = json.loads(cli(db, "rem", "report", "--project", Q, "--json"))["pending"]
    status_q = json.loads(cli(db, "rem", "status", "--project", Q, "--json"))
    assert status_q == agent.ok("rem_status", project_path=Q) and status_q["pending_findings"] == len(left_q)

    # the same finding answered twice, once from each surface: applied once
    assert "already applied" in agent.error("rem_answer", project_path=P, finding_id=merge,
                                            option=option(db, merge, "merge"))
    assert f"belongs to project {Q}" in agent.error("rem_answer", project_path=P, finding_id=drafted, option=1)
    before = dump(db)  # nor may it undo the person's answer from there
    assert f"belongs to project {Q}" in agent.error("rem_undo", project_path=P, finding_id=drafted)
    assert dump(db) == before
    pending_p = agent.ok("rem_report", project_path=P)["pending"]
    shown_p += [p["id"] for p in pending_p] + [next(p["id"] for p in pending_p if p["kind"] == "unlinked_cluster")]
    cluster, _ = answer("unlinked_cluster", "link_all")
    code, _, err = mgcp("rem", "resolve", cluster, "--option", option(db, cluster, "link_all"), "--project", Q,
                        "--db", db)
    assert code == 1 and "already applied" in err
    for twice in (merge, cluster):
        assert sql(db, "SELECT count(*) FROM rem_actions WHERE finding_id = ?", twice)[0][0] == 1
    assert_visible(db, PID, shown_p)

    # -- evening: a new session, CI applies what the policy allows, a save under A -------------------
    assert hook(db, "D", "startup", P) == s0 + 4
    # the agent recalls memory for its task, applies a lesson, and reports that it failed three times
    memory = agent.ok("recall", task="add refunds to the webhook handler", project_path=P, budget=3000)
    assert memory["chars"] == len(memory["text"]) <= 3000 and memory["lessons"], memory
    used = memory["lessons"][-1]
    for _ in range(3):
        reported = agent.ok("lesson_outcome", lesson_id=used, helped=False, project_path=P)
    failing = reported["finding"]["finding_id"]
    assert failing in [f["id"] for f in json.loads(cli(db, "rem", "report", "--project", Q, "--json"))["pending"]]
    cli(db, "rem", "resolve", failing, "--option", option(db, failing, "keep"), "--project", Q)
    assert json.loads(cli(db, "stats", "--json"))["outcomes"]["failed"] == 3
    auto = json.loads(cli(db, "rem", "run", "--auto", "--project", P, "--json"))
    applied = [a["id"] for a in auto["applied"]]
    assert applied and not auto["dry_run"]
    assert_visible(db, PID, applied + [a["id"] for a in auto["left_pending"]])
    query_affected(db, applied[0])
    assert undo(db, applied[0])[0] == 0
    # the next --auto leaves the undone finding to a person instead of applying it again
    again = json.loads(cli(db, "rem", "run", "--auto", "--project", P, "--op", "staleness_scan", "--json"))
    assert applied[0] not in [a["id"] for a in again["applied"]]
    assert applied[0] in [a["id"] for a in again["left_pending"]]
    # CI never answers a contradiction: the agent's user keeps the newer lesson
    contradiction = next(a["id"] for a in auto["left_pending"] if a["kind"] == "contradiction")
    assert all(a["kind"] != "contradiction" for a in auto["applied"])
    kept = agent.ok("rem_answer", project_path=P, finding_id=contradiction,
                    option=option(db, contradiction, "archive_older"))
    assert kept["result"]["action"] == "archive_older"
    query_affected(db, contradiction)
    reinforce(db, tmp_path, agent)
    save("mcp", "A", "a4: evening, back in A once more", s0 + 4)
    assert hook(db, "E", "startup", P) == s0 + 5  # a session with no save
    # the night's cycle over every default operation, then again with nothing changed: all skipped
    ops = [arg for op in ("staleness_scan", "duplicate_detection", "community_detection", "knowledge_extraction",
                          "context_summary", "contradiction_scan") for arg in ("--op", op)]
    cli(db, "rem", "run", "--project", P, *ops)
    again = json.loads(cli(db, "rem", "run", "--project", P, *ops, "--json"))["report"]
    assert [o["summary"].get("unchanged") for o in again["operations"]] == [True] * 6 and again["findings"] == []

    check_promises(db, tmp_path, saves, current=s0 + 5)


def reinforce(db, tmp_path, agent):
    """Pattern reinforcement is off until asked for: the agent forces a run, a decision stated in
    sessions of both projects becomes one pattern reinforcing the lesson drafted from it at Q's
    review, and with the boost on that lesson's score carries the reinforcement."""
    assert agent.ok("pattern_reinforcement_run", project_path=P)["ran"] is False
    forced = agent.ok("pattern_reinforcement_run", project_path=P, force=True)
    assert forced["ran"] and forced["run"]["summary"]["patterns"] >= 1
    [pattern] = json.loads(cli(db, "patterns", "list", "--kind", "decision", "--json"))
    explained = json.loads(cli(db, "patterns", "explain", pattern["id"], "--json"))
    assert {s["project"] for s in explained["sources"]} == {P, Q}
    assert len(explained["sources"]) == pattern["reinforcement_count"] >= 3
    # the person at Q's review drafted this decision's lesson from knowledge extraction: it holds it
    lesson_id = pattern["lesson_id"]
    assert json.loads(cli(db, "lesson", "show", lesson_id, "--json"))["action"] == pattern["text"]
    assert all(f["kind"] != "reinforced_draft" for f in agent.ok("rem_report", project_path=P)["pending"])
    config = tmp_path / "boost.yaml"
    config.write_text("reinforcement:\n  boost: true\n")
    hits = json.loads(cli(db, "lesson", "query", pattern["text"], "--explain", "--config", config, "--json"))
    boosted = next(h for h in hits if h["id"] == lesson_id)
    assert boosted["score_parts"]["reinforcement_boost"] == min(0.3, 0.05 * pattern["reinforcement_count"])


def check_promises(db, tmp_path, saves, current):
    # every applied finding can still be undone (tried on a copy, newest first)
    copy = tmp_path / "copy.db"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    live = [fid for (fid,) in sql(db, "SELECT finding_id FROM rem_actions WHERE finding_id IS NOT NULL "
                                      "AND undone_at IS NULL ORDER BY id DESC")]
    assert len(live) == len(set(live)), "a finding was applied twice"
    for fid in live:
        query_affected(copy, fid)
        code, _, err = undo(copy, fid)
        assert code == 0, (fid, finding(db, fid)["kind"], err)
    for (fid,) in sql(db, "SELECT finding_id FROM rem_actions WHERE finding_id IS NOT NULL AND undone_at IS NOT NULL"):
        assert sql(db, "SELECT status FROM rem_findings WHERE id = ?", fid)[0][0] in ("pending", "stale")

    # what cycles keep of the texts and of the history is a cache: without it, the same cycle (every
    # comparing operation and pattern reinforcement run again, as a dry run) finds and would apply
    # exactly the same
    assert {table for table in CACHES if sql(db, f"SELECT count(*) FROM {table}")[0][0] == 0} == set()
    # and the pair searches' states (duplicates' pairs, the contradiction scan's claims)
    assert sorted(sql(db, "SELECT search FROM kept_pairs")) == [("contradiction_scan",), ("duplicate_detection",)]
    assert ("lesson_words",) in sql(db, "SELECT name FROM kept_indexes")  # the word index over the lessons
    previews = []
    for source, name in ((db, "kept.db"), (db, "not-kept.db")):
        with sqlite3.connect(source) as src, sqlite3.connect(tmp_path / name) as dst:
            src.backup(dst)
        with sqlite3.connect(tmp_path / name) as conn:
            conn.execute("UPDATE rem_state SET last_run_result = NULL")
            if name == "not-kept.db":
                for table in sorted(CACHES):
                    conn.execute(f"DELETE FROM {table}")
        ops = [a for op in ("duplicate_detection", "community_detection", "contradiction_scan", "pattern_reinforcement")
               for a in ("--op", op)]
        run = json.loads(cli(tmp_path / name, "rem", "run", "--auto", "--dry-run", "--project", P, *ops, "--json"))
        previews.append(sorted((f["id"], f["kind"]) for key in ("applied", "left_pending") for f in run[key]))
    assert previews[0] == previews[1] != []

    # `context at`: the last save of each session in time order; nothing before the first; refused past now
    assert [n for n, _ in saves] == sorted(n for n, _ in saves)
    for n in range(1, current + 1):
        expected = [notes for session, notes in saves if session <= n][-1]
        at = json.loads(cli(db, "context", "at", "--project", P, "--session", n, "--json"))
        assert (at["session"], at["snapshot"]["notes"]) == (n, expected), n
    assert mgcp("context", "at", "--project", P, "--session", 0, "--db", db)[0] == 2
    code, _, err = mgcp("context", "at", "--project", P, "--session", current + 1, "--db", db)
    assert code == 2 and f"which is {current}" in err

    # the report lists every pending finding each project may see
    for path, project_id in ((P, PID), (Q, QID)):
        report = json.loads(cli(db, "rem", "report", "--project", path, "--json"))
        marks, kinds = ", ".join("?" * len(SHARED_OPERATIONS)), ", ".join("?" * len(SHARED_KINDS))
        pending = sql(db, f"SELECT id FROM rem_findings WHERE status = 'pending' AND (project_id = ? "
                          f"OR operation IN ({marks}) OR kind IN ({kinds}) OR (kind = 'summary' AND "
                          f"json_extract(data, '$.of_kind') IN ({kinds})))",
                      project_id, *SHARED_OPERATIONS, *SHARED_KINDS, *SHARED_KINDS)
        assert sorted(f["id"] for f in report["pending"]) == sorted(r[0] for r in pending) != []

    # lesson history has no gaps: versions 1..N for every lesson at version N (after every undo, too)
    for path in (db, copy):
        versions = {}
        for lesson_id, version in sql(path, "SELECT lesson_id, version FROM lesson_versions ORDER BY version"):
            versions.setdefault(lesson_id, []).append(version)
        gaps = {lesson_id: (version, versions.get(lesson_id))
                for lesson_id, version in sql(path, "SELECT id, version FROM lessons")
                if versions.get(lesson_id) != list(range(1, version + 1))}
        assert gaps == {}, f"{path.name}: lesson version -> versions in lesson_versions"

    # every link is held by both its lessons (a superseded lesson keeps the links it had), and the
    # database checks clean, after every merge, forced undo and relink
    for path in (db, copy):
        held = {lesson_id: ({r["target"] for r in json.loads(rels or "[]")}, status) for lesson_id, rels, status in sql(
            path, "SELECT l.id, l.relationships, c.status FROM lessons l LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id")}
        half = [(a, b) for a, (targets, status) in held.items() for b in targets
                if status != "superseded" and held.get(b, (set(), None))[1] != "superseded"
                and b in held and a not in held[b][0]]
        assert half == [], f"{path.name}: links held by one lesson only"
        assert mgcp("db", "check", "--db", path)[0] == 0, path.name

    # the search index holds exactly the active lessons, after every merge, archive and undo
    for path in (db, copy):
        indexed = sql(path, """SELECT d.lesson_id FROM lesson_search JOIN lesson_search_docs d
                               ON d.id = lesson_search.rowid ORDER BY 1""")
        active = sql(path, """SELECT l.id FROM lessons l LEFT JOIN lesson_lifecycle c ON c.lesson_id = l.id
                              WHERE COALESCE(c.status, 'active') = 'active' ORDER BY 1""")
        assert indexed == active, f"{path.name}: the search index and the active lessons differ"

    # at the end of the day the knowledge leaves and comes back whole: a backup is the same
    # knowledge, and export -> import into an empty database -> export gives the same bytes
    exports = []
    for source, out in ((db, "day.jsonl"), (tmp_path / "backup.db", "backup.jsonl"),
                        (tmp_path / "imported.db", "imported.jsonl")):
        if source == tmp_path / "backup.db":
            assert mgcp("db", "backup", source, "--db", db)[0] == 0
        if source == tmp_path / "imported.db":
            assert mgcp("import", "jsonl", tmp_path / "day.jsonl", "--db", source)[0] == 0
        assert mgcp("export", "jsonl", "--db", source, "--out", tmp_path / out)[0] == 0
        exports.append((tmp_path / out).read_bytes())
    assert exports[0] == exports[1] == exports[2]
    # and only whole: the day's export cut short (a killed export, a partial copy) is refused
    (tmp_path / "cut.jsonl").write_bytes(b"".join(exports[0].splitlines(keepends=True)[:-5]))
    code, _, err = mgcp("import", "jsonl", tmp_path / "cut.jsonl", "--db", tmp_path / "from-cut.db")
    assert code == 2 and "cut short" in err and not (tmp_path / "from-cut.db").exists()
