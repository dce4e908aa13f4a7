"""Faults and hostile input, each as a user meets it: through the real command line (a subprocess,
so that arguments are real bytes), the hook and `mgcp serve`. Every case ends in one clear line and
a non-zero exit (the hook: exit 0 and silence), never a traceback, and leaves the files as they were.
"""

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ROOT, dump

HOOK = ROOT / "hooks" / "rem-cycle-trigger.py"


def cli(*args: str | bytes, stdin: bytes = b"", env: dict | None = None, wrap=None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mgcp", *args]
    return subprocess.run(wrap(cmd) if wrap else cmd, input=stdin, capture_output=True, timeout=120,
                          env={**os.environ, **(env or {})})


def one_line_error(result: subprocess.CompletedProcess, code: int = 2) -> str:
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == code, (result.returncode, err)
    assert "Traceback" not in err and err.startswith("Error: ") and err.count("\n") == 1, err
    return err


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def hook(db: Path, cwd: str = "/work/p") -> subprocess.CompletedProcess:
    payload = json.dumps({"session_id": "s-1", "cwd": cwd, "source": "startup"}).encode()
    return subprocess.run([sys.executable, str(HOOK)], input=payload, capture_output=True, timeout=60,
                          env={**os.environ, "MGCP_DB": str(db)})


def unprivileged(cmd: list) -> list:
    """The command without root's power to ignore file permissions (as an ordinary user runs it)."""
    if os.geteuid() != 0:
        return cmd
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: file permissions cannot be tested")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *cmd]


@pytest.fixture
def lessons_db(tmp_path) -> Path:
    path = tmp_path / "kb" / "lessons.db"
    assert cli("lesson", "add", "keep-me", "--trigger", "when x", "--action", "do y with care", "--db", str(path)).returncode == 0
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file, for byte comparisons
    conn.close()
    return path


# -- invalid UTF-8 in arguments ---------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    [b"lesson", b"add", b"bad\xff", b"--trigger", b"t", b"--action", b"a"],
    [b"lesson", b"add", b"ok", b"--trigger", b"when \xff", b"--action", b"a"],
    [b"lesson", b"add", b"ok", b"--trigger", b"t", b"--action", b"a", b"--tag", b"\xed\xa0\x80"],
    [b"lesson", b"refine", b"keep-me", b"--reason", b"r\xfe", b"--action", b"b"],
    [b"context", b"save", b"--project", b"/p/\xff", b"--notes", b"n"],
    [b"context", b"save", b"--project", b"/p", b"--notes", b"n", b"--session-id", b"s\xc3"],
    [b"lesson", b"query", b"fo\xffo"],
])
def test_invalid_utf8_arguments_are_refused_naming_the_argument(lessons_db, args):
    before = dump(lessons_db)
    err = one_line_error(cli(*args, b"--db", str(lessons_db).encode()))
    assert "not valid UTF-8" in err
    assert dump(lessons_db) == before


def test_invalid_utf8_names_the_option_it_belongs_to(lessons_db):
    err = one_line_error(cli("lesson", "add", "x", "--trigger", b"when \xff", "--action", "Do the safe thing.", "--db", str(lessons_db)))
    assert "the value of --trigger" in err


# -- catalogue files --------------------------------------------------------------------------------

CATALOGUES = {
    "latin1": ('{"caf\u00e9": 1}'.encode("latin-1"), "not UTF-8"),
    "utf16": ('{"a": 1}'.encode("utf-16"), "UTF-16"),
    "lone surrogate": (b'{"a": "\\ud800"}', "not valid text"),
    "990 deep": (b'{"a": ' + b"[" * 990 + b"]" * 990 + b"}", "nested too deeply"),
    "400 deep": (b'{"a": ' + b"[" * 400 + b"]" * 400 + b"}", "nested too deeply"),
    "5000 digits": (b'{"a": ' + b"9" * 5000 + b"}", "too large"),
    "beyond 64 bits": (b'{"a": 18446744073709551616}', "too large"),
    "NaN": (b'{"a": NaN}', "NaN"),
    "Infinity": (b'{"a": [1, -Infinity]}', "Infinity"),
    "overflowing decimal": (b'{"a": 1e400}', "the number 1e400, too large to store"),
    "underflowing decimal": (b'{"a": [1e-400]}', "the number 1e-400, too small to store"),
    "more digits than a float": (b'{"a": 3.14159265358979323846}', "would be stored as 3.141592653589793"),
    "enormous": (b'{"a": "' + b"x" * 1_100_000 + b'"}', "too long"),
    "a key twice": (b'{"a": 1, "b": {"c": 1, "c": 2}}', "gives the key 'c' twice in one object"),
}


