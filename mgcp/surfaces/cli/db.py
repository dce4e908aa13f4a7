"""`mgcp db migrate|status|check|backup`: create, upgrade, inspect, verify and back up the database."""

from typing import Annotated

import typer

from mgcp.surfaces.cli.app import Db, Json, echo, noun, note, print_json

db_app = noun("db", "Create, upgrade, inspect and verify the database.")


@db_app.command("migrate")
def migrate(db: Db = None, json: Json = False):
    """Create or upgrade the database (idempotent; never alters legacy tables or rows; makes an empty file a new database).

    Example: mgcp db migrate --db ~/.mgcp/lessons.db
    """
    from mgcp.config import db_path
    from mgcp.persistence import migrate as migrations

    path = db_path(db)
    report = migrations.open_and_migrate(path, allow_empty=True)  # `touch lessons.db` then migrate: a new database
    status = migrations.status(path)
    if json:
        return print_json({"database": str(path), "applied_now": report.applied, "failures": report.failures,
                           "applied": status["applied"], "pending": status["pending"]})
    echo(f"{path}: applied {len(report.applied)} migration(s)" + (": " + ", ".join(report.applied) if report.applied else ""))
    for name, failures in report.failures.items():
        for failure in failures:
            note(f"warning: {name} skipped {failure}; it stays pending and is retried")
    echo(f"{len(status['applied'])} applied in all, {len(status['pending'])} pending")


@db_app.command("status")
def status(db: Db = None, json: Json = False):
    """List applied and pending migrations and row counts (read-only).

    Example: mgcp db status --json
    """
    from mgcp.config import db_path
    from mgcp.persistence import migrate as migrations

    path = db_path(db)
    result = {"database": str(path), **migrations.status(path)}
    if json:
        return print_json(result)
    echo(f"database: {path}")
    echo(f"applied migrations ({len(result['applied'])}):")
    for m in result["applied"]:
        echo(f"  {m['name']:36} {m['applied_at']}")
    echo(f"pending migrations ({len(result['pending'])}):" + ("" if result["pending"] else " none"))
    for name in result["pending"]:
        echo(f"  {name}")
    echo("tables:")
    for table, count in result["tables"].items():
        echo(f"  {table:28} {count:>9} row(s)")


@db_app.command("check")
def check(db: Db = None, json: Json = False,
          repair: Annotated[bool, typer.Option("--repair", help="Also list the safe, lossless repairs.")] = False,
          yes: Annotated[bool, typer.Option("--yes", help="With --repair: make them, in one transaction.")] = False):
    """Verify the database read-only: file integrity, lesson versions, context history, REM actions, migrations.

    Exit 0 when clean, 1 when problems are found. Example: mgcp db check --repair
    """
    from mgcp.config import db_path
    from mgcp.errors import InvalidInputError
    from mgcp.persistence import check as checks

    if yes and not repair:
        raise InvalidInputError("--yes goes with --repair")
    path = db_path(db)
    report = checks.check(path)
    offered = [p for p in report.problems if p.repairable] if repair else []
    applying = bool(offered) and yes
    fixed = checks.repair(report) if applying else []
    after = checks.check(path) if applying else report
    if json:
        document = after.to_dict()
        if repair:
            document["repairs"] = [p.to_dict() for p in (fixed if applying else offered)]
            document["repaired"] = applying
        if applying:
            document["problems_before"] = [p.to_dict() for p in report.problems]
        print_json(document)
    else:
        echo(f"database: {path}")
        _print_report(report)
        if offered:
            echo("repaired:" if applying else "would repair (run again with --repair --yes to do it):")
            for problem in fixed if applying else offered:
                echo(f"  {problem.subject}: {problem.repair}")
        if applying:
            echo("after repair:")
            _print_report(after)
    if not after.ok:
        raise typer.Exit(1)


def _print_report(report) -> None:
    for problem in report.problems:
        echo(("warning: " if problem.level == "warning" else "") + str(problem)
             + (" (repairable)" if problem.repairable else ""))
    errors = sum(p.level != "warning" for p in report.problems)
    if errors:
        return echo(f"{errors} problem(s) found")
    c = report.checked
    echo(f"ok: {c['lessons']} lessons, {c['versions']} versions, {c['projects']} projects, "
         f"{c['history_rows']} history rows, {c['findings']} findings checked")


@db_app.command("backup")
def backup(dest: Annotated[str, typer.Argument(metavar="PATH", help="The backup file to write.")],
           force: Annotated[bool, typer.Option("--force", help="Replace PATH if it exists.")] = False,
           db: Db = None, json: Json = False):
    """Copy the database to PATH as one consistent snapshot, safe while other processes write.

    Example: mgcp db backup ~/backups/lessons-$(date +%F).db
    """
    from mgcp.config import db_path
    from mgcp.persistence.dump import backup as copy

    result = copy(db_path(db), dest, overwrite=force)
    if json:
        return print_json(result)
    rows = result["rows"]  # a database never upgraded has only the legacy tables
    echo(f"backed up {result['database']} to {result['backup']} ({result['bytes']} bytes; "
         f"{rows.get('lessons', 0)} lessons, {rows.get('lesson_versions', 0)} versions, "
         f"{rows.get('context_history', 0)} history rows, {rows.get('rem_findings', 0)} findings)")
