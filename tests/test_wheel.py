"""The wheel carries migrations/, hooks/ and rem-config.yaml, and works from an empty directory."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The project built as a wheel and unpacked into a directory of its own (dependencies come
    from the running environment)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(ROOT)], check=True)
    wheel = next(out.glob("mgcp-*.whl"))
    target = out / "site"
    zipfile.ZipFile(wheel).extractall(target)
    return wheel, target


def test_wheel_carries_migrations_hook_and_config(installed):
    names = zipfile.ZipFile(installed[0]).namelist()
    migrations = sorted(n for n in names if n.startswith("mgcp/migrations/") and n.endswith(".py"))
    assert [n.rsplit("/", 1)[1] for n in migrations] == sorted(p.name for p in (ROOT / "migrations").glob("0*.py"))
    assert "mgcp/hooks/rem-cycle-trigger.py" in names and "mgcp/rem-config.yaml" in names
    assert "mgcp/demo_data.yaml" in names


def run(target, cwd, *args, stdin=None):
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True)


def test_installed_copy_migrates_and_round_trips_a_lesson(installed, tmp_path):
    _, target = installed
    assert run(target, tmp_path, "-c", "import mgcp, sys; print(mgcp.__file__)").stdout.startswith(str(target))
    assert run(target, tmp_path, "-m", "mgcp", "db", "migrate", "--db", "x.db").returncode == 0
    add = run(target, tmp_path, "-m", "mgcp", "lesson", "add", "a1", "--trigger", "writing a migration",
              "--action", "Make it idempotent.", "--db", "x.db")
    assert add.returncode == 0, add.stderr
    shown = run(target, tmp_path, "-m", "mgcp", "lesson", "show", "a1", "--db", "x.db", "--json")
    assert json.loads(shown.stdout)["action"] == "Make it idempotent."


def test_installed_hook_runs_from_the_wheel_copy(installed, tmp_path):
    _, target = installed
    hook = target / "mgcp" / "hooks" / "rem-cycle-trigger.py"
    payload = json.dumps({"session_id": "s-1", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(tmp_path),
                          "hook_event_name": "SessionStart", "source": "startup"})
    env = {"MGCP_DB": str(tmp_path / "h.db")}
    result = subprocess.run([sys.executable, str(hook)], input=payload, capture_output=True, text=True,
                            env={**os.environ, **env, "PYTHONPATH": str(target)})
    assert result.returncode == 0 and result.stdout == ""
    status = run(target, tmp_path, "-m", "mgcp", "db", "status", "--db", str(tmp_path / "h.db"), "--json")
    assert json.loads(status.stdout)["tables"]["project_sessions"] == 1
