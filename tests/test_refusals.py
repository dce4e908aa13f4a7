"""Inputs refused with one line and a non-zero exit, before anything is written."""

import os
import socket
import subprocess
import sys

import pytest

from clihelp import mgcp


@pytest.mark.parametrize("args", [
    ["lesson", "list", "--db", ""], ["lesson", "list", "--db="], ["lesson", "list", "--db", "  "],
    ["context", "save", "--project", "", "--notes", "hello there"], ["export", "jsonl", "--out", ""],
])
def test_an_empty_path_option_is_refused_and_nothing_is_written(tmp_path, monkeypatch, args):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MGCP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("MGCP_DB", raising=False)
    code, out, err = mgcp(*args)
    assert code == 2 and err.startswith("Error: --") and "must not be empty" in err and err.count("\n") == 1
    assert not (tmp_path / "data").exists()


def test_init_where_claude_is_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / ".claude").write_text("")
    code, out, err = mgcp("init", "--project", tmp_path / "proj")
    assert code == 2 and "is a file, not a folder" in err and err.count("\n") == 1
    assert (tmp_path / "proj" / ".claude").read_text() == ""


def test_serve_refuses_a_database_it_cannot_use_and_a_taken_port(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    folder = tmp_path / "adir"
    folder.mkdir()
    run = subprocess.run([sys.executable, "-m", "mgcp", "serve", "--db", str(folder)], env=env,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert run.returncode == 2 and "is a directory" in run.stderr
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "mgcp", "serve", "--http", "--port", str(port),
                              "--db", str(tmp_path / "s.db")], env=env, capture_output=True, text=True,
                             timeout=60)
    assert run.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in run.stderr
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("kind", ["jsonl", "dpo"])
def test_export_replaces_only_an_earlier_export_unless_forced(tmp_path, kind):
    db = tmp_path / "k.db"
    mgcp("lesson", "add", "k1", "--trigger", "when testing things", "--action", "Run the whole suite first.", "--db", db)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, _, err = mgcp("export", kind, "--out", notes, "--db", db)
    assert code == 2 and "is not an earlier export; pass --force" in err and notes.read_text() == "my notes\n"
    out = tmp_path / f"out.{kind}"
    assert mgcp("export", kind, "--out", out, "--db", db)[0] == 0
    assert mgcp("export", kind, "--out", out, "--db", db)[0] == 0  # an earlier export: replaced
    assert mgcp("export", kind, "--out", notes, "--db", db, "--force")[0] == 0
