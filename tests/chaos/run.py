"""mgcp's chaos suite: many writers on one database, kill -9 at random points, then proof that
nothing acknowledged was lost or altered. Run from the repository root, in the environment mgcp is
installed in:

    python tests/chaos/run.py                     # the full run (about 5 minutes on 2 cores)
    python tests/chaos/run.py --short             # what CI runs (tests/test_chaos.py), under a minute

It prints one table and exits 1 if anything was lost, altered or left inconsistent. Stages:

1. writers: eight processes at once on one database for --seconds: CLI adds, refines, context saves
   with new and with resumed session ids, the SessionStart hook, `rem run`, `rem run --auto`, and a
   library writer (the store in-process) that also answers findings. Every write that reported
   success is then looked up: lessons and versions with their exact text, saves in the history and
   replayed with `context at` for every session, hook sessions registered, runs recorded, answers
   and --auto applications applied once with a live action. Then `mgcp db check`.
2. kills: for each writer kind (refine, save, a REM run storing findings, --auto applying them, undo
   of a run, a migration of a legacy database) --kills times: start it, kill -9 at a random moment
   of its measured duration, `mgcp db check`, check what it acknowledged, restart it to completion.
3. three `rem run --auto` at once on the same findings: all succeed, each finding applied once.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

MGCP = [sys.executable, "-m", "mgcp"]
HOOK = [sys.executable, str(ROOT / "hooks" / "rem-cycle-trigger.py")]
# Text that must come back byte-exact: accents, emoji, a right-to-left mark, quotes, SQL and FTS syntax.
STARTUP = 0.5  # seconds before an `mgcp` command's first write (imports, opening the database)
ODD = "caf\u00e9 \U0001F600 \u200f'\"; DROP TABLE lessons; -- NEAR(a b) \"phrase\" *"

# -- the library writer and the kill targets run as `python -c` programs --------------------------

LIBRARY_WRITER = r"""
import asyncio, json, sys, time
from mgcp.config import load_config
from mgcp.persistence.store import Store
from mgcp import engine
from mgcp.errors import ConflictError, InvalidInputError

async def main(db, deadline, tag, odd):
    i = 0
    out = sys.stdout
    while time.time() < deadline:
        i += 1
        async with Store.open(db) as s:
            lid = f"lib-{tag}-{i}"
            await s.lessons.add(lid, f"when library write {i} {odd}", f"library action {i} {odd}")
            print(json.dumps({"kind": "lesson", "id": lid, "trigger": f"when library write {i} {odd}",
                              "action": f"library action {i} {odd}"}), file=out, flush=True)
            action = f"library refine {i} {odd}"
            await s.lessons.refine("shared-lib", f"round {i}", action=action)
            print(json.dumps({"kind": "version", "id": "shared-lib", "action": action}), file=out, flush=True)
            sid = f"lib-{tag}-{i // 3}"  # every session id is used three times: new, resumed, resumed
            notes = f"library notes {i} {odd}"
            snap = await s.context.save("/chaos/lib", sid, notes=notes)
            print(json.dumps({"kind": "save", "project": "/chaos/lib", "session": snap.session_number,
                              "notes": notes}), file=out, flush=True)
            pending = await engine.pending_findings(s, "/chaos/lib")
            if pending:
                f = pending[0]
                try:
                    await engine.resolve(s, load_config(), f.id, f.recommended, project_path="/chaos/lib")
                    print(json.dumps({"kind": "answer", "finding": f.id, "option": f.recommended}), file=out, flush=True)
                except (ConflictError, InvalidInputError):
                    pass  # answered meanwhile by --auto, or its subject changed: not acknowledged

asyncio.run(main(sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]))
"""

KILL_REFINE = r"""
import asyncio, sys
from mgcp.persistence.store import Store
async def main(db):
    async with Store.open(db) as s:
        i = 0
        while True:
            i += 1
            action = f"kill refine {sys.argv[2]} {i}"
            await s.lessons.refine("kill-target", f"round {i}", action=action)
            print(action, flush=True)
asyncio.run(main(sys.argv[1]))
"""

KILL_SAVE = r"""
import asyncio, sys
from mgcp.persistence.store import Store
async def main(db):
    async with Store.open(db) as s:
        i = 0
        while True:
            i += 1
            notes = f"kill save {sys.argv[2]} {i}"
            await s.context.save("/chaos/kill", f"kill-{sys.argv[2]}-{i // 2}", notes=notes,
                                 catalogue={"round": i, "files": [f"f{k}.py" for k in range(i % 7)]})
            print(notes, flush=True)
