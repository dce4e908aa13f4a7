"""The hook a project commits survives a teammate's machine: `mgcp init` in one virtualenv, that
virtualenv removed, mgcp installed into another one elsewhere, and Claude Code's command from the
committed settings still runs the hook.

With MGCP_CLAUDE_BIN naming a Claude Code CLI, the same runs under the real program (offline: the
Messages API is a local stub that refuses every request; the hook runs before the first request).

Each virtualenv gets the wheel built from this checkout (pip, no dependencies) and reaches the
dependencies through a .pth line naming the running environment's site-packages, so nothing is
downloaded. Claude Code runs a hook's command through a shell with the user's PATH; so does this test.
"""

import http.server
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import threading
import uuid
from pathlib import Path

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(ROOT)], check=True)
    return next(out.glob("mgcp-*.whl"))


def make_venv(where: Path, wheel: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
                   check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(site) / "zz_mgcp_test_deps.pth").write_text("".join(d + "\n" for d in sorted(deps)))
    return where / "bin"


def session_start(command: str, project: Path, bin_dir: Path, db: Path) -> subprocess.CompletedProcess:
    session = str(uuid.uuid4())
    stdin = json.dumps({"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": str(project),
                        "hook_event_name": "SessionStart", "source": "startup"})
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(project.parent), "MGCP_DB": str(db)}
    return subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True, text=True, env=env,
                          cwd=project, timeout=120)


def sessions_of(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT count(*) FROM project_sessions").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.skipif(os.name == "nt", reason="POSIX virtualenv layout")
def test_a_committed_hook_runs_after_the_venv_that_installed_it_is_gone(wheel, tmp_path):
    project, db = tmp_path / "shop", tmp_path / "lessons.db"
    project.mkdir()
    first = make_venv(tmp_path / "alice-venv", wheel)
    init = subprocess.run([str(first / "mgcp"), "init", "--project", str(project), "--json"],
                          capture_output=True, text=True, env={**os.environ, "HOME": str(tmp_path)})
    assert init.returncode == 0, init.stderr
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command == "mgcp-hook || true" and str(tmp_path) not in json.dumps(settings)

    ran = session_start(command, project, first, db)
    assert (ran.returncode, ran.stderr) == (0, "") and sessions_of(db) == 1

    # What the old absolute entry would run on this machine from now on (and on any other); the
    # portable one, with mgcp nowhere on PATH, starts the session as if there were no hook.
    old = f'"{first}/python" "{first.parent}/lib/mgcp/hooks/rem-cycle-trigger.py"'
    shutil.rmtree(first.parent)
    assert session_start(old, project, first, db).returncode == 127
    missing = session_start(command, project, first, db)
    assert (missing.returncode, missing.stdout) == (0, "") and sessions_of(db) == 1

    second = make_venv(tmp_path / "elsewhere" / "bob-venv", wheel)
    ran = session_start(command, project, second, db)
    assert (ran.returncode, ran.stderr) == (0, "") and sessions_of(db) == 2

    # mgcp init from the new installation finds nothing to change.
    again = subprocess.run([str(second / "mgcp"), "init", "--project", str(project), "--json"],
                           capture_output=True, text=True, env={**os.environ, "HOME": str(tmp_path)})
    assert json.loads(again.stdout)["changed"] is False


@pytest.mark.skipif(os.name == "nt", reason="POSIX virtualenv layout")
def test_the_hook_fails_open_when_its_installation_is_broken(wheel, tmp_path):
    bin_dir = make_venv(tmp_path / "venv", wheel)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    (site / "zz_mgcp_test_deps.pth").unlink()  # the dependencies are gone: pydantic, yaml, ...
    shutil.rmtree(site / "mgcp" / "persistence")  # and so is part of mgcp itself
    project = tmp_path / "p"
    project.mkdir()
    ran = session_start("mgcp-hook", project, bin_dir, tmp_path / "l.db")
    assert ran.returncode == 0 and ran.stdout == "" and "mgcp-hook: mgcp unavailable" in ran.stderr


CLAUDE = os.environ.get("MGCP_CLAUDE_BIN")  # e.g. node_modules/.bin/claude from `npm install @anthropic-ai/claude-code`


class StubMessages(http.server.BaseHTTPRequestHandler):
    """The Messages API, refusing every request (Claude Code runs its SessionStart hooks first)."""

    bodies: list[str] = []

    def do_POST(self):
        self.bodies.append(self.rfile.read(int(self.headers.get("content-length", 0))).decode("utf-8", "replace"))
        out = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "stub"}}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.mark.skipif(not CLAUDE, reason="set MGCP_CLAUDE_BIN to a Claude Code CLI to run it for real")
