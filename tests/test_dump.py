"""`mgcp db backup`, `mgcp export jsonl` and `mgcp import jsonl`, run as a user runs them."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from clihelp import mgcp
from conftest import ROOT
from mgcp.errors import InvalidInputError
from mgcp.persistence import dump, migrate


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    """A knowledge base with history, links, context, a REM run, findings and applied actions."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    code, _, err = mgcp("demo", "--db", path, "--json")
    assert code == 0, err
    return path


def export(db, out) -> bytes:
    code, _, err = mgcp("export", "jsonl", "--db", db, "--out", out)
    assert code == 0, err
    return out.read_bytes()


def rows(text: bytes, table: str) -> list[dict]:
    return [line["row"] for line in map(json.loads, text.decode().splitlines()[1:-1]) if line["table"] == table]


def test_every_table_is_exported_or_deliberately_left_out(tmp_path):
    migrate.open_and_migrate(tmp_path / "x.db")
    conn = sqlite3.connect(tmp_path / "x.db")
    try:
        assert dump.unlisted_tables(conn) == []
    finally:
        conn.close()


def test_export_holds_every_version_link_history_row_finding_and_action(demo_db, tmp_path):
    text = export(demo_db, tmp_path / "a.jsonl")
    conn = sqlite3.connect(demo_db)
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in dump.TABLES}
    conn.close()
    assert json.loads(text.splitlines()[0]) == {"format": "mgcp-export", "version": 2}
    assert json.loads(text.splitlines()[-1]) == {"end": True, "rows": len(text.splitlines()) - 2}
    assert {t: len(rows(text, t)) for t in dump.TABLES} == counts
    assert counts["lesson_versions"] > counts["lessons"] and counts["rem_actions"] > 0
    assert any(json.loads(r["relationships"]) for r in rows(text, "lessons"))


def test_export_import_export_is_byte_identical(demo_db, tmp_path):
    first = export(demo_db, tmp_path / "a.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", tmp_path / "new.db", "--json")
    assert code == 0 and json.loads(out)["mode"] == "empty", err
    assert export(tmp_path / "new.db", tmp_path / "b.jsonl") == first
    # and the rebuilt database works: search finds an imported lesson, db check is clean
    code, out, _ = mgcp("lesson", "query", "webhook signature", "--db", tmp_path / "new.db", "--json")
    assert code == 0 and json.loads(out)
    assert mgcp("db", "check", "--db", tmp_path / "new.db")[0] == 0


def test_an_export_shows_dels_and_c1_controls_escaped_and_imports_them_as_they_were(tmp_path):
    """A terminal acts on U+009B (a CSI) and its kin: `export jsonl` to stdout, or `cat` of the file,
    must not pass them on raw; \\u escapes read back as the same text."""
    db = tmp_path / "x.db"
    action = "Strip \x9b[31m and \x7f before logging"
    assert mgcp("lesson", "add", "ctl", "--trigger", "when logs hold controls", "--action", action, "--db", db)[0] == 0
    code, out, err = mgcp("export", "jsonl", "--db", db)
    assert code == 0, err
    assert "\x9b" not in out and "\x7f" not in out and "\\u009b[31m and \\u007f" in out
    code, _, err = mgcp("import", "jsonl", "-", "--db", tmp_path / "new.db", stdin=out)
    assert code == 0, err
    code, out, _ = mgcp("lesson", "show", "ctl", "--db", tmp_path / "new.db", "--json")
    assert code == 0 and json.loads(out)["action"] == action


def test_an_export_read_from_stdin_imports_the_same(demo_db, tmp_path):
    first = export(demo_db, tmp_path / "a.jsonl")
    code, out, err = mgcp("import", "jsonl", "-", "--db", tmp_path / "new.db", stdin=first.decode())
    assert code == 0 and out.startswith("Rebuilt "), err
    assert export(tmp_path / "new.db", tmp_path / "b.jsonl") == first


