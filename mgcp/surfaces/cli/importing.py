"""`mgcp import jsonl`: read an export back, into an empty database or beside what is there."""

from typing import Annotated

import typer

from mgcp.surfaces.cli.app import Db, Json, echo, noun, print_json, with_store

import_app = noun("import", "Import a knowledge base exported with `mgcp export jsonl`.")


@import_app.command("jsonl")
def jsonl(file: Annotated[str, typer.Argument(metavar="FILE", help="The export (- for stdin).")],
          db: Db = None, json: Json = False):
    """Import an export: an empty database is rebuilt as exported; otherwise nothing is duplicated and what is skipped is listed.

    One transaction: a bad file imports nothing. Example: mgcp import jsonl knowledge.jsonl --db fresh.db
    """
    import shutil
    import sys
    import tempfile
    from contextlib import ExitStack

    from mgcp.config import db_path
    from mgcp.errors import InvalidInputError, MgcpError
    from mgcp.persistence.dump import ExportReader, import_rows

    source = "stdin" if file == "-" else file
    with ExitStack() as stack:
        try:
            handle = sys.stdin if file == "-" else stack.enter_context(open(file, encoding="utf-8"))
            if not handle.seekable():  # a pipe or a FIFO: read twice (checked, then written), so from a copy
                spool = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
                shutil.copyfileobj(handle, spool)
                handle = spool
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None
        target = db_path(db)
        existed = target.exists()
        try:
            report = with_store(db, lambda s: import_rows(s, ExportReader(handle, source), source))
        except MgcpError:
            if not existed:  # a refused import leaves no database behind it
                for leftover in (target, target.with_name(target.name + "-wal"), target.with_name(target.name + "-shm")):
                    leftover.unlink(missing_ok=True)
            raise
    if json:
        return print_json(report.to_dict())
    total = sum(report.imported.values())
    what = ", ".join(f"{n} {t}" for t, n in report.imported.items()) or "nothing"
    echo(("Rebuilt" if report.mode == "empty" else "Merged") + f" {total} row(s) from {file}: {what}.")
    for item in report.replaced:
        echo(f"replaced {item['kind']} {item['id']}: {item['reason']}")
    same = {}
    for item in report.skipped:
        if item["reason"] == "already here":
            same[item["kind"]] = same.get(item["kind"], 0) + 1
        else:
            echo(f"skipped {item['kind']} {item['id']}: {item['reason']}")
    if same:
        echo("skipped, already here: " + ", ".join(f"{n} {kind}(s)" for kind, n in same.items()))
    if report.skipped_rows:
        echo("skipped rows: " + ", ".join(f"{n} {t}" for t, n in report.skipped_rows.items()))
    for item in report.beyond:
        echo(f"left out with {item['kind']} {item['id']} (kept as it is here): {item['rows']} {item['table']} "
             "row(s) more in the file than here")