asyncio.run(main(sys.argv[1]))
"""


# -- helpers ----------------------------------------------------------------------------------------

def mgcp(*args: str, db: Path, stdin: bytes | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*MGCP, *args, "--db", str(db)], input=stdin, capture_output=True, timeout=timeout)


def db_check(db: Path) -> tuple[bool, str]:
    result = mgcp("db", "check", db=db)
    return result.returncode == 0, (result.stdout + result.stderr).decode("utf-8", "replace").strip()


class Tally:
    """What happened, for the table and the verdict."""

    def __init__(self):
        self.rows: list[tuple[str, str]] = []
        self.failures: list[str] = []

    def add(self, what: str, value) -> None:
        self.rows.append((what, str(value)))

    def fail(self, message: str) -> None:
        self.failures.append(message)
        print(f"FAIL: {message}", file=sys.stderr, flush=True)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.fail(message)


def build(path: Path, lessons: int, history: int) -> None:
    from synth import build_db

    build_db(path, lessons, history, seed=11)


# -- stage 1: eight writers -------------------------------------------------------------------------

class Writers:
    def __init__(self, db: Path, seconds: float, tally: Tally, rng: random.Random):
        self.db, self.seconds, self.tally, self.rng = db, seconds, tally, rng
        self.acks: list[dict] = []
        self.lock = threading.Lock()
        self.counts: dict[str, list[int]] = {}  # writer -> [attempts, acknowledged]
        self.auto_applied = 0  # findings the --auto writer applied (each checked as an answer)
        self.hook_log = db.parent / "hook.log"

    def ack(self, writer: str, record: dict | None) -> None:
        with self.lock:
            counts = self.counts.setdefault(writer, [0, 0])
            counts[0] += 1
            if record is not None:
                counts[1] += 1
                self.acks.append(record)

    def run(self) -> None:
        setup = mgcp("lesson", "add", "shared-cli", "--trigger", "when many writers refine one lesson",
                     "--action", "start with this", db=self.db)
        assert setup.returncode == 0, setup.stderr
        assert mgcp("lesson", "add", "shared-lib", "--trigger", "when the library refines one lesson",
                    "--action", "start with this", db=self.db).returncode == 0
        deadline = time.time() + self.seconds
        threads = [threading.Thread(target=fn, args=(deadline,), name=fn.__name__) for fn in
                   (self.cli_add, self.cli_refine, self.cli_save_new, self.cli_save_resumed, self.hook,
                    self.rem_run, self.rem_auto)]
        library = subprocess.Popen([sys.executable, "-c", LIBRARY_WRITER, str(self.db), str(deadline), "w", ODD],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started = time.time()
        for t in threads:
            t.start()
        out, err = library.communicate(timeout=self.seconds + 300)
        for t in threads:
            t.join()
        self.duration = time.time() - started
        self.tally.check(library.returncode == 0, f"library writer failed: {err.decode()[-500:]}")
        for line in out.decode().splitlines():
            self.ack("library", json.loads(line))

    def _cli(self, writer: str, args: list[str], record, stdin: bytes | None = None):
        result = mgcp(*args, db=self.db, stdin=stdin)
        if result.returncode != 0:  # every command a writer sends is valid: any failure is one
            self.tally.fail(f"{writer}: exit {result.returncode}: {result.stderr.decode('utf-8', 'replace')[-400:]}")
            self.ack(writer, None)
            return None
        acked = record(result.stdout) if callable(record) else record
        self.ack(writer, acked)
        return result

    def cli_add(self, deadline):
        i = 0
        while time.time() < deadline:
            i += 1
            lid, trigger, action = f"cli-{i}", f"when cli writer {i} {ODD}", f"cli action {i}\n{ODD}"
            self._cli("cli add", ["lesson", "add", lid, "--trigger", trigger, "--action", action, "--tag", "chaos"],
                      {"kind": "lesson", "id": lid, "trigger": trigger, "action": action})

    def cli_refine(self, deadline):
        i = 0
        while time.time() < deadline:
            i += 1
            action = f"cli refine {i} {ODD}"
            self._cli("cli refine", ["lesson", "refine", "shared-cli", "--reason", f"round {i}", "--action", action],
                      {"kind": "version", "id": "shared-cli", "action": action})

    def _save(self, writer: str, project: str, session_id: str, notes: str, extra: list[str]):
        def record(stdout):
            snapshot = json.loads(stdout)["snapshot"]
            return {"kind": "save", "project": project, "session": snapshot["session_number"], "notes": notes}
        self._cli(writer, ["context", "save", "--project", project, "--session-id", session_id, "--notes", notes,
                           "--json", *extra], record)

    def cli_save_new(self, deadline):
        i = 0
        while time.time() < deadline:
            i += 1
            self._save("cli save (new ids)", "/chaos/a", f"a-{i}", f"notes a {i} {ODD}", ["--todo", f"todo {i % 5}"])

    def cli_save_resumed(self, deadline):
        i = 0
        while time.time() < deadline:
            i += 1
            self._save("cli save (resumed ids)", "/chaos/b", f"b-{i // 3}", f"notes b {i}",
                       ["--decision", f"decision {i}"])

    def hook(self, deadline):
        i = 0
        env = {**os.environ, "MGCP_DB": str(self.db), "MGCP_DATA_DIR": str(self.db.parent)}
        while time.time() < deadline:
            i += 1
            project = self.rng.choice(["/chaos/a", "/chaos/b", "/chaos/lib"])
            source = self.rng.choice(["startup", "startup", "resume", "clear"])
            session_id = f"hook-{i if source != 'resume' else max(1, i - 1)}"
            payload = json.dumps({"session_id": session_id, "cwd": project, "source": source}).encode()
            result = subprocess.run(HOOK, input=payload, capture_output=True, env=env, timeout=60)
            ok = result.returncode == 0 and (not result.stdout or json.loads(result.stdout))
            # The hook fails open: a failure is a line in its log naming the session.
            logged = self.hook_log.is_file() and f"session_id={session_id!r}" in self.hook_log.read_text()
            self.tally.check(ok and not logged, f"hook for {session_id}: exit {result.returncode}"
                             + (", failed (see the hook log)" if logged else ""))
            self.ack("hook", {"kind": "session", "project": project, "session_id": session_id}
                     if ok and not logged else None)

    def rem_run(self, deadline):
        while time.time() < deadline:
            def record(stdout):
                return {"kind": "run", "run_id": json.loads(stdout)["report"]["run_id"]}
            self._cli("rem run", ["rem", "run", "--project", "/chaos/lib", "--op", "duplicate_detection",
                                  "--op", "staleness_scan", "--op", "knowledge_extraction", "--json"], record)

    def rem_auto(self, deadline):
        while time.time() < deadline:
            result = self._cli("rem run --auto", ["rem", "run", "--auto", "--project", "/chaos/a", "--op",
                                                  "community_detection", "--op", "duplicate_detection", "--json"],
                               lambda stdout: {"kind": "run", "run_id": json.loads(stdout)["report"]["run_id"]})
            if result is not None:
                applied = [{"kind": "answer", "finding": a["id"]} for a in json.loads(result.stdout)["applied"]]
                with self.lock:
                    self.acks += applied
                    self.auto_applied += len(applied)

    # -- verification ------------------------------------------------------------------------------

    def verify(self) -> int:
        """Check every acknowledged write; returns how many were checked."""
        conn = sqlite3.connect(self.db)
        checked = 0
        answers: dict[str, int] = {}
        for ack in self.acks:
            kind = ack["kind"]
            if kind == "lesson":
                row = conn.execute("SELECT trigger, action FROM lessons WHERE id = ?", [ack["id"]]).fetchone()
                self.tally.check(row == (ack["trigger"], ack["action"]), f"lesson {ack['id']} lost or altered: {row!r}")
            elif kind == "version":
                n = conn.execute("SELECT count(*) FROM lesson_versions WHERE lesson_id = ? AND action = ?",
                                 [ack["id"], ack["action"]]).fetchone()[0]
                self.tally.check(n == 1, f"version {ack['action']!r} of {ack['id']} found {n} times")
            elif kind == "save":
                n = conn.execute("""SELECT count(*) FROM context_history h JOIN project_contexts p USING (project_id)
                                    WHERE p.project_path = ? AND h.notes = ? AND h.session_number = ?""",
                                 [ack["project"], ack["notes"], ack["session"]]).fetchone()[0]
                self.tally.check(n == 1, f"save {ack['notes']!r} of {ack['project']} found {n} times")
            elif kind == "session":
                n = conn.execute("""SELECT count(*) FROM project_sessions s JOIN project_contexts p USING (project_id)
                                    WHERE p.project_path = ? AND s.session_id = ?""",
                                 [ack["project"], ack["session_id"]]).fetchone()[0]
                self.tally.check(n == 1, f"hook session {ack['session_id']} of {ack['project']} not registered")
            elif kind == "run":
                n = conn.execute("SELECT count(*) FROM rem_runs WHERE id = ?", [ack["run_id"]]).fetchone()[0]
                self.tally.check(n == 1, f"REM run {ack['run_id']} not recorded")
            elif kind == "answer":
                answers[ack["finding"]] = answers.get(ack["finding"], 0) + 1
            checked += 1
        for finding, times in answers.items():
            status = conn.execute("SELECT status FROM rem_findings WHERE id = ?", [finding]).fetchone()
            live = conn.execute("SELECT count(*) FROM rem_actions WHERE finding_id = ? AND undone_at IS NULL",
                                [finding]).fetchone()[0]
            # An answer applies ("applied") or records a "keep" ("rejected"); either way one live action.
            self.tally.check(times == 1 and status in (("applied",), ("rejected",)) and live == 1,
                             f"finding {finding}: acknowledged {times} times, status {status}, {live} live actions")
        conn.close()
        checked += self.replay()
        return checked

    def replay(self) -> int:
        """`context at N` for every session of every project saved to: the notes of the last save
        acknowledged at or before N (each project has one saver, so acks are in time order)."""
        import asyncio

        from mgcp.errors import NotFoundError
        from mgcp.persistence.store import Store

        saves: dict[str, list[dict]] = {}
        for ack in self.acks:
            if ack["kind"] == "save":
                saves.setdefault(ack["project"], []).append(ack)

        async def main() -> int:
            n = 0
            async with Store.open(self.db, create=False) as store:
                for project, acks in saves.items():
                    current = (await store.context.get_project(project)).session_count
                    for session in range(1, current + 1):
                        before = [a for a in acks if a["session"] <= session]
                        try:
                            at = await store.context.at(project, session)
                            got = at.snapshot.notes
                        except NotFoundError:
                            got = None
                        want = before[-1]["notes"] if before else None
                        self.tally.check(got == want, f"context at {session} of {project}: {got!r}, expected {want!r}")
                        n += 1
            return n

        self.replayed = asyncio.run(main())
        return self.replayed


# -- stage 2: kill -9 -------------------------------------------------------------------------------

class Kills:
    def __init__(self, work: Path, kills: int, legacy_lessons: int, tally: Tally, rng: random.Random,
                 lessons: int, history: int):
        self.work, self.kills, self.legacy_lessons, self.tally, self.rng = work, kills, legacy_lessons, tally, rng
        self.lessons, self.history = lessons, history
        self.done: dict[str, int] = {}
        self.finished: dict[str, int] = {}  # kills that came after the process had already finished

    def fresh(self, name: str) -> Path:
        path = self.work / f"{name}.db"
        shutil.copy(self.base, path)
        return path

    def run(self) -> None:
        self.base = self.work / "kill-base.db"
        build(self.base, self.lessons, self.history)
        assert mgcp("lesson", "add", "kill-target", "--trigger", "when a writer is killed", "--action", "start with this",
                    db=self.base).returncode == 0
        self.loop_writer("refine", KILL_REFINE, "SELECT count(*) FROM lesson_versions WHERE action = ?")
        self.loop_writer("save", KILL_SAVE, "SELECT count(*) FROM context_history WHERE notes = ?")
        rem = ["rem", "run", "--project", "/chaos/kill", "--op", "duplicate_detection", "--op", "community_detection",
               "--op", "staleness_scan"]
        self.command("REM run storing findings", rem)
        self.command("--auto applying findings", [*rem, "--auto"])
        self.undo_run()
        self.migration()

    def killed(self, kind: str, db: Path, after: str) -> None:
        ok, report = db_check(db)
        self.tally.check(ok, f"db check after killing {kind} ({after}): {report[-600:]}")
        self.done[kind] = self.done.get(kind, 0) + 1

    def loop_writer(self, kind: str, program: str, lookup: str) -> None:
        """A process that writes in a loop, acknowledging each write on stdout, killed at random."""
        db = self.fresh(kind)
        for k in range(self.kills):
            proc = subprocess.Popen([sys.executable, "-c", program, str(db), str(k)], stdout=subprocess.PIPE)
            time.sleep(self.rng.uniform(1.0, 2.5))  # past start-up (about 0.5 s), into the writes
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate()
            acked = out.decode().splitlines()
            conn = sqlite3.connect(db)
            lost = [a for a in acked if conn.execute(lookup, [a]).fetchone()[0] != 1]
            conn.close()
            self.tally.check(not lost and acked, f"kill {kind}: {len(lost)} of {len(acked)} acknowledged writes lost")
            self.killed(kind, db, f"after {len(acked)} writes")
            self.acked = getattr(self, "acked", 0) + len(acked)

    def moment(self, duration: float) -> float:
        """When to kill a command that takes `duration` uninterrupted: past Python's start-up (about
        STARTUP s, when nothing is written yet) where the command runs longer than that."""
        return self.rng.uniform(min(STARTUP, duration / 2), duration)

    def _duration(self, args: list[str], db: Path) -> float:
        t0 = time.perf_counter()
        result = mgcp(*args, db=db)
        assert result.returncode == 0, result.stderr
        return time.perf_counter() - t0

    def command(self, kind: str, args: list[str], db: Path | None = None, prepare=None) -> None:
        """A command killed at a random moment of its uninterrupted duration, then run again."""
        slug = re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")
        probe = self.fresh(f"{slug}-probe")
        if prepare:
            prepare(probe)
        duration = self._duration(args, probe)
        for k in range(self.kills):
            db = self.fresh(f"{slug}-{k}")
            if prepare:
                prepare(db)
            proc = subprocess.Popen([*MGCP, *args, "--db", str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(self.moment(duration))
            if proc.poll() is not None:
                self.finished[kind] = self.finished.get(kind, 0) + 1  # done before the kill came
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            self.killed(kind, db, f"at {k}")
            again = mgcp(*args, db=db)
            self.tally.check(again.returncode == 0 or b"no applied action" in again.stderr,
                             f"{kind} after a kill: {again.stderr.decode()[-400:]}")

    def undo_run(self) -> None:
        def prepare(db: Path) -> None:
            result = mgcp("rem", "run", "--auto", "--project", "/chaos/kill", "--op", "community_detection",
                          "--op", "duplicate_detection", "--json", db=db)
            assert result.returncode == 0, result.stderr
            self.undo_target = json.loads(result.stdout)["report"]["run_id"]
        prepare(self.fresh("undo-id"))  # the run id is the same in every copy
        self.command("undo of a run", ["rem", "undo", "--run", str(self.undo_target)], prepare=prepare)

    def migration(self) -> None:
        from synth import build_legacy_db

        legacy = self.work / "legacy.db"
        build_legacy_db(legacy, self.legacy_lessons, seed=5)
        conn = sqlite3.connect(legacy)
        before = conn.execute("SELECT * FROM lessons ORDER BY id").fetchall()
        conn.close()
        probe = self.work / "legacy-probe.db"
        shutil.copy(legacy, probe)
        duration = self._duration(["db", "migrate"], probe)
        cols = [c[1] for c in sqlite3.connect(legacy).execute("PRAGMA table_info(lessons)")]
        db = self.work / "legacy-killed.db"
        for k in range(self.kills):  # each kill on a fresh copy, then a start that resumes it
            shutil.copy(legacy, db)
            proc = subprocess.Popen([*MGCP, "db", "migrate", "--db", str(db)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(self.moment(duration))
            if proc.poll() is not None:
                self.finished["migration"] = self.finished.get("migration", 0) + 1
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            conn = sqlite3.connect(db)
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
            conn.close()
            self.tally.check(integrity == "ok", f"migration killed: integrity {integrity}")
            self.done["migration"] = self.done.get("migration", 0) + 1
            again = mgcp("db", "migrate", db=db)
            self.tally.check(again.returncode == 0, f"migration after a kill: {again.stderr.decode()[-400:]}")
            ok, report = db_check(db)
            self.tally.check(ok, f"db check after the resumed migration: {report[-600:]}")
            conn = sqlite3.connect(db)
            after = conn.execute(f"SELECT {', '.join(cols)} FROM lessons ORDER BY id").fetchall()
            conn.close()
            self.tally.check(after == before, "a legacy lesson row changed in a killed and resumed migration")
        self.migration_duration = duration


# -- stage 3: three --auto at once ------------------------------------------------------------------

def concurrent_auto(work: Path, base: Path, tally: Tally) -> int:
    db = work / "auto3.db"
    shutil.copy(base, db)
    assert mgcp("rem", "run", "--project", "/chaos/auto", "--op", "community_detection", "--op",
                "duplicate_detection", db=db).returncode == 0
    procs = [subprocess.Popen([*MGCP, "rem", "run", "--auto", "--json", "--project", "/chaos/auto", "--db", str(db)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    results = [p.communicate(timeout=600) for p in procs]
    tally.check([p.returncode for p in procs] == [0, 0, 0],
                f"concurrent --auto: exit codes {[p.returncode for p in procs]}: {[e.decode()[-300:] for _, e in results]}")
    documents = [json.loads(out) for out, _ in results if out]
    applied = [a["id"] for d in documents for a in d["applied"]]
    settled = {a["id"] for d in documents for a in d["settled_elsewhere"]}
    tally.check(len(applied) == len(set(applied)), "a finding was applied twice by concurrent --auto runs")
    conn = sqlite3.connect(db)
    still_pending = [f for f in settled
                     if conn.execute("SELECT status FROM rem_findings WHERE id = ?", [f]).fetchone() == ("pending",)]
    conn.close()
    # Settled elsewhere: another run applied it, or found it stale (a link made by another run).
    tally.check(not still_pending, f"listed as settled elsewhere yet pending: {still_pending}")
    ok, report = db_check(db)
    tally.check(ok, f"db check after concurrent --auto: {report[-600:]}")
    return len(applied)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="the CI version: 8 s of writers, 1 kill per kind")
    parser.add_argument("--seconds", type=float, default=35.0, help="how long the writers write")
    parser.add_argument("--kills", type=int, default=7, help="kills per writer kind")
    parser.add_argument("--legacy-lessons", type=int, default=50_000, help="lessons in the legacy database")
    parser.add_argument("--lessons", type=int, default=1500, help="lessons in the databases REM works on")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", default=None, help="keep the databases here (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    if args.short:
        args.seconds, args.kills, args.legacy_lessons, args.lessons = 8.0, 1, 3000, 400
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="mgcp-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["MGCP_DATA_DIR"] = str(work / "data")  # never the user's ~/.mgcp
    tally = Tally()
    t0 = time.time()
    try:
        db = work / "writers.db"
        build(db, args.lessons, args.lessons * 2)
        writers = Writers(db, args.seconds, tally, rng)
        writers.run()
        checked = writers.verify()
        ok, report = db_check(db)
        tally.check(ok, f"db check after the writers: {report[-600:]}")
        kills = Kills(work, args.kills, args.legacy_lessons, tally, rng, args.lessons, args.lessons * 2)
        kills.run()
        auto = concurrent_auto(work, kills.base, tally)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    attempts = sum(a for a, _ in writers.counts.values())
    tally.add("seed", seed)
    tally.add("writers at once", f"{len(writers.counts)} ({', '.join(sorted(writers.counts))})")
    tally.add("writing time", f"{writers.duration:.0f} s")
    tally.add("writes attempted / acknowledged", f"{attempts} / {sum(a for _, a in writers.counts.values())}")
    for name, (tried, acked) in sorted(writers.counts.items()):
        tally.add(f"  {name}", f"{acked} of {tried}")
    tally.add("findings applied by --auto during the writes", writers.auto_applied)
    tally.add("acknowledged writes checked", checked)
    tally.add("sessions replayed with context at", writers.replayed)
    tally.add("kills (each followed by db check)", sum(kills.done.values()))
    for kind, n in kills.done.items():
        late = kills.finished.get(kind, 0)
        tally.add(f"  {kind}", f"{n}" + (f" ({late} came after it had finished)" if late else ""))
    tally.add("writes acknowledged before kills, checked", getattr(kills, "acked", 0))
    tally.add(f"legacy migration ({args.legacy_lessons} lessons) uninterrupted", f"{kills.migration_duration:.1f} s")
    tally.add("findings applied by 3 concurrent --auto", auto)
    tally.add("losses and inconsistencies", len(tally.failures))
    tally.add("total time", f"{time.time() - t0:.0f} s")
    width = max(len(w) for w, _ in tally.rows)
    for what, value in tally.rows:
        print(f"{what:<{width}}  {value}")
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