def test_rows_are_read_afresh_for_each_pass_and_written_in_batches(demo_db, tmp_path, monkeypatch):
    """The import reads the export twice (checked, then written) instead of holding it, and an empty
    database takes it in batches of at most BATCH rows."""
    import asyncio

    from mgcp.persistence.store import Store

    export(demo_db, tmp_path / "a.jsonl")
    monkeypatch.setattr(dump, "BATCH", 3)
    passes = []

    async def work(handle):
        reader = dump.ExportReader(handle, "a.jsonl")

        def read():
            passes.append(len(passes) + 1)
            return reader()
        async with Store.open(tmp_path / "new.db") as store:
            return await dump.import_rows(store, read, "a.jsonl")
    with open(tmp_path / "a.jsonl", encoding="utf-8") as handle:
        report = asyncio.run(work(handle))
    exported = (tmp_path / "a.jsonl").read_bytes()
    assert passes == [1, 2] and report.imported["lessons"] == len(rows(exported, "lessons")) > 3
    assert export(tmp_path / "new.db", tmp_path / "b.jsonl") == exported


def test_an_export_from_a_pipe_or_a_fifo_imports(demo_db, tmp_path):
    """A file that can be read only once (process substitution, a FIFO) is copied aside first."""
    first = export(demo_db, tmp_path / "a.jsonl")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat '{tmp_path / 'a.jsonl'}' > '{fifo}'"])
    code, out, err = mgcp("import", "jsonl", fifo, "--db", tmp_path / "new.db")
    writer.wait(timeout=30)
    assert code == 0 and out.startswith("Rebuilt "), err
    assert export(tmp_path / "new.db", tmp_path / "b.jsonl") == first


def test_an_export_changed_between_the_check_and_the_write_imports_nothing(demo_db, tmp_path):
    """What is written is what was checked: a file rewritten in place after the first pass (here: a
    lesson's tags made invalid) is refused at the end of the second, and the transaction rolls back."""
    import asyncio

    from mgcp.errors import InvalidInputError
    from mgcp.persistence.store import Store

    path = tmp_path / "a.jsonl"
    good = export(demo_db, path).decode()
    lines = good.splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if '"table": "lessons"' in line)
    row = json.loads(lines[at])
    row["row"]["tags"] = "not json"
    bad = "".join(lines[:at] + [json.dumps(row) + "\n"] + lines[at + 1:])

    async def work(handle):
        reader = dump.ExportReader(handle, "a.jsonl")
        passes = iter([reader, lambda: (path.write_text(bad), reader())[1]])
        async with Store.open(tmp_path / "new.db") as store:
            with pytest.raises(InvalidInputError, match="changed while it was being imported"):
                await dump.import_rows(store, lambda: next(passes)(), "a.jsonl")
            return await store.db.fetchall("SELECT id FROM lessons")
    with open(path, encoding="utf-8") as handle:
        assert asyncio.run(work(handle)) == []


def test_importing_twice_duplicates_nothing_and_says_what_it_skipped(demo_db, tmp_path):
    first = export(demo_db, tmp_path / "a.jsonl")
    mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", tmp_path / "new.db")
    code, out, err = mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", tmp_path / "new.db", "--json")
    report = json.loads(out)
    assert code == 0 and report["mode"] == "merge" and report["imported"] == {}
    assert {s["reason"] for s in report["skipped"]} == {"already here"}
    assert export(tmp_path / "new.db", tmp_path / "b.jsonl") == first


