"""Errors that domain code raises for users. The CLI turns them into `Error: ...` and an exit code;
the MCP server turns them into tool errors with the same message."""


class MgcpError(Exception):
    """Base class. `exit_code` 1: an operational failure the message explains."""

    exit_code = 1


class InvalidInputError(MgcpError):
    """Bad input from the user: unknown ids, empty or oversized text, malformed files, secrets."""

    exit_code = 2


class NotFoundError(InvalidInputError):
    """An id or project the user named does not exist."""


class ConfigError(InvalidInputError):
    """An invalid rem-config.yaml (the message names the file, the key and the allowed values)."""


class DatabaseError(MgcpError):
    """The database file cannot be used: corrupt, foreign, or made by a newer mgcp."""

    exit_code = 2


class StorageError(DatabaseError):
    """The database cannot be read or written just now: the disk is full, another process holds
    the lock too long, an I/O error. Nothing the user typed was wrong: exit code 1."""

    exit_code = 1


class ConflictError(MgcpError):
    """An action would overwrite later changes (a stale finding, an undo after later edits).
    `details` lists what would be overwritten, one line each, when known."""

    def __init__(self, message: str, details: list[str] | None = None):
        super().__init__(message)
        self.details = details or []


class SettledError(ConflictError):
    """The finding was answered already (perhaps by another process at the same moment)."""


class PatternNotFoundError(MgcpError):
    """An id that names no reinforced pattern (unknown, or a lesson never reinforced): exit code 1,
    a lookup that found nothing rather than bad input."""
