"""mgcp: a versioned knowledge store for coding agents, with a REM consolidation cycle.

Importing the package is deliberately cheap (the SessionStart hook imports `mgcp.schedule`):
nothing heavy is imported here.
"""

__version__ = "0.1.0"