def test_a_merge_adds_what_is_new_and_keeps_what_is_here(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    mgcp("lesson", "add", "shared", "--trigger", "t", "--action", "the team's wording", "--db", a)
    mgcp("lesson", "add", "only-a", "--trigger", "t2", "--action", "from database a", "--db", a)
    mgcp("lesson", "refine", "only-a", "--action", "from database a, refined", "--reason", "more precise", "--db", a)
    mgcp("context", "save", "--project", "/p/a", "--notes", "a's notes", "--db", a)
    mgcp("lesson", "add", "shared", "--trigger", "t", "--action", "my own wording", "--db", b)
    mgcp("context", "save", "--project", "/p/b", "--notes", "b's notes", "--db", b)
    export(a, tmp_path / "a.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", b)
    assert code == 0, err
    assert "skipped lesson shared: here, differing in action, created_at, last_refined (this database's kept)" in out
    code, out, _ = mgcp("lesson", "history", "only-a", "--db", b, "--json")
    assert [v["action"] for v in json.loads(out)] == ["from database a", "from database a, refined"]
    assert json.loads(mgcp("lesson", "show", "shared", "--db", b, "--json")[1])["action"] == "my own wording"
    assert json.loads(mgcp("context", "show", "--project", "/p/a", "--db", b, "--json")[1])["notes"] == "a's notes"
    assert mgcp("db", "check", "--db", b)[0] == 0


def test_a_merge_leaves_out_a_parent_that_is_another_lesson_here(tmp_path):
    """A lesson whose parent was kept out (this database has another lesson of that id) would
    name that other lesson as its parent: the parent is left out, and said so."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    mgcp("lesson", "add", "p1", "--trigger", "when deploying", "--action", "Run the migrations first", "--db", a)
    mgcp("lesson", "add", "c1", "--trigger", "when deploying on Fridays", "--action", "Do not deploy on a Friday", "--parent", "p1",
         "--db", a)
    mgcp("lesson", "add", "p1", "--trigger", "when reviewing", "--action", "Read the tests first", "--db", b)
    export(a, tmp_path / "a.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", b)
    assert code == 0, err
    assert "skipped parent c1 -> p1: lesson p1 here is another lesson (this database's kept)" in out
    assert json.loads(mgcp("lesson", "show", "c1", "--db", b, "--json")[1])["parent_id"] is None
    assert mgcp("db", "check", "--db", b)[0] == 0


def rem_history(db, project: str, prefix: str) -> str:
    """Three copies of one lesson under `prefix`, a REM run, and the merge it proposed applied."""
    for n in range(3):
        mgcp("lesson", "add", f"{prefix}-{n}", "--trigger", f"{prefix} situation {n}", "--action",
             f"Do the {prefix} thing carefully", "--db", db)
    mgcp("rem", "run", "--project", project, "--op", "duplicate_detection", "--db", db)
    finding = json.loads(mgcp("rem", "report", "--project", project, "--db", db, "--json")[1])["pending"][0]
    code, _, err = mgcp("rem", "resolve", finding["id"], "--option", finding["recommended"], "--project", project,
                        "--db", db)
    assert code == 0, err
    return finding["id"]


def test_a_merged_finding_keeps_its_actions_and_can_still_be_undone(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    theirs = rem_history(a, "/p/a", "alpha")
    rem_history(b, "/p/b", "beta")  # run 1, action 1, versions 1.. exist here too: the ids collide
    export(a, tmp_path / "a.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "a.jsonl", "--db", b, "--json")
    assert code == 0 and json.loads(out)["mode"] == "merge", err
    assert mgcp("db", "check", "--db", b)[0] == 0
    shown = json.loads(mgcp("rem", "show", theirs, "--db", b, "--json")[1])
    assert shown["finding"]["status"] == "applied" and shown["actions"]
    superseded = [x["id"] for x in json.loads(mgcp("lesson", "list", "--status", "superseded", "--db", b, "--json")[1])]
    assert any(i.startswith("alpha") for i in superseded)
    code, out, err = mgcp("rem", "undo", theirs, "--db", b)
    assert code == 0, err
    superseded = [x["id"] for x in json.loads(mgcp("lesson", "list", "--status", "superseded", "--db", b, "--json")[1])]
    assert not any(i.startswith("alpha") for i in superseded) and any(i.startswith("beta") for i in superseded)
    assert mgcp("db", "check", "--db", b)[0] == 0


@pytest.mark.parametrize("text", ["", "not json\n", '{"format": "other"}\n',
                                  '{"format": "mgcp-export", "version": 1}\n{"table": "nope", "row": {}}\n',
                                  '{"format": "mgcp-export", "version": 1}\n{"table": "lessons", "row": {"colour": 1}}\n'])
def test_a_bad_file_is_refused_and_nothing_is_imported(tmp_path, text):
    (tmp_path / "bad.jsonl").write_text(text)
    mgcp("lesson", "add", "mine", "--trigger", "t", "--action", "a", "--db", tmp_path / "x.db")
    before = export(tmp_path / "x.db", tmp_path / "before.jsonl")
    code, out, err = mgcp("import", "jsonl", tmp_path / "bad.jsonl", "--db", tmp_path / "x.db")
    assert (code, out) == (2, "") and err.startswith("Error: ") and "\n" == err[-1] and err.count("\n") == 1
    assert export(tmp_path / "x.db", tmp_path / "after.jsonl") == before


def test_out_dash_is_stdout(demo_db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = mgcp("export", "jsonl", "--out", "-", "--db", demo_db)
    assert code == 0 and out.encode() == export(demo_db, tmp_path / "a.jsonl") and not (tmp_path / "-").exists()


def test_an_export_to_a_pipe_writes_into_it_and_leaves_it_a_pipe(demo_db, tmp_path):
    """`--out` naming a FIFO (or a device such as /dev/null) is written into: replacing it with a
    file, as an export replaces an earlier export, turned /dev/null into a regular file when run as
    root."""
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    code, _, err = mgcp("export", "jsonl", "--out", fifo, "--db", demo_db)
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got == [export(demo_db, tmp_path / "a.jsonl")]


def test_an_export_that_could_not_be_imported_is_not_written(demo_db, tmp_path, monkeypatch):
    """A hand-edited column an import would refuse: the export names the row and keeps no file
    (an earlier export at --out stays as it was), to a file or to stdout."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "damaged.db"
    db.write_bytes(demo_db.read_bytes())
    good = export(db, tmp_path / "good.jsonl")
    lesson = sqlite3.connect(db).execute("SELECT id FROM lessons ORDER BY id").fetchone()[0]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE lessons SET tags = '[not json' WHERE id = ?", [lesson])
    for out in (["--out", tmp_path / "good.jsonl"], ["--out", tmp_path / "new.jsonl"], []):
        code, printed, err = mgcp("export", "jsonl", *out, "--db", db)
        assert (code, printed) == (1, "") and f"lessons row (id={lesson!r}): tags is not JSON" in err, err
        assert "an import would refuse it, so no export was written" in err and err.count("\n") == 1
    assert (tmp_path / "good.jsonl").read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("damaged.db")) == ["good.jsonl"]