@pytest.mark.parametrize("name", CATALOGUES)
def test_a_catalogue_that_cannot_round_trip_is_refused(lessons_db, tmp_path, name):
    data, needle = CATALOGUES[name]
    (tmp_path / "cat.json").write_bytes(data)
    before = dump(lessons_db)
    err = one_line_error(cli("context", "save", "--project", "/p", "--catalogue", str(tmp_path / "cat.json"),
                             "--db", str(lessons_db)))
    assert needle in err
    assert dump(lessons_db) == before
    # The same bytes on standard input.
    err = one_line_error(cli("context", "save", "--project", "/p", "--catalogue", "-", "--db", str(lessons_db),
                             stdin=data))
    assert needle in err
    assert dump(lessons_db) == before


def test_a_deep_but_allowed_catalogue_with_a_bom_reads_back_exactly(lessons_db, tmp_path):
    from mgcp.validation import MAX_DEPTH

    value: object = {"leaf": "caf\u00e9 \u0000 \u2028 end", "n": -2**63, "x": 1.5e300}
    for level in range(MAX_DEPTH - 1):
        value = {f"k{level}": value}
    (tmp_path / "cat.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(value).encode())
    assert cli("context", "save", "--project", "/p", "--catalogue", str(tmp_path / "cat.json"),
               "--db", str(lessons_db)).returncode == 0
    shown = cli("context", "show", "--project", "/p", "--json", "--db", str(lessons_db))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["catalogue"] == value
    at = cli("context", "at", "--project", "/p", "--session", "1", "--json", "--db", str(lessons_db))
    assert at.returncode == 0, at.stderr
    assert json.loads(at.stdout)["catalogue"] == value


# -- rem-config files -------------------------------------------------------------------------------

CONFIGS = {
    "latin1": ("# caf\u00e9\nrem:\n  staleness_scan:\n    interval: 3\n".encode("latin-1"), "not UTF-8"),
    "utf16": ("rem:\n  staleness_scan:\n    interval: 3\n".encode("utf-16"), "not UTF-8"),
    "deep list": (b"rem: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"),
    "deep mapping": (b"rem: " + b"{a: " * 3000 + b"1" + b"}" * 3000 + b"\n", "nested too deeply"),
    "5000 digits": (b"rem:\n  staleness_scan:\n    interval: " + b"9" * 5000 + b"\n", "too large"),
    "beyond 64 bits": (b"rem:\n  staleness_scan:\n    interval: 99999999999999999999\n", "invalid value"),
    "infinite scale": (b"rem:\n  knowledge_extraction:\n    scale: .inf\n", "invalid value"),
    "NaN threshold": (b"rem:\n  duplicate_detection:\n    merge_threshold: .nan\n", "invalid value"),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_a_bad_rem_config_is_one_line_and_the_hook_stays_silent(lessons_db, tmp_path, name):
    data, needle = CONFIGS[name]
    config = tmp_path / "rem-config.yaml"
    config.write_bytes(data)
    for command in (["rem", "status"], ["rem", "run"]):
        err = one_line_error(cli(*command, "--project", "/p", "--config", str(config), "--db", str(lessons_db)))
        assert needle in err and str(config) in err
    result = subprocess.run([sys.executable, str(HOOK)], capture_output=True, timeout=60,
                            input=json.dumps({"session_id": "s", "cwd": "/p"}).encode(),
                            env={**os.environ, "MGCP_DB": str(lessons_db), "MGCP_REM_CONFIG": str(config)})
    assert (result.returncode, result.stdout) == (0, b"")


# -- numbers out of range on the command line --------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["context", "history", "--project", "/p", "--limit", "9" * 25],
    ["context", "at", "--project", "/p", "--session", "9" * 25],
    ["rem", "undo", "--run", "9" * 25],
    ["rem", "resolve", "0123456789abcdef", "--option", "9" * 25, "--project", "/p"],
])
def test_numbers_beyond_64_bits_are_usage_errors(lessons_db, args):
    assert cli("context", "save", "--project", "/p", "--notes", "n", "--db", str(lessons_db)).returncode == 0
    one_line_error(cli(*args, "--db", str(lessons_db)))


