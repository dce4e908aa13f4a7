"""What a merge must leave out, bad rows refused before anything is written, and the guards of
`mgcp export jsonl --out` and `mgcp db backup`, run as a user runs them."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from clihelp import mgcp
from conftest import ROOT
from legacy import build_legacy, pid
from mgcp.persistence import dump


LESSON = ("--trigger", "when a test needs a lesson", "--action", "Write it out in full words")


def export(db, out) -> bytes:
    code, _, err = mgcp("export", "jsonl", "--db", db, "--out", out)
    assert code == 0, err
    return out.read_bytes()


def count(db, sql: str, *args) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchone()[0]
    finally:
        conn.close()


def copies(db, prefix: str, wording: str = "Do the {} thing carefully") -> None:
    for n in range(3):
        code, _, err = mgcp("lesson", "add", f"{prefix}-{n}", "--trigger", f"{prefix} situation {n}", "--action",
                            wording.format(prefix), "--db", db)
        assert code == 0, err


def rem(db, project: str, op: str = "duplicate_detection") -> None:
    code, _, err = mgcp("rem", "run", "--project", project, "--op", op, "--db", db)
    assert code == 0, err


def pending(db, project: str) -> list[dict]:
    code, out, err = mgcp("rem", "report", "--project", project, "--db", db, "--json")
    assert code == 0, err
    return json.loads(out)["pending"]


def merge(source, db, tmp_path) -> dict:
    export(source, tmp_path / "in.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "in.jsonl", "--db", db, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["mode"] == "merge"
    return report


# -- what a merge leaves out -----------------------------------------------------------------------

def test_no_finding_arrives_about_lessons_this_database_kept(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    copies(a, "l")
    rem(a, "/p/a")
    assert pending(a, "/p/a")
    copies(b, "l", "Something unrelated to {}, and different each time")  # l-0.. are other lessons here
    report = merge(a, b, tmp_path)
    skipped = [s for s in report["skipped"] if s["kind"] == "finding"]
    assert skipped and all("not imported" in s["reason"] and "l-0" in s["reason"] for s in skipped)
    assert count(b, "SELECT count(*) FROM rem_findings") == 0 and pending(b, "/p/a") == []
    assert count(b, "SELECT count(*) FROM rem_actions") == 0
    assert mgcp("db", "check", "--db", b)[0] == 0


def test_a_pattern_derived_from_lessons_or_sessions_this_database_kept_stays_out(tmp_path):
    """Else it would stamp another lesson here with the file's reinforcement (or count sessions
    that are not here); what the file and this database share still comes in."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    copies(a, "l")
    for n in range(3):
        code, _, err = mgcp("context", "save", "--project", "/p/a", "--session-id", f"s{n}", "--decision",
                            "Pin every dependency", "--db", a)
        assert code == 0, err
    rem(a, "/p/a", "pattern_reinforcement")
    assert count(a, "SELECT count(*) FROM reinforced_patterns") == 2
    copies(b, "l", "Something unrelated to {}, and different each time")  # l-0.. are other lessons here
    code, _, err = mgcp("context", "save", "--project", "/p/a", "--notes", "here first", "--db", b)
    assert code == 0, err  # the project is kept as it is here
    report = merge(a, b, tmp_path)
    skipped = sorted(s["reason"] for s in report["skipped"] if s["kind"] == "pattern")
    assert len(skipped) == 2 and "derived from sessions of project(s)" in skipped[0] and \
        "reinforces lesson(s) l-0, l-1, l-2, not imported" in skipped[1], skipped
    assert count(b, "SELECT count(*) FROM reinforced_patterns") == 0
    c = tmp_path / "c.db"  # an empty database takes everything
    copies(c, "m")
    assert merge(a, c, tmp_path)["imported"]["reinforced_patterns"] == 2