@pytest.mark.parametrize("cut", [1, 3, 10])
def test_an_export_cut_short_is_refused_and_nothing_is_imported(demo_db, tmp_path, cut):
    """A killed `export jsonl > f` or a partial copy ends at a line boundary: its last line is
    missing (or, cut and mended by hand, counts other rows)."""
    lines = export(demo_db, tmp_path / "a.jsonl").decode().splitlines(keepends=True)
    (tmp_path / "cut.jsonl").write_text("".join(lines[:-cut]))
    code, out, err = mgcp("import", "jsonl", tmp_path / "cut.jsonl", "--db", tmp_path / "new.db")
    assert (code, out) == (2, "") and "is cut short or altered (it has no last line); nothing was imported" in err
    (tmp_path / "mended.jsonl").write_text("".join(lines[:-cut - 1] + lines[-1:]))
    code, out, err = mgcp("import", "jsonl", tmp_path / "mended.jsonl", "--db", tmp_path / "new.db")
    assert (code, out) == (2, "") and f"it holds {len(lines) - 2 - cut}" in err
    assert not list(tmp_path.glob("new.db*"))  # a refused import creates no database


def test_an_export_of_format_version_1_still_imports(demo_db, tmp_path):
    lines = export(demo_db, tmp_path / "a.jsonl").decode().splitlines(keepends=True)
    (tmp_path / "v1.jsonl").write_text('{"format": "mgcp-export", "version": 1}\n' + "".join(lines[1:-1]))
    code, out, err = mgcp("import", "jsonl", tmp_path / "v1.jsonl", "--db", tmp_path / "new.db")
    assert code == 0, err
    assert export(tmp_path / "new.db", tmp_path / "b.jsonl").decode().splitlines(keepends=True) == lines


