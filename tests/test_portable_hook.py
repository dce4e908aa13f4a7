"""The hook a project commits survives a teammate's machine: `mgcp init` in one virtualenv, that
virtualenv removed, mgcp installed into another one elsewhere, and Claude Code's command from the
committed settings still runs the hook.

Each virtualenv gets the wheel built from this checkout (pip, no dependencies) and reaches the
dependencies through a .pth line naming the running environment's site-packages, so nothing is
downloaded. Claude Code runs a hook's command through a shell with the user's PATH; so does this test.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
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
    assert command == "mgcp-hook" and str(tmp_path) not in json.dumps(settings)

    ran = session_start(command, project, first, db)
    assert (ran.returncode, ran.stderr) == (0, "") and sessions_of(db) == 1

    # What the old absolute entry would run on this machine from now on (and on any other).
    old = f'"{first}/python" "{first.parent}/lib/mgcp/hooks/rem-cycle-trigger.py"'
    shutil.rmtree(first.parent)
    assert session_start(old, project, first, db).returncode == 127

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
