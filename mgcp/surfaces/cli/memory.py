"""`mgcp recall` and `mgcp stats`: what the memory gives an agent, and how it is doing."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Config, Db, Json, Project, app, echo, load_config, print_json, project_path, with_store


@app.command("recall")
def recall(task: Annotated[str, typer.Argument(metavar="TASK")],
           budget: Annotated[Optional[int], typer.Option("--budget", max=1_000_000_000, help="At most this many characters "
                                                         "(default: recall.budget, 8000; at least 400).")] = None,
           project: Project = None, config: Config = None, db: Db = None, json: Json = False):
    """Print the memory section for a task, within a character budget (its lessons count as used).

    The section holds the project's state, constraints, preferences, the lessons most relevant to
    the task and recent error solutions.

    Example: mgcp recall "add retries to the payment webhook" --budget 4000
    """
    from mgcp.engine.recall import recall as build

    settings = load_config(config)
    path = project_path(project)
    result = with_store(db, lambda s: build(s, settings, path, task, budget), create=False)
    if json:
        return print_json(result.to_dict())
    echo(result.text.rstrip("\n"))


@app.command("stats")
def stats(db: Db = None, json: Json = False):
    """Show lessons by kind and tier, queries that found something or nothing, outcomes and success rate.

    Example: mgcp stats --json
    """
    from mgcp.engine.outcomes import stats as figures

    result = with_store(db, figures, create=False)
    if json:
        return print_json(result)
    from mgcp.surfaces import format

    echo(format.stats(result))
