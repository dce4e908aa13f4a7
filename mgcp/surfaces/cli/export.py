"""`mgcp export dpo|jsonl`: training data from lesson history, and the whole knowledge base as JSON Lines."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Db, noun, note, with_store

export_app = noun("export", "Export the knowledge base (JSON Lines) or training data from lesson history.")

Force = Annotated[bool, typer.Option("--force", help="Replace an existing --out file that is not an earlier export.")]


def _may_replace(out: str, force: bool, earlier_export, db) -> None:
    """--out is never the database itself (nor its -wal or -shm file), --force or not. An existing
    --out file is replaced only when it is empty or an earlier export of this kind (`earlier_export`
    judges its first line), or with --force: a mistyped path must not wipe a database or a document."""
    import json
    import os

    from mgcp.config import db_path
    from mgcp.errors import InvalidInputError
    from mgcp.persistence.dump import is_database_file

    if is_database_file(db_path(db), out):
        raise InvalidInputError(f"--out {out} is the database itself; write the export to another file")
    if os.path.isdir(out):
        raise InvalidInputError(f"--out {out} is a directory; name a file")
    if force or not os.path.exists(out) or os.path.getsize(out) == 0:
        return
    try:
        with open(out, "rb") as fh:
            first = json.loads(fh.readline(1 << 20).decode("utf-8"))
    except (OSError, ValueError):
        first = None
    if not (isinstance(first, dict) and earlier_export(first)):
        raise InvalidInputError(f"{out} exists and is not an earlier export; pass --force to replace it")


def _write(out: str, lines, check=None) -> int:
    """Write the lines to `out` through a temporary file that replaces it whole at the end (an
    interrupted export leaves the earlier file as it was; a symlink's file is replaced, with its
    permissions), once `check(temporary file)` (when given) raised nothing; the number of lines
    written. A device or a pipe at `out` (/dev/null, a FIFO) is written into, never replaced: the
    lines go to a temporary file of their own first."""
    import os
    import tempfile

    from mgcp import files
    from mgcp.errors import MgcpError

    if os.path.exists(out) and not os.path.isfile(out):
        import shutil

        with tempfile.TemporaryDirectory(prefix="mgcp-export-") as folder:
            whole = os.path.join(folder, "export")
            count = _write(whole, lines, check)
            try:
                with open(whole, "rb") as source, open(out, "wb") as target:
                    shutil.copyfileobj(source, target)
            except OSError as exc:
                raise MgcpError(f"cannot write {out}: {exc.strerror or exc}") from None
        return count

    def write(handle) -> int:
        count = 0
        for line in lines:
            handle.write(line)
            count += 1
        return count

    try:  # two exports to one path at once each leave a whole export there (`files.replace`)
        return files.replace(out, write, check)
    except OSError as exc:
        raise MgcpError(f"cannot write {out}: {exc.strerror or exc}") from None


@export_app.command("dpo")
def dpo(out: Annotated[Optional[str], typer.Option("--out", help="Output file (default, or -: stdout).")] = None,
        force: Force = False, db: Db = None):
    """Write one JSONL record per pair of consecutive real lesson versions (for DPO training).

    Example: mgcp export dpo --out lessons-dpo.jsonl
    """
    import json
    import sys

    from mgcp.export import dpo_records

    out = None if out == "-" else out
    if out:
        _may_replace(out, force, lambda first: {"prompt", "chosen", "rejected"} <= set(first), db)
    records = dpo_records(with_store(db, lambda s: s.lessons.real_version_pairs(), create=False))
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
    if out:
        _write(out, lines)
        note(f"wrote {len(records)} record(s) to {out}")
    else:
        sys.stdout.write("".join(lines))


@export_app.command("jsonl")
def jsonl(out: Annotated[Optional[str], typer.Option("--out", help="Output file (default, or -: stdout).")] = None,
          force: Force = False, db: Db = None):
    """Write the whole knowledge base as JSON Lines: lessons with every version, links, context history, findings, actions.

    One snapshot, the same bytes for the same knowledge (`mgcp import jsonl` reads it back: the
    export is read back as an import checks it before it is kept, or printed).
    Example: mgcp export jsonl --out knowledge.jsonl
    """
    import os
    import shutil
    import sys
    import tempfile

    from mgcp.config import db_path
    from mgcp.persistence.dump import FORMAT, check_importable, export_lines

    out = None if out == "-" else out
    if out:
        _may_replace(out, force, lambda first: first.get("format") == FORMAT, db)
    lines = export_lines(db_path(db))
    if out:
        count = _write(out, lines, lambda tmp: check_importable(db_path(db), tmp, out))
        return note(f"wrote {count - 2} row(s) to {out}")  # the header and the last line are no rows
    with tempfile.TemporaryDirectory(prefix="mgcp-export-") as folder:  # checked whole before any is printed
        whole = os.path.join(folder, "export.jsonl")
        count = _write(whole, lines, lambda tmp: check_importable(db_path(db), tmp, "the export"))
        with open(whole, encoding="utf-8", newline="") as fh:
            shutil.copyfileobj(fh, sys.stdout)
    note(f"exported {count - 2} row(s)")
