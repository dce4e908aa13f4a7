"""The only package that speaks SQL.

- `persistence.store.Store`: the async (aiosqlite) store the engine and the surfaces use.
- `persistence.migrate`: the sync migration runner, run before any async connection opens.
- `persistence.sessions`: projects and sessions in plain sqlite3, for the SessionStart hook.

This file imports nothing, so the hook's `persistence.sessions` never loads pydantic or aiosqlite.
"""