@pytest.mark.parametrize("table, column, value, says", [
    ("lessons", "version", "three", "version is not an integer ('three')"),
    ("lessons", "usage_count", 1.5, "usage_count is not an integer (1.5)"),
    ("lessons", "examples", '{"a": 1}', "examples is not a JSON list ('{\"a\": 1}')"),
    ("lesson_versions", "version", 2 ** 63, "version is 9223372036854775808, past SQLite's 64-bit integers"),
    ("lesson_traits", "confidence", "high", "confidence is not a number ('high')"),
    ("project_contexts", "catalogue", '"text"', "catalogue is not a JSON object ('\"text\"')"),
    ("project_contexts", "session_count", True, "session_count holds a bool, not a stored value"),
    ("context_history", "active_files", "[1]", "active_files[0] cannot be read back"),
    ("rem_findings", "subject", '{"x": "v1"}', "subject.x cannot be read back"),
    ("rem_findings", "options", "{}", "options is not a JSON list ('{}')"),
    ("rem_runs", "duration_ms", float("nan"), "duration_ms is nan, not a finite number"),
    ("query_log", "query", 7, "query is not text (7)"),
    ("community_summaries", "member_count", None, "member_count is missing (null)"),
    ("lesson_traits", "confidence", 7.5, "confidence must be a number from 0 to 1; got 7.5"),
    ("lesson_traits", "kind", "bogus", "unknown kind 'bogus'"),
])
def test_a_row_the_store_could_not_read_back_imports_nothing(demo_db, tmp_path, table, column, value, says):
    """A value of the wrong type (or JSON of the wrong shape) would go in as it is and make every
    read of its row fail: the import names the table, the row and the column, and writes nothing."""
    lines = export(demo_db, tmp_path / "a.jsonl").decode().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if json.loads(line).get("table") == table)
    line = json.loads(lines[at])
    line["row"][column] = value
    lines[at] = json.dumps(line) + "\n"
    (tmp_path / "bad.jsonl").write_text("".join(lines))
    code, out, err = mgcp("import", "jsonl", tmp_path / "bad.jsonl", "--db", tmp_path / "new.db")
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    key = dump._key(table, line["row"])
    assert err.startswith(f"Error: {tmp_path / 'bad.jsonl'}: {table} row ({key}): {says}"), err
    assert err.endswith("; nothing was imported\n") and not (tmp_path / "new.db").exists()


@pytest.mark.parametrize("spoil, says", [
    (lambda lesson, rows: lesson.update(version=lesson["version"] + 2), "but the file has no version"),
    (lambda lesson, rows: rows.append({**rows[-1], "id": 10 ** 6}), "more than once"),
    (lambda lesson, rows: lesson.update(version=10 ** 15), "but the file has no version"),  # found at once
])
def test_a_lesson_whose_history_db_check_would_fail_imports_nothing(demo_db, tmp_path, spoil, says):
    """Every version from 1 to the lesson's own, each once: else the import would make a database
    `db check` calls damaged, whose lesson can no longer be refined."""
    lines = [json.loads(line) for line in export(demo_db, tmp_path / "a.jsonl").decode().splitlines()]
    lesson = next(x["row"] for x in lines if x.get("table") == "lessons")
    rows = [x["row"] for x in lines if x.get("table") == "lesson_versions" and x["row"]["lesson_id"] == lesson["id"]]
    added = len(rows)
    spoil(lesson, rows)
    at = max(n for n, x in enumerate(lines) if x.get("table") == "lesson_versions") + 1
    lines[at:at] = [{"table": "lesson_versions", "row": row} for row in rows[added:]]
    lines = [x for x in lines if "end" not in x] + [{"end": True, "rows": len([x for x in lines if "row" in x])}]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, err = mgcp("import", "jsonl", tmp_path / "bad.jsonl", "--db", tmp_path / "new.db")
    assert (code, out) == (2, "") and f"lesson {lesson['id']} " in err and says in err, err
    assert "(`db check` would fail); nothing was imported" in err and not (tmp_path / "new.db").exists()


def test_a_lesson_whose_parent_is_missing_imports_nothing(tmp_path):
    lesson = {"id": "child", "trigger": "t", "action": "a", "version": 1, "created_at": "2025-01-01T00:00:00+00:00",
              "last_refined": "2025-01-01T00:00:00+00:00", "parent_id": "ghost"}
    version = {"id": 1, "lesson_id": "child", "version": 1, "trigger": "t", "action": "a",
               "timestamp": "2025-01-01T00:00:00+00:00"}
    (tmp_path / "x.jsonl").write_text(dump.header() + json.dumps({"table": "lessons", "row": lesson}) + "\n"
                                      + json.dumps({"table": "lesson_versions", "row": version}) + "\n"
                                      + json.dumps({"end": True, "rows": 2}) + "\n")
    code, _, err = mgcp("import", "jsonl", tmp_path / "x.jsonl", "--db", tmp_path / "x.db")
    assert code == 2 and "missing lessons row" in err
    assert not (tmp_path / "x.db").exists()  # a refused import creates no database