def test_a_project_here_under_its_path_in_an_older_form_is_kept_not_doubled(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/dev")
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert mgcp("context", "save", "--project", "/home/dev/w/proj", "--notes", "theirs", "--db", a)[0] == 0
    assert mgcp("context", "save", "--project", "/home/dev/w/proj", "--notes", "ours", "--db", b)[0] == 0
    conn = sqlite3.connect(b)
    with conn:  # as an older writer stored it
        conn.execute("UPDATE project_contexts SET project_path = '~/w/proj', project_id = 'older000001'")
        conn.execute("UPDATE context_history SET project_id = 'older000001'")
        conn.execute("UPDATE project_sessions SET project_id = 'older000001'")
    conn.close()
    report = merge(a, b, tmp_path)
    assert any(s["kind"] == "project" and "is here as project older000001" in s["reason"] for s in report["skipped"])
    assert count(b, "SELECT count(*) FROM project_contexts") == 1
    code, out, _ = mgcp("context", "show", "--project", "/home/dev/w/proj", "--json", "--db", b)
    assert code == 0 and json.loads(out)["notes"] == "ours"


def test_a_failure_streak_finding_merged_in_can_be_answered(tmp_path):
    """The merge renumbers the outcomes (their ids are taken here): the finding still speaks."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db, lesson_id, outcomes in ((b, "steady-one", ["--helped", "--helped"]),
                                    (a, "flaky-one", ["--failed"] * 3)):
        assert mgcp("lesson", "add", lesson_id, "--trigger", f"running the {lesson_id} suite", "--action",
                    f"Run the {lesson_id} suite with retries to absorb flakes", "--db", db)[0] == 0
        for flag in outcomes:
            assert mgcp("lesson", "outcome", lesson_id, flag, "--project", "/p", "--db", db)[0] == 0
    [finding] = [f for f in pending(a, "/p") if f["kind"] == "failure_streak"]
    merge(a, b, tmp_path)
    keep = next(i for i, o in enumerate(finding["options"], 1) if o["action"] == "keep")
    code, out, err = mgcp("rem", "resolve", finding["id"], "--option", keep, "--project", "/p", "--db", b)
    assert code == 0, err


def test_a_link_to_a_lesson_whose_id_is_another_lesson_here_stays_out(tmp_path):
    source, db = tmp_path / "source.db", tmp_path / "here.db"
    for lesson_id, words in (("verify-api", "calling an unfamiliar API"), ("read-tests", "changing code")):
        mgcp("lesson", "add", lesson_id, "--trigger", words, "--action", f"Read first when {words}", "--db", source)
    assert mgcp("lesson", "link", "verify-api", "read-tests", "--db", source)[0] == 0
    mgcp("lesson", "add", "verify-api", "--trigger", "deploying on Fridays", "--action", "Deploy before 3pm", "--db", db)
    report = merge(source, db, tmp_path)
    assert {"kind": "link", "id": "read-tests -> verify-api",
            "reason": "lesson verify-api here is another lesson (this database's kept)"} in report["skipped"]
    code, out, _ = mgcp("lesson", "show", "read-tests", "--db", db, "--json")
    assert json.loads(out)["relationships"] == []
    assert mgcp("db", "check", "--db", db)[0] == 0


def test_a_finding_about_lessons_identical_here_arrives(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    copies(a, "l")
    export(a, tmp_path / "lessons.jsonl")
    assert mgcp("import", "jsonl", tmp_path / "lessons.jsonl", "--db", b)[0] == 0  # the same lessons
    rem(a, "/p/a")
    merge(a, b, tmp_path)
    assert {f["id"] for f in pending(b, "/p/a")} == {f["id"] for f in pending(a, "/p/a")} != set()


def test_a_finding_pending_here_under_another_id_is_not_duplicated(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    copies(a, "l")
    export(a, tmp_path / "lessons.jsonl")
    assert mgcp("import", "jsonl", tmp_path / "lessons.jsonl", "--db", b)[0] == 0
    rem(a, "/p/a", "community_detection")  # a's next run gets another number than b's: other finding ids
    rem(a, "/p/a")
    rem(b, "/p/b")
    theirs, ours = pending(a, "/p/a"), pending(b, "/p/b")
    assert ours and {f["id"] for f in theirs}.isdisjoint(f["id"] for f in ours)
    report = merge(a, b, tmp_path)
    assert count(b, "SELECT count(*) FROM rem_findings") == len(ours)
    reasons = [s["reason"] for s in report["skipped"] if s["kind"] == "finding"]
    assert len(reasons) == len(theirs) and all("the same finding is here as" in r for r in reasons)


def test_the_rem_runs_of_a_project_kept_here_stay_out(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    mgcp("context", "save", "--project", "/p/x", "--notes", "a's notes", "--db", a)
    rem(a, "/p/x", "community_detection")
    mgcp("context", "save", "--project", "/p/x", "--notes", "b's notes", "--db", b)
    report = merge(a, b, tmp_path)
    assert {"kind": "project", "id": pid("/p/x"), "reason": "here, differing in notes (this database's kept)"} \
        in report["skipped"]
    assert count(b, "SELECT count(*) FROM rem_runs") == 0 and report["skipped_rows"]["rem_runs"] == 1
    assert json.loads(mgcp("context", "show", "--project", "/p/x", "--db", b, "--json")[1])["notes"] == "b's notes"
    assert mgcp("db", "check", "--db", b)[0] == 0


def test_a_project_whose_path_is_here_under_another_id_is_kept_not_a_crash(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    mgcp("context", "save", "--project", "/p/x", "--notes", "a's notes", "--db", a)
    mgcp("context", "save", "--project", "/p/x", "--notes", "b's notes", "--db", b)
    text = export(a, tmp_path / "a.jsonl").decode().replace(pid("/p/x"), "0123456789ab")
    (tmp_path / "a.jsonl").write_text(text)
    code, out, err = mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", b, "--json")
    assert code == 0, err
    [skipped] = [s for s in json.loads(out)["skipped"] if s["kind"] == "project"]
    assert skipped["id"] == "0123456789ab" and f"is here as project {pid('/p/x')}" in skipped["reason"]
    assert count(b, "SELECT count(*) FROM project_contexts") == 1
    assert mgcp("db", "check", "--db", b)[0] == 0


# -- bad rows --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> list[dict]:
    """The lines of a small valid export: one lesson with its version, one project."""
    where = tmp_path_factory.mktemp("valid")
    mgcp("lesson", "add", "mine", *LESSON, "--db", where / "v.db")
    mgcp("context", "save", "--project", "/p/v", "--notes", "n", "--db", where / "v.db")
    text = export(where / "v.db", where / "v.jsonl").decode()
    return [json.loads(line) for line in text.splitlines()]


def without_trigger(lines):
    del next(x for x in lines if x.get("table") == "lessons")["row"]["trigger"]


def tags_not_json(lines):
    next(x for x in lines if x.get("table") == "lessons")["row"]["tags"] = "[not json"


def no_versions(lines):
    lines[:] = [x for x in lines if x.get("table") != "lesson_versions"]


def same_path_twice(lines):
    project = next(x for x in lines if x.get("table") == "project_contexts")
    lines.append({"table": "project_contexts", "row": {**project["row"], "project_id": "0123456789ab"}})


def says_other_than_its_version(lines):
    next(x for x in lines if x.get("table") == "lessons")["row"]["action"] = "Tampered with after export"


def catalogue_not_as_recorded(lines):
    next(x for x in lines if x.get("table") == "context_history")["row"]["catalogue_hash"] = "0" * 64


def history_out_of_order(lines):
    row = next(x for x in lines if x.get("table") == "context_history")
    lines.insert(lines.index(row) + 1, {"table": "context_history", "row": {**row["row"], "id": row["row"]["id"] - 1}})


@pytest.mark.parametrize("spoil, words", [
    (without_trigger, ["lessons", "'mine'", "trigger"]),
    (says_other_than_its_version, ["lesson mine says other than its version 1"]),
    (catalogue_not_as_recorded, ["context_history row", "does not match the recorded hash"]),
    (history_out_of_order, ["context_history row", "in id order"]),
    (tags_not_json, ["lessons", "'mine'", "tags is not JSON"]),
    (no_versions, ["mine", "lesson_versions"]),
    (same_path_twice, ["project_contexts", "0123456789ab", "UNIQUE"]),  # (a merge keeps the first: see above)
])
def test_a_bad_row_is_one_line_exit_2_and_no_database_is_created(tmp_path, valid, spoil, words):
    lines = json.loads(json.dumps(valid))
    spoil(lines)
    lines = [x for x in lines if "end" not in x]  # a last line counting the rows as spoiled: the row is refused
    lines.append({"end": True, "rows": len(lines) - 1})
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, err = mgcp("import", "jsonl", tmp_path / "bad.jsonl", "--db", tmp_path / "new.db")
    assert (code, out) == (2, "") and err.startswith("Error: ") and err.count("\n") == 1, err
    assert all(w in err for w in words), err
    assert not list(tmp_path.glob("new.db*"))
    if spoil is same_path_twice:
        return
    # into a database that exists: refused the same way, and nothing in it changes
    mgcp("lesson", "add", "other", *LESSON, "--db", tmp_path / "x.db")
    before = export(tmp_path / "x.db", tmp_path / "before.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "bad.jsonl", "--db", tmp_path / "x.db")
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert export(tmp_path / "x.db", tmp_path / "after.jsonl") == before


# -- the guards of export and backup ---------------------------------------------------------------

def test_a_legacy_database_can_be_backed_up_before_its_upgrade(tmp_path):
    build_legacy(tmp_path / "legacy.db")
    code, out, err = mgcp("db", "backup", tmp_path / "copy.db", "--db", tmp_path / "legacy.db", "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] == {"lessons": 3}
    assert count(tmp_path / "copy.db", "SELECT count(*) FROM lessons") == 3


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_export_refuses_to_write_over_the_database(tmp_path, suffix):
    db = tmp_path / "k.db"
    mgcp("lesson", "add", "mine", *LESSON, "--db", db)
    before = db.read_bytes()
    code, out, err = mgcp("export", "jsonl", "--db", db, "--out", f"{db}{suffix}")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "database" in err, err
    assert db.read_bytes() == before
    assert json.loads(mgcp("lesson", "show", "mine", "--db", db, "--json")[1])["action"] == "Write it out in full words"
    code, _, err = mgcp("db", "backup", f"{db}{suffix}", "--db", db, "--force")
    assert code == 2 and "another file" in err


def test_dump_names_the_files_of_a_database(tmp_path):
    db = tmp_path / "k.db"
    assert all(dump.is_database_file(db, f"{db}{s}") for s in ("", "-wal", "-shm"))
    assert not dump.is_database_file(db, tmp_path / "k.jsonl")


def test_a_project_here_only_as_hook_sessions_takes_the_imported_history(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    mgcp("context", "save", "--project", "/p/shop", "--notes", "a's notes", "--db", a)
    mgcp("context", "save", "--project", "/p/shop", "--notes", "a's later notes", "--db", a)
    hook = subprocess.run([sys.executable, str(ROOT / "hooks" / "rem-cycle-trigger.py")], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MGCP_DB": str(b)},
                          input=json.dumps({"session_id": "s-1", "cwd": "/p/shop", "hook_event_name": "SessionStart",
                                            "source": "startup", "transcript_path": "/tmp/s-1.jsonl"}))
    assert hook.returncode == 0, hook.stderr
    assert count(b, "SELECT count(*) FROM project_sessions WHERE project_id = ?", pid("/p/shop")) == 1
    report = merge(a, b, tmp_path)
    assert [r["id"] for r in report["replaced"]] == [pid("/p/shop")]
    assert not [s for s in report["skipped"] if s["kind"] == "project"]
    shown = json.loads(mgcp("context", "show", "--project", "/p/shop", "--db", b, "--json")[1])
    assert shown["notes"] == "a's later notes"
    assert count(b, "SELECT count(*) FROM context_history") == count(a, "SELECT count(*) FROM context_history") == 2
    assert mgcp("db", "check", "--db", b)[0] == 0
    # a project here with history of its own is kept, as before
    mgcp("context", "save", "--project", "/p/shop", "--notes", "b's own notes", "--db", b)
    mgcp("context", "save", "--project", "/p/shop", "--notes", "a's newest notes", "--db", a)
    report = merge(a, b, tmp_path)
    assert report["replaced"] == [] and [s["id"] for s in report["skipped"] if s["kind"] == "project"]


def test_undoing_an_imported_run_never_deletes_the_receiving_databases_own_partition(tmp_path):
    """A merge renumbers imported rows; an imported action's record of a community run may still
    name the receiving database's own row by its id: the undo must refuse, not delete that row."""
    dbs = {name: tmp_path / f"{name}.db" for name in ("a", "b")}
    topics = ["pool", "retry", "cache", "queue", "index", "schema"]
    for name, db in dbs.items():
        for i, topic in enumerate(topics):
            assert mgcp("lesson", "add", f"{name}-{topic}", "--trigger", f"when the {topic} misbehaves",
                        "--action", f"Check the {topic} settings and the {topics[i - 1]} limits first", "--db", db,
                        "--tag", topic)[0] == 0
        assert mgcp("rem", "run", "--op", "community_detection", "--project", f"/{name}", "--db", db)[0] == 0
    export(dbs["a"], tmp_path / "a.jsonl")
    assert mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", dbs["b"])[0] == 0
    own = count(dbs["b"], "SELECT count(*) FROM community_runs WHERE id = 1")
    code, out, err = mgcp("rem", "undo", "--run", "2", "--db", dbs["b"])
    assert own == 1 and count(dbs["b"], "SELECT count(*) FROM community_runs WHERE id = 1") == 1, (code, out, err)


def test_what_a_kept_lesson_or_project_gained_elsewhere_is_named_as_left_out(tmp_path):
    """B took A's lesson and project once; A then recorded an outcome and two more saves. Merged
    again, the lesson and the project are kept as they are here, and the report names the rows of
    theirs the file holds beyond B's (nothing of it is written)."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    mgcp("lesson", "add", "utf8-json", "--trigger", "writing JSON files", "--action",
         "Pass ensure_ascii=False to json.dumps", "--db", a)
    mgcp("context", "save", "--project", "/p/x", "--notes", "first save", "--db", a)
    export(a, tmp_path / "first.jsonl")
    assert mgcp("import", "jsonl", tmp_path / "first.jsonl", "--db", b)[0] == 0  # into an empty database
    assert merge(a, b, tmp_path)["beyond"] == []  # nothing gained since: nothing named
    mgcp("lesson", "outcome", "utf8-json", "--helped", "--db", a)
    for notes in ("second save", "third save"):
        mgcp("context", "save", "--project", "/p/x", "--notes", notes, "--db", a)
    before = (count(b, "SELECT count(*) FROM lesson_outcomes"), count(b, "SELECT count(*) FROM context_history"))
    report = merge(a, b, tmp_path)
    assert report["beyond"] == [
        {"kind": "lesson", "id": "utf8-json", "table": "lesson_outcomes", "rows": 1},
        {"kind": "project", "id": pid("/p/x"), "table": "context_history", "rows": 2}]
    assert (count(b, "SELECT count(*) FROM lesson_outcomes"), count(b, "SELECT count(*) FROM context_history")) == before
    export(a, tmp_path / "in.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "in.jsonl", "--db", b)
    assert code == 0 and ("left out with lesson utf8-json (kept as it is here): 1 lesson_outcomes row(s) more "
                          "in the file than here") in out, out


def test_a_lesson_merged_into_one_whose_id_is_another_lesson_here_comes_in_active(tmp_path):
    """A merged B's copy into A; this database has another lesson under A's id. Brought in superseded
    by it, B's copy would hide behind a lesson that does not say what it said, with no finding to
    undo: it comes in active, and the report says so."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for lesson_id, trigger in (("log-json", "adding logging to a service"),
                               ("log-json-2", "adding logging to the API gateway")):
        mgcp("lesson", "add", lesson_id, "--trigger", trigger, "--action", "Emit structured JSON logs with a request id",
             "--db", a)
    rem(a, "/p/x")
    [finding] = pending(a, "/p/x")
    merge_option = next(n for n, o in enumerate(finding["options"], 1) if o["action"] == "merge")
    assert mgcp("rem", "resolve", finding["id"], "--option", merge_option, "--project", "/p/x", "--db", a)[0] == 0
    mgcp("lesson", "add", "log-json", "--trigger", "adding logging to a service",
         "--action", "Log with structlog and never call print()", "--db", b)
    report = merge(a, b, tmp_path)
    assert {"kind": "merge", "id": "log-json-2 -> log-json", "reason": "lesson log-json here is another lesson "
            "(this database's kept); log-json-2 comes in active"} in report["skipped"]
    shown = json.loads(mgcp("lesson", "show", "log-json-2", "--db", b, "--json")[1])
    assert shown["status"] == "active"
    assert "log-json-2" in mgcp("lesson", "query", "structured JSON logs request id", "--db", b)[1]
    assert mgcp("db", "check", "--db", b)[0] == 0
