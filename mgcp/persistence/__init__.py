"""The only package that speaks SQL.

`Store` (persistence.store) is the async (aiosqlite) store used by the engine and the surfaces:
`async with Store.open(path) as store:`; the database is checked and upgraded by the sync migration
runner (persistence.migrate) before the async connection opens. `persistence.sessions` is the
stdlib-only part the SessionStart hook uses, so importing this package stays cheap: `Store` (and
with it pydantic and aiosqlite) is loaded on first access.
"""


def __getattr__(name):
    if name == "Store":
        from mgcp.persistence.store import Store

        return Store
    raise AttributeError(name)


__all__ = ["Store"]
