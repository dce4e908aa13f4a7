"""The chaos suite's short version (the full one: `python tests/chaos/run.py`; see tests/chaos/README.md):
eight writers on one database, kill -9 of each writer kind, three concurrent --auto runs; nothing
acknowledged lost, `mgcp db check` clean after every kill."""

import subprocess
import sys

from conftest import ROOT


def test_chaos_short(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "chaos" / "run.py"), "--short",
                             "--workdir", str(tmp_path / "chaos")], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    losses = next(line for line in result.stdout.splitlines() if line.startswith("losses and inconsistencies"))
    assert losses.split()[-1] == "0", result.stdout
