"""The README's tour runs as pasted: every indented block under "## A tour", in order, in one
shell, in an empty directory, with `mgcp` on PATH and nobody's real home."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT


def tour_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    tour = text[text.index("## A tour"):]
    tour = tour[:tour.index("\n## ", 1)]
    blocks, current = [], []
    for line in tour.splitlines():
        if line.startswith("    "):
            current.append(line[4:])
        elif current and line.strip():
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


def test_the_tour_has_the_commands_people_need():
    script = "\n".join(tour_blocks())
    for command in ("mgcp lesson link verify-api read-the-tests", "catalogue.json", "mgcp rem review",
                    "mgcp db backup", "mgcp export jsonl", "mgcp init --remove"):
        assert command in script


@pytest.mark.skipif(os.name == "nt", reason="the tour is shell")
def test_every_tour_block_runs_as_pasted_in_an_empty_directory(tmp_path):
    work, home, bin_dir = tmp_path / "work", tmp_path / "home", tmp_path / "bin"
    for folder in (work, home, bin_dir):
        folder.mkdir()
    (bin_dir / "mgcp").write_text(f"#!/bin/sh\nexec {sys.executable} -m mgcp \"$@\"\n")
    (bin_dir / "mgcp").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MGCP_")}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", HOME=str(home), PYTHONPATH=str(ROOT))
    # One shell for the whole tour (the first block exports MGCP_DB); it stops at the first failure.
    script = "set -e\n" + "\n".join(f"echo '>>> block {n}' >&2\n{block}" for n, block in enumerate(tour_blocks(), 1))
    result = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    failed_block = re.findall(r">>> block (\d+)", result.stderr)
    assert result.returncode == 0, f"tour block {failed_block[-1] if failed_block else '?'} failed:\n{result.stderr[-3000:]}"
    assert "Error:" not in result.stdout + result.stderr
    assert (work / "tour.db").exists() and not (home / ".mgcp" / "lessons.db").exists()
    assert (work / "knowledge.jsonl").exists() and (work / "tour-backup.db").exists()
    assert not (work / ".claude" / "settings.json").exists()  # the tour's last step uninstalls