WRITER = """
import asyncio, sys
from mgcp.persistence.store import Store

async def main():
    async with Store.open(sys.argv[1]) as store:
        for i in range(100000):
            await store.lessons.add(f"busy-{i:06d}", f"trigger {i}", f"action {i}")
            if i % 7 == 0:
                await store.lessons.refine(f"busy-{i:06d}", "again", action=f"action {i}, refined")
            print(f"busy-{i:06d}", flush=True)

asyncio.run(main())
"""


def test_a_backup_taken_while_a_writer_is_busy_holds_every_committed_write(tmp_path):
    db = tmp_path / "live.db"
    migrate.open_and_migrate(db)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        committed = [writer.stdout.readline().strip() for _ in range(50)]
        code, out, err = mgcp("db", "backup", tmp_path / "copy.db", "--db", db, "--json")
        more = [writer.stdout.readline().strip() for _ in range(20)]
    finally:
        writer.kill()
        writer.wait()
    assert code == 0, err
    assert json.loads(out)["backup"] == str(tmp_path / "copy.db") and all(more)  # the writer went on writing
    conn = sqlite3.connect(tmp_path / "copy.db")
    saved = {r[0] for r in conn.execute("SELECT id FROM lessons")}
    conn.close()
    assert set(committed) <= saved
    code, out, err = mgcp("db", "check", "--db", tmp_path / "copy.db")
    assert code == 0, out + err


def test_backup_refuses_to_overwrite_without_force(demo_db, tmp_path):
    (tmp_path / "b.db").write_text("precious")
    code, out, err = mgcp("db", "backup", tmp_path / "b.db", "--db", demo_db)
    assert code == 2 and "--force" in err and (tmp_path / "b.db").read_text() == "precious"
    assert mgcp("db", "backup", tmp_path / "b.db", "--db", demo_db, "--force")[0] == 0
    assert export(tmp_path / "b.db", tmp_path / "b.jsonl") == export(demo_db, tmp_path / "d.jsonl")


def _lesson(conn, lesson_id, action):
    conn.execute("INSERT INTO lessons (id, trigger, action, created_at, last_refined) VALUES (?, ?, ?, ?, ?)",
                 [lesson_id, f"when {lesson_id}", action, "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00"])


def test_a_backup_restored_over_a_database_left_with_its_log_is_the_backup(tmp_path):
    """A crash leaves a database's -wal beside it; a backup put in its place must not have that
    log replayed onto it. While a program has the database open, the restore is refused."""
    live, monday, crashed = tmp_path / "live.db", tmp_path / "monday.db", tmp_path / "crashed.db"
    migrate.open_and_migrate(live)
    with sqlite3.connect(live) as conn:
        _lesson(conn, "verify-api", "Read its signature first")
    dump.backup(live, monday)
    holder = sqlite3.connect(live)
    holder.execute("PRAGMA wal_autocheckpoint = 0")
    holder.execute("UPDATE lessons SET action = 'BAD EDIT'")
    _lesson(holder, "junk", "Junk added after the backup")
    holder.commit()
    code, _, err = mgcp("db", "backup", live, "--db", monday, "--force")
    assert code != 0 and "open in another program" in err
    for suffix in ("", "-wal"):  # the files a crash leaves
        (tmp_path / f"crashed.db{suffix}").write_bytes((tmp_path / f"live.db{suffix}").read_bytes())
    holder.close()
    code, _, err = mgcp("db", "backup", crashed, "--db", monday, "--force")
    assert code == 0, err
    conn = sqlite3.connect(crashed)
    assert conn.execute("SELECT id, action FROM lessons").fetchall() == [("verify-api", "Read its signature first")]
    conn.close()
    assert sorted(p.name for p in tmp_path.iterdir() if "mgcp-tmp" in p.name) == []


