import json
import os
import sqlite3

from clihelp import mgcp
from legacy import build_legacy


def test_dpo_pairs_consecutive_real_versions_only(tmp_path):
    db = tmp_path / "legacy.db"
    build_legacy(db)  # has reconstructed versions: they must never be paired
    args = ["--db", db]
    mgcp("lesson", "refine", "three-versions", "--action", "Quarantine, find the cause, then fix or delete.",
         "--reason", "quarantine became a graveyard", *args)
    mgcp("lesson", "refine", "three-versions", "--rationale", "Only a cause-fixed test earns trust back.",
         "--reason", "the why was stale", *args)
    mgcp("lesson", "add", "new-one", "--trigger", "naming a branch", "--action", "Use the ticket id.", *args)
    mgcp("lesson", "refine", "new-one", "--action", "Use the ticket id and a two-word summary.",
         "--reason", "ids alone are opaque", *args)
    out = tmp_path / "pairs.jsonl"
    code, _, err = mgcp("export", "dpo", "--out", out, *args)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert code == 0 and "wrote 2 record(s)" in err
    assert {(r["lesson_id"], r["rejected_version"], r["chosen_version"]) for r in records} == {
        ("three-versions", 3, 4), ("new-one", 1, 2)}
    assert all(r["chosen"] != r["rejected"] and r["prompt"] for r in records)
    first = next(r for r in records if r["lesson_id"] == "new-one")
    assert (first["rejected"], first["chosen"], first["refinement_reason"]) == (
        "Use the ticket id.", "Use the ticket id and a two-word summary.", "ids alone are opaque")
    reconstructed = sqlite3.connect(db).execute(
        "SELECT count(*) FROM lesson_versions WHERE reconstructed = 1").fetchone()[0]
    assert reconstructed == 3


def test_dpo_to_stdout_is_jsonl(db):
    mgcp("lesson", "add", "a", "--trigger", "t", "--action", "Do it the first way.", "--db", db)
    mgcp("lesson", "refine", "a", "--action", "Do it the second way.", "--reason", "r", "--db", db)
    code, out, _ = mgcp("export", "dpo", "--db", db)
    assert code == 0 and [json.loads(line)["chosen"] for line in out.splitlines()] == ["Do it the second way."]


def test_neither_export_writes_over_the_database_itself_even_with_force(db):
    mgcp("lesson", "add", "a1", "--trigger", "when x", "--action", "do a thing properly", "--db", db)
    before = db.read_bytes()
    for kind in ("dpo", "jsonl"):
        for target in (db, f"{db}-wal"):
            code, out, err = mgcp("export", kind, "--out", target, "--force", "--db", db)
            assert code == 2 and err.strip() == f"Error: --out {target} is the database itself; write the " \
                                                 "export to another file", (kind, target, err)
    linked = db.with_name("same-file.db")
    os.link(db, linked)  # another name of the very file
    code, _, err = mgcp("export", "jsonl", "--out", linked, "--force", "--db", db)
    assert code == 2 and "is the database itself" in err
    assert db.read_bytes() == before
    code, out, _ = mgcp("lesson", "show", "a1", "--db", db)
    assert code == 0 and "do a thing properly" in out


def test_two_exports_to_one_path_at_once_leave_one_of_them_whole(tmp_path):
    """Each export writes a temporary file of its own: with one fixed name the two wrote into the
    same file and removed each other's, and an export could report success over the other's rows."""
    import subprocess
    import sys

    from conftest import ROOT

    solo = []
    for name, n in (("a", 3), ("b", 5)):
        db = tmp_path / f"{name}.db"
        for i in range(n):
            assert mgcp("lesson", "add", f"{name}-{i}", "--trigger", f"when exporting {name} {i}",
                        "--action", f"Export the {name} knowledge base {i}.", "--db", db)[0] == 0
        assert mgcp("export", "jsonl", "--db", db, "--out", tmp_path / f"{name}.jsonl")[0] == 0
        solo.append((tmp_path / f"{name}.jsonl").read_bytes())
    out = tmp_path / "shared.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(3):
        procs = [subprocess.Popen([sys.executable, "-m", "mgcp", "export", "jsonl", "--db", tmp_path / f"{name}.db",
                                   "--out", out], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for name in ("a", "b")]
        results = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], results
        assert out.read_bytes() in solo
    assert [f for f in os.listdir(tmp_path) if "mgcp-tmp" in f] == []
    assert os.stat(out).st_mode & 0o777 == os.stat(tmp_path / "a.jsonl").st_mode & 0o777
