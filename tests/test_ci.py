"""docs/ci.md's workflow, run locally: the import, `rem run --auto` and export steps are read from
the workflow in the document and run in a shell as the runner would; the exported difference must
hold exactly the rows the applied actions recorded, plus the run's own record."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clihelp import mgcp
from conftest import ROOT
from mgcp.persistence.database import APPEND_ONLY
from mgcp.persistence.dump import TABLES

PROJECT = "/team/knowledge"
# What a REM run records about itself: rows no applied action wrote.
RUN_RECORD = {"rem_runs", "rem_state", "rem_findings", "rem_actions", "community_runs", "context_summaries"}
STEPS = ("Import the team's knowledge into a fresh database", "Apply what REM may apply on its own",
         "Export the result")


def workflow_steps() -> dict[str, dict]:
    text = (ROOT / "docs" / "ci.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    steps = yaml.safe_load(block)["jobs"]["rem"]["steps"]
    return {step["name"]: step for step in steps if "name" in step}


def keyed(text: str) -> dict[tuple, str]:
    """Each exported row by (table, its ordering key) -> its line."""
    rows = {}
    for line in text.splitlines()[1:-1]:
        item = json.loads(line)
        rows[(item["table"], *(item["row"][c] for c in TABLES[item["table"]]))] = line
    return rows


def seed(db: Path) -> None:
    lessons = [
        ("wal-a", "opening sqlite from several processes", "Use WAL mode and a busy timeout", "sqlite"),
        # the same rule again (an exact copy would be refused at add time: the same trigger, reworded)
        ("wal-b", "opening sqlite from several processes at once", "Use WAL mode and a busy timeout", "sqlite"),
        ("wal-c", "sqlite shared by workers", "Use WAL mode and a busy timeout", "sqlite"),
        ("retry-a", "calling a flaky HTTP API", "Retry with exponential backoff and jitter, at most five times", "http"),
        ("retry-b", "calling a flaky HTTP API",
         "Retry with exponential backoff and jitter, at most five times, and log each retry", "http"),
        ("pin-deps", "adding a Python dependency", "Pin its major version in pyproject.toml", "deps"),
    ]
    for lesson_id, trigger, action, tag in lessons:
        code, _, err = mgcp("lesson", "add", lesson_id, "--trigger", trigger, "--action", action, "--tag", tag,
                            "--db", db)
        assert code == 0, err
    mgcp("lesson", "refine", "pin-deps", "--action", "Pin its major version and commit the lock file",
         "--reason", "the lock file matters too", "--db", db)
    mgcp("context", "save", "--project", PROJECT, "--session-id", "s1", "--notes", "started", "--db", db)


def run_step(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.skipif(os.name == "nt", reason="the workflow's steps are bash")
def test_the_ci_round_trip_changes_exactly_what_the_applied_actions_recorded(tmp_path):
    repo = tmp_path / "repo"
    (repo / "knowledge").mkdir(parents=True)
    seed(tmp_path / "team.db")
    assert mgcp("export", "jsonl", "--db", tmp_path / "team.db", "--out", repo / "knowledge" / "mgcp.jsonl")[0] == 0
    before = (repo / "knowledge" / "mgcp.jsonl").read_text()

    steps = workflow_steps()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mgcp").write_text(f"#!/bin/sh\nexec {sys.executable} -m mgcp \"$@\"\n")
    (bin_dir / "mgcp").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "MGCP_DB": str(tmp_path / "runner" / "mgcp.db"), "MGCP_PROJECT": PROJECT,
           "GITHUB_OUTPUT": str(tmp_path / "github_output"), "MGCP_DATA_DIR": str(tmp_path / "data")}
    for name in STEPS:
        result = run_step(steps[name]["run"], repo, env)
        assert result.returncode == 0, f"{name}: {result.stderr}"

    outputs = (tmp_path / "github_output").read_text()
    run = json.loads((repo / "rem-run.json").read_text())
    assert run["applied"] and run["left_pending"] and "pending=yes" in outputs  # exit 3 was taken as success

    after = (repo / "knowledge" / "mgcp.jsonl").read_text()
    old, new = keyed(before), keyed(after)
    assert set(old) <= set(new)  # nothing is ever deleted
    changed = {key: json.loads(line)["row"] for key, line in new.items() if old.get(key) != line}
    knowledge = {key: row for key, row in changed.items() if key[0] not in RUN_RECORD}

    # The rows the applied actions recorded, as they left them (the last change of each row wins).
    recorded = {}
    actions = [row for key, row in changed.items() if key[0] == "rem_actions"]
    assert sorted(a["finding_id"] for a in actions if a["finding_id"]) == sorted(x["id"] for x in run["applied"])
    for action in actions:
        for change in json.loads(action["changes"]):
            row = change["after"]
            recorded[(change["table"], *(row[c] for c in TABLES[change["table"]]))] = row
    # every recorded row is in the diff (an append-only table's insert records only the row's key)
    assert all(changed.get(key) == row if key[0] not in APPEND_ONLY else {c: changed[key][c] for c in row} == row
               for key, row in recorded.items())
    assert knowledge == {key: row for key, row in recorded.items() if key[0] not in RUN_RECORD}  # and nothing else
    assert {key[0] for key in knowledge} >= {"lessons", "lesson_lifecycle"}  # a merge superseded a copy
