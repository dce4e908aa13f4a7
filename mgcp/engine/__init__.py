"""The REM engine: what is due, running operations, the review queue, applying and undoing
findings, and the --auto policy. Surfaces call these functions (and the store's plain lesson and
context methods); they decide nothing of their own.

Each name below is imported from its module on first use, so that a cheap command (`rem status`)
does not load the operations, networkx and numpy that running a cycle needs.
"""

import importlib

_MODULES = {  # name -> the module of mgcp.engine that defines it
    "ACTIONS": "actions", "Outcome": "actions", "resolve": "actions", "undo_finding": "actions",
    "undo_run": "actions",
    "check_operations": "cycle", "report": "cycle", "run": "cycle", "run_cycle": "cycle",
    "run_on_demand": "cycle",
    "status": "schedules",
    "next_finding": "review", "pending_findings": "review",
}

__all__ = sorted(_MODULES)


def __getattr__(name: str):
    """A name of `__all__` from its module, or a submodule (`engine.cycle`), imported now."""
    module = _MODULES.get(name)
    try:
        value = importlib.import_module(f"{__name__}.{module or name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    if module:
        value = getattr(value, name)
        globals()[name] = value
    return value