# -- files and permissions --------------------------------------------------------------------------

def test_a_zero_byte_file_is_refused_by_reads_and_writes_and_left_alone(tmp_path):
    empty = tmp_path / "lessons.db"
    empty.touch()
    for args in (["lesson", "show", "x"], ["lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing."],
                 ["db", "status"], ["db", "check"]):
        err = one_line_error(cli(*args, "--db", str(empty)))
        assert "empty file" in err and str(empty) in err and "db migrate" in err
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["lessons.db"]
    assert (hook(empty).returncode, hook(empty).stdout) == (0, b"")
    assert empty.stat().st_size == 0


def test_db_migrate_makes_an_empty_file_a_database(tmp_path):
    """`touch lessons.db` (a file to bind-mount into a container), then `mgcp db migrate`."""
    empty = tmp_path / "lessons.db"
    empty.touch()
    assert cli("db", "migrate", "--db", str(empty)).returncode == 0
    assert cli("lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing.", "--db", str(empty)).returncode == 0


def test_a_pipe_or_a_device_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null")):
        for args in (["lesson", "show", "x"], ["lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing."], ["db", "check"]):
            err = one_line_error(cli(*args, "--db", str(target)))
            assert "not a regular file" in err
        result = hook(target)
        assert (result.returncode, result.stdout) == (0, b"")


def test_a_name_too_long_is_one_line(tmp_path):
    err = one_line_error(cli("lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing.", "--db", str(tmp_path / ("a" * 300 + ".db"))))
    assert "too long" in err


def test_a_database_is_created_where_hard_links_are_not_allowed(tmp_path, monkeypatch):
    from mgcp.persistence import migrate

    def no_links(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    migrate.open_and_migrate(tmp_path / "usb.db")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("usb.db-")) == ["usb.db"]
    assert migrate.pending_migrations(sqlite3.connect(tmp_path / "usb.db")) == []


def test_ten_processes_creating_one_database_all_succeed(tmp_path):
    target = tmp_path / "new" / "lessons.db"
    procs = [subprocess.Popen([sys.executable, "-m", "mgcp", "lesson", "add", f"l{i}", "--trigger", f"when {i}",
                               "--action", f"do step {i} with care", "--db", str(target)], stderr=subprocess.PIPE) for i in range(10)]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 10, errors
    assert sqlite3.connect(target).execute("SELECT count(*) FROM lessons").fetchone()[0] == 10
    assert [p.name for p in target.parent.iterdir() if p.name.endswith(".new")] == []


@pytest.mark.parametrize("request_id", [b"1.5", b"null", b"true", b'{"a": 1}', b"[1]"])
def test_a_request_whose_id_is_not_a_string_or_an_integer_is_answered(lessons_db, request_id):
    server = RawServer(lessons_db)
    try:
        server.send(b'{"jsonrpc": "2.0", "id": %s, "method": "tools/list"}' % request_id)
        answer = server.reply()
        assert answer["id"] is None and answer["error"]["code"] == -32600, answer
        server.send(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}')
        assert server.reply()["id"] == 8
    finally:
        server.close()


def test_a_rollback_that_sqlite_already_made_does_not_hide_the_error(db):
    """A statement that makes SQLite roll the transaction back itself (as a full disk does): the
    caller sees that statement's error, not "cannot rollback - no transaction is active"."""
    import asyncio

    from mgcp.persistence.database import Database

    async def scenario():
        async with Database.open(db) as database:
            await database.conn.execute("CREATE TEMP TRIGGER refuse BEFORE INSERT ON query_log "
                                        "BEGIN SELECT RAISE(ROLLBACK, 'refused by the trigger'); END")
            with pytest.raises(sqlite3.IntegrityError, match="refused by the trigger"):
                async with database.transaction():
                    async with database.transaction():  # a savepoint inside, as the store nests them
                        await database.insert("query_log", {"query": "q", "result_ids": "[]", "created_at": "t"})

    asyncio.run(scenario())


