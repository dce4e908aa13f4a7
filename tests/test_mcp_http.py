"""`mgcp serve --http`: one server, one database, agents on several machines, driven by the official
MCP client over streamable HTTP (`mcp.client.streamable_http.streamable_http_client`).

Each "machine" is a process of its own with its own temporary home and data directory, so nothing
but the server connects them.
"""

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time

import httpx2
import pytest

from conftest import ROOT

TOKEN = "team-token-0123456789abcdef"

CLIENT = """
import json, sys
import anyio, httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, NAME, COUNT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


async def main():
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with streamable_http_client(URL, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()

                async def call(tool, **arguments):
                    result = await session.call_tool(tool, arguments)
                    assert not result.is_error, result.content[0].text
                    return result.structured_content

                for i in range(COUNT):
                    await call("add_lesson", lesson_id=f"{NAME}-{i}", trigger=f"{NAME} situation {i}",
                               action=f"{NAME} does {i}", tags=[NAME])
                    await call("refine_lesson", lesson_id="team-rule", reason=f"{NAME} refinement {i}",
                               action=f"{NAME} wording {i}")
                print(json.dumps(await call("get_lesson_history", lesson_id="team-rule", limit=1000)))

anyio.run(main)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db, port: int, env: dict, *args: str) -> subprocess.Popen:
    """`mgcp serve --http` on `port` with `args`, once it accepts connections."""
    proc = subprocess.Popen([sys.executable, "-m", "mgcp", "serve", "--http", "--port", str(port), "--db", str(db),
                             *args], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)


@pytest.fixture
def server(tmp_path):
    db, port = tmp_path / "team.db", free_port()
    env = {**os.environ, "MGCP_TOKEN": TOKEN, "PYTHONPATH": str(ROOT), "MGCP_DATA_DIR": str(tmp_path / "srv")}
    proc = start_server(db, port, env, "--host", "0.0.0.0")
    yield f"http://127.0.0.1:{port}/mcp", db
    proc.terminate()
    proc.wait(timeout=30)


def machine(tmp_path, name: str, url: str, token: str, count: int) -> subprocess.Popen:
    home = tmp_path / f"home-{name}"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "MGCP_DATA_DIR": str(home / ".mgcp"), "PYTHONPATH": str(ROOT)}
    env.pop("MGCP_DB", None)
    return subprocess.Popen([sys.executable, "-c", CLIENT, url, token, name, str(count)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home)


def test_two_machines_add_and_refine_at_once_and_nothing_is_lost(server, tmp_path):
    url, db = server
    first = subprocess.run([sys.executable, "-m", "mgcp", "lesson", "add", "team-rule", "--trigger", "team rule",
                            "--action", "the first wording", "--db", str(db)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    count = 12
    alice, bob = machine(tmp_path, "alice", url, TOKEN, count), machine(tmp_path, "bob", url, TOKEN, count)
    results = [p.communicate(timeout=240) for p in (alice, bob)]
    assert [p.returncode for p in (alice, bob)] == [0, 0], [err for _, err in results]

    conn = sqlite3.connect(db)
    try:
        ids = {r[0] for r in conn.execute("SELECT id FROM lessons")}
        reasons = [r[0] for r in conn.execute(
            "SELECT refinement_reason FROM lesson_versions WHERE lesson_id = 'team-rule' ORDER BY version")]
        versions = [r[0] for r in conn.execute(
            "SELECT version FROM lesson_versions WHERE lesson_id = 'team-rule' ORDER BY version")]
    finally:
        conn.close()
    assert ids == {"team-rule"} | {f"{who}-{i}" for who in ("alice", "bob") for i in range(count)}
    assert versions == list(range(1, 2 * count + 2))
    assert sorted(r for r in reasons if r) == sorted(f"{who} refinement {i}" for who in ("alice", "bob")
                                                     for i in range(count))
    # each machine saw the whole history through the server, and neither wrote to a local database
    history = json.loads(results[1][0])
    assert len(history["versions"]) == history["total"] >= count + 1
    assert not (tmp_path / "home-alice" / ".mgcp" / "lessons.db").exists()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}])
def test_a_request_without_the_token_is_refused(server, headers):
    url, db = server
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "intruder", "version": "1"}}}
    with httpx2.Client() as http:
        response = http.post(url, json=request, headers={**headers, "Accept": "application/json, text/event-stream"})
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")


def test_the_official_client_without_the_token_cannot_connect(server, tmp_path):
    url, db = server
    intruder = machine(tmp_path, "mallory", url, "", 1)
    _, err = intruder.communicate(timeout=60)
    assert intruder.returncode != 0 and "Server returned an error response" in err
    assert not db.exists()  # no tool call reached the database


def test_a_non_loopback_bind_without_a_token_does_not_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MGCP_TOKEN"}
    result = subprocess.run([sys.executable, "-m", "mgcp", "serve", "--http", "--host", "0.0.0.0", "--port",
                             str(free_port()), "--db", str(tmp_path / "x.db")], capture_output=True, text=True,
                            env={**env, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert result.returncode == 2 and "needs a bearer token" in result.stderr and not (tmp_path / "x.db").exists()


def hook(tmp_path, name: str, payload: dict, **env) -> subprocess.CompletedProcess:
    """The installed SessionStart hook on a machine of its own (its own home, no local database)."""
    home = tmp_path / name
    return subprocess.run([sys.executable, "-c", "import sys; from mgcp.surfaces.hook_entry import main; sys.exit(main())"],
                          input=json.dumps(payload),
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home),
                               "MGCP_DATA_DIR": str(home / ".mgcp"), **env})


def test_the_hook_of_a_machine_pointed_at_the_server_speaks_of_the_team_database(server, tmp_path):
    url, db = server
    saved = subprocess.run([sys.executable, "-m", "mgcp", "context", "save", "--project", "/projects/shop", "--notes",
                            "Checkout retries are idempotent now", "--db", str(db)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "MGCP_DATA_DIR": str(tmp_path / "srv")})
    assert saved.returncode == 0, saved.stderr
    start = {"session_id": "alice-1", "cwd": "/projects/shop", "source": "startup", "hook_event_name": "SessionStart"}
    done = hook(tmp_path, "alice", start, MGCP_SERVER=url, MGCP_TOKEN=TOKEN)
    assert (done.returncode, done.stderr) == (0, "")
    sessions = sqlite3.connect(db).execute(
        "SELECT s.session_id FROM project_sessions s JOIN project_contexts p ON p.project_id = s.project_id "
        "WHERE p.project_path = '/projects/shop'").fetchall()
    assert sessions == [("alice-1",)]  # registered in the team's database
    assert not (tmp_path / "alice" / ".mgcp" / "lessons.db").exists()  # and nowhere else
    reminder = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Checkout retries are idempotent now" in reminder  # the team's project state
    assert "`mgcp rem" not in reminder  # the CLI on this machine reads another database
    # the base URL works as well as the /mcp one; a wrong token or no server: nothing shown, exit 0, logged
    assert hook(tmp_path, "bob", {**start, "session_id": "bob-1"}, MGCP_SERVER=url.removesuffix("/mcp"),
                MGCP_TOKEN=TOKEN).stdout
    for name, env in (("eve", {"MGCP_SERVER": url, "MGCP_TOKEN": "wrong"}),
                      ("carol", {"MGCP_SERVER": f"http://127.0.0.1:{free_port()}"})):
        done = hook(tmp_path, name, {**start, "session_id": f"{name}-1"}, **env)
        assert (done.returncode, done.stdout) == (0, "")
        assert "failed open" in (tmp_path / name / ".mgcp" / "hook.log").read_text()
    assert len(sqlite3.connect(db).execute("SELECT * FROM project_sessions").fetchall()) == 2


def test_the_hook_route_of_a_server_on_this_machine_refuses_other_hosts_origins_and_non_json(tmp_path):
    """Without a token a server binds to this machine only; its /hook route then gets the SDK's
    DNS-rebinding checks, so a web page cannot make it register sessions or read the recall."""
    import httpx2

    db, port = tmp_path / "own.db", free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MGCP_DATA_DIR": str(tmp_path / "srv")}
    env.pop("MGCP_TOKEN", None)
    proc = start_server(db, port, env)
    try:
        url = f"http://127.0.0.1:{port}/hook"
        body = json.dumps({"session_id": "page-1", "cwd": "/projects/shop", "source": "startup"})
        json_type = {"Content-Type": "application/json"}
        for headers, status in (({**json_type, "Host": f"evil.example:{port}"}, 421),
                                ({**json_type, "Origin": "http://evil.example"}, 403),
                                ({"Content-Type": "text/plain"}, 400)):
            assert httpx2.post(url, content=body, headers=headers).status_code == status
        assert httpx2.post(url, content="x" * 70_000, headers=json_type).status_code == 413
        assert not db.exists()  # nothing refused reached the database: it is not even created
        answer = httpx2.post(url, content=body, headers=json_type)
        assert answer.status_code == 200 and "reminder" in answer.json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_server_that_does_not_answer_holds_the_hook_two_seconds_at_most(tmp_path):
    """A server that accepts the connection and then says nothing: the session starts after the
    hook's REMOTE_TIMEOUT_S, with nothing shown and a line in the hook log."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        start = {"session_id": "s-1", "cwd": "/projects/shop", "source": "startup"}
        done = hook(tmp_path, "dave", start, MGCP_SERVER=f"http://127.0.0.1:{silent.getsockname()[1]}")
    assert (done.returncode, done.stdout) == (0, "")
    assert "did not answer within 2 s" in (tmp_path / "dave" / ".mgcp" / "hook.log").read_text()
