"""Surfaces: the typer CLI, the MCP server and the SessionStart hook's logic. Nothing imports them."""
