"""Run a script in fresh interpreters under different hash seeds, for determinism tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def outputs_under_hash_seeds(script: str, seeds=("1", "2", "3")) -> list:
    """The JSON each run of `script` prints, one per seed (PYTHONHASHSEED)."""
    outputs = []
    for seed in seeds:
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True,
                             cwd=ROOT).stdout
        outputs.append(json.loads(out))
    return outputs