def test_a_new_database_is_never_a_zero_byte_file(tmp_path):
    from mgcp.persistence import migrate

    path = tmp_path / "new" / "lessons.db"
    migrate._create(path)
    assert path.stat().st_size > 0 and path.read_bytes()[:16] == b"SQLite format 3\x00"
    assert sorted(p.name for p in path.parent.iterdir()) == ["lessons.db"]  # no scratch file left


def test_a_path_through_a_file_is_named(tmp_path):
    (tmp_path / "afile").write_text("not a directory")
    for args in (["lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing."], ["lesson", "show", "x"]):
        err = one_line_error(cli(*args, "--db", str(tmp_path / "afile" / "x.db")))
        assert "is a file, not a directory" in err
    assert (tmp_path / "afile").read_text() == "not a directory"


@pytest.fixture
def world_readable(tmp_path):
    """A directory that a process without root's file powers can reach (pytest's tmp is 0700)."""
    for parent in [tmp_path, *tmp_path.parents][:3]:
        parent.chmod(parent.stat().st_mode | 0o755)
    return tmp_path


def test_a_read_only_database_file_is_named_and_unchanged(lessons_db, world_readable):
    lessons_db.chmod(0o444)
    before = digest(lessons_db)
    err = one_line_error(cli("lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing.", "--db", str(lessons_db),
                             wrap=unprivileged))
    assert "read-only" in err and str(lessons_db) in err and "corrupt" not in err
    assert digest(lessons_db) == before
    result = subprocess.run(unprivileged([sys.executable, str(HOOK)]), capture_output=True, timeout=60,
                            input=b'{"session_id": "s", "cwd": "/p"}', env={**os.environ, "MGCP_DB": str(lessons_db)})
    assert (result.returncode, result.stdout) == (0, b"") and digest(lessons_db) == before


def test_a_read_only_directory_is_named_not_called_corrupt(lessons_db, world_readable):
    folder = lessons_db.parent
    for extra in folder.glob("lessons.db-*"):
        extra.unlink()
    before = digest(lessons_db)
    folder.chmod(0o555)
    try:
        for args in (["lesson", "show", "keep-me"], ["lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing."]):
            err = one_line_error(cli(*args, "--db", str(lessons_db), wrap=unprivileged))
            assert "read-only" in err and str(folder) in err and "corrupt" not in err
        err = one_line_error(cli("lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing.",
                                 "--db", str(folder / "new.db"), wrap=unprivileged))
        assert "read-only" in err and "Traceback" not in err
    finally:
        folder.chmod(0o755)
    assert digest(lessons_db) == before and not (folder / "new.db").exists()


@contextmanager
def full_disk(base: Path, size_kb: int):
    """A small file system (tmpfs) filled up later by the test; skips where mounting is not allowed."""
    mount = base / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small file system here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_named_and_the_database_is_unchanged(tmp_path):
    with full_disk(tmp_path, 2048) as disk:
        path = disk / "lessons.db"
        assert cli("lesson", "add", "keep-me", "--trigger", "when x", "--action", "do y with care", "--db", str(path)).returncode == 0
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        before, rows = digest(path), dump(path)
        with open(disk / "filler", "wb", buffering=0) as fh:  # fill the disk (unbuffered: nothing left to flush)
            try:
                while True:
                    fh.write(b"\0" * 65536)
            except OSError:
                pass
        big = "lorem ipsum " * 1500
        for args in (["lesson", "add", "more", "--trigger", "t", "--action", big],
                     ["context", "save", "--project", "/p", "--notes", big]):
            err = one_line_error(cli(*args, "--db", str(path)), code=1)  # not bad input: a failure it explains
            assert "disk is full" in err and str(path) in err
        assert (hook(path).returncode, hook(path).stdout) == (0, b"")
        assert digest(path) == before
        (disk / "filler").unlink()
        assert dump(path) == rows


