"""The `mgcp` command line: a thin skin over the store and the engine.

`app` holds the Typer app, the shared options and `main`; each other module adds one noun's
commands (`db`, `lesson`, `context`, `rem`, `export`, `patterns`, and `agents` for init, serve and
demo).
Heavy modules are imported inside commands so that cheap commands start fast.
"""

# Each module registers its commands on import; this order is the order of `mgcp --help`.
from mgcp.surfaces.cli import db, lesson, context, rem, export, agents  # noqa: F401,I001
from mgcp.surfaces.cli import importing, settings  # noqa: F401,I001
from mgcp.surfaces.cli import memory  # noqa: F401,I001  (recall, stats)
from mgcp.surfaces.cli import patterns  # noqa: F401,E402,I001
from mgcp.surfaces.cli.app import app, command, main

__all__ = ["app", "command", "main"]
