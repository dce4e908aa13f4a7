"""Ctrl-C: a run stops at once, even inside an operation's worker thread, and the CLI says so."""

import asyncio
import json
import subprocess
import sys
import threading
import time

from clihelp import mgcp
from mgcp import engine
from mgcp.config import parse_config
from mgcp.operations import duplicate_detection
from mgcp.operations.shared import Interrupted
from mgcp.persistence.store import Store


def test_an_interrupted_run_stops_its_operation_at_the_next_tick(db, monkeypatch):
    started, seen = threading.Event(), {}

    def endless(lessons, settings, backend=None, cache=None, settled=frozenset(), search=None):
        started.set()
        t0 = time.perf_counter()
        try:
            while time.perf_counter() - t0 < 20:  # an operation far longer than the test waits
                cache.tick(1, 2)
                time.sleep(0.001)
            seen["ended"] = "ran out"
        except BaseException as exc:
            seen["ended"] = type(exc)
            raise
        finally:
            seen["after"] = time.perf_counter() - t0

    monkeypatch.setattr(duplicate_detection, "run", endless)

    async def main():
        async with Store.open(db) as store:
            await store.lessons.add("a", "when a thing happens", "Do the first thing properly")
            task = asyncio.create_task(engine.run_cycle(store, parse_config({}, "t"), "/p", ["duplicate_detection"]))
            await asyncio.to_thread(started.wait, 10)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                return "cancelled"

    t0 = time.perf_counter()
    assert asyncio.run(main()) == "cancelled"
    assert seen["ended"] is Interrupted and time.perf_counter() - t0 < 15


class _CtrlC:
    """A terminal whose user presses Ctrl-C at the first prompt."""

    def readline(self, *args):
        raise KeyboardInterrupt

    read = readline

    def isatty(self):
        return False


SAID = ("what was written before is kept, even a change that finished as you interrupted (look, e.g. "
        "`mgcp rem report`, before repeating it); nothing was applied half-way")


def test_ctrl_c_in_review_exits_130_with_a_message_and_applies_nothing(db):
    for lesson_id, each in (("one", "every"), ("two", "each")):
        assert mgcp("lesson", "add", lesson_id, "--trigger", "when the pool runs dry",
                    "--action", f"Raise the connection pool size and add a timeout to {each} call", "--db", db)[0] == 0
    assert mgcp("rem", "run", "--op", "duplicate_detection", "--project", "/p", "--db", db)[0] == 0
    code, out, err = mgcp("rem", "review", "--project", "/p", "--db", db, stdin=_CtrlC())
    assert code == 130 and err.strip().endswith(f"Interrupted; {SAID}."), err
    code, out, _ = mgcp("rem", "status", "--project", "/p", "--db", db, "--json")
    assert code == 0 and json.loads(out)["pending_findings"] == 1, out


def test_ctrl_c_under_json_says_so_as_json(db, monkeypatch):
    from mgcp.surfaces.cli import rem

    def pressed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rem, "with_store", pressed)
    code, out, err = mgcp("rem", "run", "--project", "/p", "--db", db, "--json")
    assert (code, out) == (130, "")
    assert json.loads(err) == {"error": f"interrupted; {SAID}", "exit_code": 130}


def test_a_run_that_never_finished_is_named_by_the_report(db):
    """A run killed mid-way keeps what its finished operations wrote: the report says it did not
    finish, instead of "no REM run yet" beside the findings it raised."""
    import sqlite3

    for lesson_id, each in (("one", "every"), ("two", "each")):
        assert mgcp("lesson", "add", lesson_id, "--trigger", "when the pool runs dry",
                    "--action", f"Raise the connection pool size and add a timeout to {each} call", "--db", db)[0] == 0
    assert mgcp("rem", "run", "--op", "duplicate_detection", "--project", "/p", "--db", db)[0] == 0
    conn = sqlite3.connect(db)
    conn.execute("UPDATE rem_runs SET finished_at = NULL")  # as a kill -9 before the run's last write leaves it
    conn.commit()
    conn.close()
    code, out, _ = mgcp("rem", "report", "--project", "/p", "--db", db)
    assert code == 0 and out.startswith("no REM run of this project finished yet\nrun 1 did not finish"), out
    assert "1 finding(s) waiting for review" in out
    code, out, _ = mgcp("rem", "report", "--project", "/p", "--db", db, "--json")
    assert json.loads(out)["unfinished_run"] == 1


def test_a_ctrl_c_once_the_command_finished_is_ignored_while_the_process_ends():
    """Else an interrupt while the interpreter joins its threads ends the process by the signal,
    and a script reads "interrupted" for a command that finished."""
    child = ("import atexit, signal, sys\n"
             "atexit.register(lambda: print('ignored' if signal.getsignal(signal.SIGINT) == signal.SIG_IGN "
             "else 'handled', file=sys.stderr))\n"
             "sys.argv = ['mgcp', '--version']\n"
             "from mgcp.surfaces.cli import command\n"
             "command()\n")
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (0, "ignored\n"), result
