"""`mgcp patterns list|explain`: what pattern reinforcement found recurring."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Db, Json, echo, noun, print_json, with_store

patterns_app = noun("patterns", "Reinforced patterns: what recurred across sessions, and where it came from.")


@patterns_app.command("list")
def list_(limit: Annotated[int, typer.Option("--limit", help="At most this many (1 to 10000).")] = 50,
          kind: Annotated[Optional[list[str]], typer.Option(
              "--kind", help="Only these kinds: lesson, decision, note (repeatable or comma-separated).")] = None,
          since: Annotated[Optional[str], typer.Option(
              "--since", help="Only patterns reinforced at or after this ISO-8601 date or time.")] = None,
          db: Db = None, json: Json = False):
    """List reinforced patterns, the highest count first.

    Example: mgcp patterns list --kind decision --since 2026-04-01 --limit 10
    """
    from mgcp.engine import patterns

    found = with_store(db, lambda s: patterns.list_patterns(s, limit, kind, since), create=False)
    if json:
        return print_json(found)
    from mgcp.surfaces import format

    echo(format.patterns(found, filtered=bool(kind or since)))


@patterns_app.command("explain")
def explain(ident: Annotated[str, typer.Argument(metavar="ID", help="A pattern id, or a reinforced lesson's id.")],
            db: Db = None, json: Json = False):
    """Show a reinforced pattern: count, last reinforced, provenance, canonical text, superseded members.

    Example: mgcp patterns explain use-pnpm-workspaces
    """
    from mgcp.engine import patterns

    found = with_store(db, lambda s: patterns.explain(s, ident), create=False)
    if json:
        return print_json(found)
    from mgcp.surfaces import format

    echo(format.pattern_explanation(found))
