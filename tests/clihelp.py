"""Run the real `mgcp` entry point in-process: (exit code, stdout, stderr); or as a process of its own."""

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

from mgcp.surfaces.cli import main


def mgcp(*args, stdin="") -> tuple[int, str, str]:
    """`stdin`: the text to read, or a file-like object (e.g. one that answers what it is shown)."""
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_stdin = sys.argv, sys.stdin
    sys.argv, sys.stdin = ["mgcp", *map(str, args)], io.StringIO(stdin) if isinstance(stdin, str) else stdin
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv, sys.stdin = old_argv, old_stdin
    return code, out.getvalue(), err.getvalue()


def process_cli(db, config):
    """A runner of `mgcp ARGS --db DB --config CONFIG` as a process of its own: ARGS -> its
    `subprocess.CompletedProcess` (text)."""
    def run(*args) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mgcp", *map(str, args), "--db", str(db), "--config", str(config)],
                              capture_output=True, text=True)

    return run