def test_real_claude_code_runs_the_committed_hook_and_server_from_another_venv(wheel, tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), StubMessages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    project, home, db = tmp_path / "shop", tmp_path / "home", tmp_path / "lessons.db"
    project.mkdir()
    home.mkdir()
    first = make_venv(tmp_path / "alice-venv", wheel)
    subprocess.run([str(first / "mgcp"), "init", "--project", str(project), "--mcp"], check=True, capture_output=True)
    (home / "settings.json").write_text('{"enableAllProjectMcpServers": true}')  # what approving it once does
    shutil.rmtree(first.parent)
    second = make_venv(tmp_path / "elsewhere" / "bob-venv", wheel)
    for n in (1, 2):  # a duplicate, so that the hook has a reminder to give
        subprocess.run([str(second / "mgcp"), "lesson", "add", f"wal-{n}", "--trigger", "sqlite from several processes",
                        "--action", "Use WAL mode and a busy timeout", "--db", str(db)], check=True, capture_output=True)
    subprocess.run([str(second / "mgcp"), "rem", "run", "--project", str(project), "--op", "duplicate_detection",
                    "--db", str(db)], check=True, capture_output=True)
    env = {"PATH": f"{second}:/usr/bin:/bin", "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home), "MGCP_DB": str(db),
           "ANTHROPIC_API_KEY": "sk-ant-fake", "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_port}",
           "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0"}
    try:
        result = subprocess.run([CLAUDE, "-p", "hello", "--output-format", "stream-json", "--verbose"], cwd=project,
                                env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
    finally:
        server.shutdown()
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    hooks = [e for e in events if e.get("subtype") == "hook_response" and e.get("hook_event") == "SessionStart"]
    assert hooks and all((h["exit_code"], h["outcome"]) == (0, "success") for h in hooks), hooks
    assert sessions_of(db) == 1
    assert any("1 REM finding awaits review" in body for body in StubMessages.bodies)
    # and the tool the reminder names is one the agent has: the MCP server from .mcp.json connected
    init = next(e for e in events if e.get("subtype") == "init")
    assert {"name": "mgcp", "status": "connected"} in init["mcp_servers"]
    assert any('"mcp__mgcp__rem_run"' in body for body in StubMessages.bodies)


def test_the_console_entry_imports_nothing_heavy(tmp_path):
    """`mgcp-hook` runs `mgcp.surfaces.hook_entry.main`: the same imports as the older script."""
    from test_hook import HEAVY, at_session, context, payload

    db = tmp_path / "l.db"
    subprocess.run([sys.executable, "-m", "mgcp", "db", "migrate", "--db", str(db)], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    at_session(db, 4)
    code = "import sys; from mgcp.surfaces.hook_entry import main; sys.exit(main())"
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", code], input=payload(), capture_output=True,
                            text=True, env={**os.environ, "MGCP_DB": str(db), "PYTHONPATH": str(ROOT)}, timeout=60)
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in result.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert result.returncode == 0 and "REM cycle due" in context(result.stdout)
    assert sorted(set(HEAVY) & imported) == []