CRASHING_WRITER = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 10")  # the transaction spills into the file: its journal is hot
conn.execute("BEGIN")
conn.execute("CREATE TABLE junk (x)")
for i in range(3000):
    conn.execute("INSERT INTO junk VALUES (?)", ["x" * 500])
os._exit(0)
"""


def test_a_backup_over_a_file_a_crashed_writer_left_with_its_rollback_journal_is_the_backup(demo_db, tmp_path):
    old = tmp_path / "old.db"
    dump.backup(demo_db, old)  # a backup file is in rollback-journal mode
    subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(old)], check=True)
    assert (tmp_path / "old.db-journal").stat().st_size
    code, _, err = mgcp("db", "backup", old, "--db", demo_db, "--force")
    assert code == 0, err
    assert not (tmp_path / "old.db-journal").exists()
    assert export(old, tmp_path / "b.jsonl") == export(demo_db, tmp_path / "d.jsonl")


def test_a_restore_where_a_log_was_left_without_its_database_is_refused(demo_db, tmp_path):
    """The database was moved away and its -wal stayed: a backup put at its path would have that
    log replayed onto it."""
    (tmp_path / "live.db-wal").write_bytes(b"a log of another file")
    code, out, err = mgcp("db", "backup", tmp_path / "live.db", "--db", demo_db)
    assert (code, out) == (1, "") and "live.db-wal is left beside" in err and err.count("\n") == 1, err
    assert not (tmp_path / "live.db").exists()


def test_a_backup_never_replaces_a_file_another_backup_put_there_meanwhile(demo_db, tmp_path, monkeypatch):
    """Without --force, the check that the path is free and the write are one step (a hard link)."""
    dest = tmp_path / "out" / "written.db"
    dest.parent.mkdir()

    def meanwhile(target, shown):  # another backup puts its file there after the check
        dest.write_text("another backup's")
    monkeypatch.setattr(dump, "_settle_log", meanwhile)
    with pytest.raises(InvalidInputError, match="written meanwhile"):
        dump.backup(demo_db, dest)
    assert dest.read_text() == "another backup's" and [p.name for p in dest.parent.iterdir()] == ["written.db"]


def test_a_backup_onto_a_loop_of_symlinks_says_so_in_one_line(demo_db, tmp_path):
    (tmp_path / "l2.db").symlink_to(tmp_path / "l1.db")
    (tmp_path / "l1.db").symlink_to(tmp_path / "l2.db")
    code, out, err = mgcp("db", "backup", tmp_path / "l1.db", "--db", demo_db, "--force")
    assert (code, out) == (2, "") and "cannot follow" in err and err.count("\n") == 1, err


def test_a_backup_onto_a_symlink_replaces_the_file_it_names_and_keeps_its_permissions(demo_db, tmp_path):
    real = tmp_path / "2026.db"
    real.write_text("old")
    real.chmod(0o600)
    (tmp_path / "latest.db").symlink_to(real)
    code, _, err = mgcp("db", "backup", tmp_path / "latest.db", "--db", demo_db, "--force")
    assert code == 0, err
    assert (tmp_path / "latest.db").is_symlink() and real.stat().st_mode & 0o777 == 0o600
    assert export(real, tmp_path / "b.jsonl") == export(demo_db, tmp_path / "d.jsonl")


def test_backup_of_a_missing_database_is_an_error_and_creates_nothing(tmp_path):
    code, _, err = mgcp("db", "backup", tmp_path / "b.db", "--db", tmp_path / "none.db")
    assert code == 2 and "no database" in err and not (tmp_path / "none.db").exists()
    assert not (tmp_path / "b.db").exists()


def test_importing_a_database_file_says_it_is_a_database_and_a_backup_onto_the_database_says_so(demo_db, tmp_path):
    code, out, err = mgcp("import", "jsonl", demo_db, "--db", tmp_path / "new.db")
    assert (code, out) == (2, "") and "it is an SQLite database, not an export" in err, err
    assert not (tmp_path / "new.db").exists()
    code, out, err = mgcp("db", "backup", demo_db, "--db", demo_db)  # without --force too
    assert (code, out) == (2, "") and "another file than the database" in err, err