@pytest.mark.parametrize("kind", ["directory", "foreign", "truncated", "not sqlite", "newer"])
def test_unusable_files_are_refused_untouched_and_the_hook_is_silent(lessons_db, tmp_path, kind):
    target = tmp_path / f"{kind.replace(' ', '-')}.db"
    if kind == "directory":
        target.mkdir()
    elif kind == "foreign":
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE invoices (id INTEGER)")
        conn.commit()
        conn.close()
    elif kind == "truncated":
        target.write_bytes(lessons_db.read_bytes()[:5000])
    elif kind == "not sqlite":
        target.write_text("just some notes\n")
    else:
        shutil.copy(lessons_db, target)
        conn = sqlite3.connect(target)
        conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('mgcp', '9999_future', 'x')")
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    before = digest(target)
    for args in (["lesson", "show", "keep-me"], ["lesson", "add", "x", "--trigger", "t", "--action", "Do the safe thing."]):
        err = one_line_error(cli(*args, "--db", str(target)))
        assert str(target) in err or kind in ("foreign", "newer"), err
    result = hook(target)
    assert (result.returncode, result.stdout) == (0, b"")
    assert digest(target) == before


# -- REM: three --auto runs at once ------------------------------------------------------------------

def test_auto_reports_a_finding_another_process_settled(db, run):
    """The finding list is read, then another process answers one of them: --auto skips it and says
    so, and succeeds."""
    from mgcp import engine
    from mgcp.config import load_config
    from mgcp.engine.actions import apply_auto

    async def seed(store):
        await store.lessons.add("verify-method", "calling a method on an unfamiliar library object",
                                "Before calling any method, verify it exists in the library docs or source")
        await store.lessons.add("check-method", "calling a method on an unfamiliar library object",
                                "Before calling any method, verify that it exists in the library docs or source")
        await engine.run(store, load_config(), "/p", ["duplicate_detection"])
        return await engine.pending_findings(store, "/p")

    findings = run(db, seed)
    assert findings

    async def race(store):
        await engine.resolve(store, load_config(), findings[0].id, findings[0].recommended, project_path="/p")
        return await apply_auto(store, load_config(), "/p", findings)

    applied, left, settled = run(db, race)
    assert [s.id for s in settled] == [findings[0].id] and "already applied" in settled[0].result
    assert findings[0].id not in [a.id for a in applied + left]


def test_three_concurrent_auto_runs_apply_each_finding_once(tmp_path):
    demo = subprocess.run([sys.executable, "-m", "mgcp", "demo"], cwd=tmp_path, capture_output=True, timeout=300)
    assert demo.returncode == 0, demo.stderr
    path = tmp_path / "mgcp-demo.db"
    procs = [subprocess.Popen([sys.executable, "-m", "mgcp", "rem", "run", "--auto", "--json", "--db", str(path),
                               "--project", "/demo/harbor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(3)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e.decode() for _, e in outputs]
    applied = [a["id"] for out, _ in outputs for a in json.loads(out)["applied"]]
    assert applied and len(applied) == len(set(applied))
    conn = sqlite3.connect(path)
    per_finding = conn.execute("SELECT finding_id, count(*) FROM rem_actions WHERE undone_at IS NULL "
                               "AND finding_id IS NOT NULL GROUP BY finding_id HAVING count(*) > 1").fetchall()
    assert per_finding == []


# -- raw JSON-RPC to `mgcp serve` --------------------------------------------------------------------

class RawServer:
    """`mgcp serve` spoken to line by line, as a client that sends whatever it likes."""

    def __init__(self, db: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "mgcp", "serve", "--db", str(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).encode())
        assert self.reply()["id"] == 0
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, line: bytes) -> None:
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 30) -> dict:
        import selectors

        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout), "no reply: the client would wait for ever"
        return json.loads(self.proc.stdout.readline())

    def call(self, request_id: int, tool: bytes, arguments: bytes) -> bytes:
        return (b'{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "%s", "arguments": %s}}'
                % (request_id, tool, arguments))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


RAW_LINES = {
    "lone surrogate escape": (b'{"lesson_id": "x", "trigger": "\\ud800", "action": "a"}', -32602),
    "invalid UTF-8": (b'{"lesson_id": "x", "trigger": "\xff\xfe", "action": "a"}', -32602),
    "deep arguments": (b'{"lesson_id": "x", "trigger": ' + b"[" * 300 + b"]" * 300 + b', "action": "a"}', -32600),
}


