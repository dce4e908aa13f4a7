"""`mgcp db migrate|status`: create, upgrade and inspect the database."""

from mgcp.surfaces.cli.app import Db, Json, echo, noun, note, print_json

db_app = noun("db", "Create, upgrade and inspect the database.")


@db_app.command("migrate")
def migrate(db: Db = None, json: Json = False):
    """Create or upgrade the database (idempotent; never alters legacy tables or rows).

    Example: mgcp db migrate --db ~/.mgcp/lessons.db
    """
    from mgcp.config import db_path
    from mgcp.persistence import migrate as migrations

    path = db_path(db)
    report = migrations.open_and_migrate(path)
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
