"""`mgcp config show`: the settings in force and where each came from."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Config, Db, Json, echo, noun, print_json

config_app = noun("config", "Show the settings in force.")


@config_app.command("show")
def show(project: Annotated[Optional[str], typer.Option("--project", help="Show this project's overrides applied (default: none, the global settings).")] = None,
         config: Config = None, db: Db = None, json: Json = False):
    """Show the effective REM schedule and thresholds, the database and config file, and where each came from.

    Example: mgcp config show --project .
    """
    from mgcp import config as settings
    from mgcp.surfaces.cli.app import load_config, project_path

    path = project_path(project) if project else None
    cfg = load_config(config)
    document = {
        "database": {"value": str(settings.db_path(db)), "source": settings.db_path_source(db)},
        "config_file": {"value": str(settings.config_path(config)) if settings.config_path(config) else None,
                        "source": settings.config_path_source(config)},
        "project": path,
        "settings": cfg.explain(path),
    }
    if json:
        return print_json(document)
    echo(f"database     {document['database']['value']}  ({document['database']['source']})")
    echo(f"config file  {document['config_file']['value'] or '-'}  ({document['config_file']['source']})")
    if path:
        echo(f"project      {path}")
    width = max(len(r["key"]) for r in document["settings"])
    for row in document["settings"]:  # values as the file would write them: false, null, [a, b]
        note = f"  ({row['note']})" if row.get("note") else ""
        echo(f"{row['key']:{width}}  {settings.yaml_text(row['value'], plain=True):14}  {row['source']}{note}")