def test_every_raw_request_gets_an_answer_and_the_server_goes_on(lessons_db):
    server = RawServer(lessons_db)
    try:
        for number, (arguments, code) in enumerate(RAW_LINES.values(), 1):
            server.send(server.call(number, b"add_lesson", arguments))
            answer = server.reply()
            assert (answer["id"], answer["error"]["code"]) == (number, code), answer
        for line in (b"not json at all", b"[" * 5000 + b"]" * 5000, b'{"jsonrpc": "2.0", "id": '):
            answer = server.reply() if server.send(line) is None else None
            assert answer["id"] is None and answer["error"]["code"] == -32700, answer
        server.send(server.call(50, b"add_lesson", b'{"lesson_id": "big", "trigger": "t", "action": "'
                                + b"a" * 10_000_000 + b'"}'))
        answer = server.reply()
        assert answer["id"] == 50 and answer["result"]["isError"] and "too long" in answer["result"]["content"][0]["text"]
        server.send(server.call(51, b"get_context_history", b'{"project_path": "/p", "limit": %d}' % 2**70))
        answer = server.reply()
        assert answer["id"] == 51 and answer["result"]["isError"]
        server.send(server.call(53, b"rem_undo", b'{"project_path": "/p", "run_id": %d}' % 2**70))
        answer = server.reply()
        assert answer["id"] == 53 and answer["result"]["isError"]
        server.send(server.call(54, b"add_lesson", b'{"lesson_id": "nul", "trigger": "when \\u0000", "action": "a safe action"}'))
        answer = server.reply()  # a command line cannot carry a NUL: refused as the CLI would
        assert answer["id"] == 54 and answer["result"]["isError"] and "NUL" in answer["result"]["content"][0]["text"]
        server.send(server.call(52, b"add_lesson", b'{"lesson_id": "fine", "trigger": "when \\u00e9 \\u001b", "action": "a safe action"}'))
        answer = server.reply()
        assert answer["id"] == 52 and not answer["result"]["isError"], answer
    finally:
        server.close()
    rows = sqlite3.connect(lessons_db).execute("SELECT id, trigger FROM lessons ORDER BY id").fetchall()
    assert rows == [("fine", "when \u00e9 \u001b"), ("keep-me", "when x")]


def test_a_tool_given_text_that_is_not_unicode_refuses_it():
    import asyncio

    from mgcp.surfaces.mcp_server import guarded

    async def tool(trigger: str, tags: list[str]):
        raise AssertionError("must not run")

    result = asyncio.run(guarded(tool)(trigger="fine", tags=["ok", "bad \udc80"]))
    assert result.is_error and "tags is not valid text" in result.content[0].text


def test_a_finding_answered_elsewhere_is_not_marked_stale_by_a_review_that_read_it_before(db, run):
    """Found by the chaos suite: a review read an orphan finding as pending, another process linked
    the orphan by applying it, and the review then saw a linked orphan and overwrote "applied" with
    "stale" (the action stayed live)."""
    from mgcp import engine
    from mgcp.config import load_config
    from mgcp.engine import review
    from mgcp.models import FindingMark

    async def scenario(store):
        for n, words in enumerate(["webhook retry backoff", "webhook signature verify", "webhook dead letter queue",
                                   "webhook timeout background job"]):
            await store.lessons.add(f"hook-{n}", f"handling {words}", f"Do the {words} thing", tags=["webhooks"])
        await store.lessons.add("lonely", "handling webhook retry backoff signature", "Do the webhook retry",
                                tags=["webhooks"])
        await engine.run(store, load_config(), "/p", ["community_detection"])
        seen = await engine.pending_findings(store, "/p")
        orphan = next(f for f in seen if f.kind in ("orphan", "unlinked_cluster"))  # as the Louvain groups them
        await engine.resolve(store, load_config(), orphan.id, orphan.recommended, project_path="/p")
        # the other process's review, with what it read before
        await review._still_speaking(store, [FindingMark.of(f) for f in seen])
        return (await store.rem.get_finding(orphan.id)).status.value

    assert run(db, scenario) == "applied"
