"""Replacing a file whole: what a reader finds at its path is the old file or the new one, never
half of one, and the new one keeps what the old one had that is not its content. Stdlib only."""

from __future__ import annotations

import os
import tempfile
from typing import IO, Callable, TypeVar

T = TypeVar("T")


def replace(path: str | os.PathLike, write: Callable[[IO[str]], T],
            check: Callable[[str], None] | None = None) -> T:
    """Write a new text file with `write(handle)` beside the one at `path`, then put it in its
    place (`replace_with`); returns what `write` returned."""
    def make(name: str) -> T:
        with open(name, "w", encoding="utf-8", newline="\n") as handle:
            return write(handle)
    return replace_with(path, make, check)


def replace_with(path: str | os.PathLike, make: Callable[[str], T], check: Callable[[str], None] | None = None,
                 overwrite: bool = True) -> T:
    """Write a new file by `make(name)` (the name of an empty file beside the one at `path`), then
    put it in its place; returns what `make` returned. A symlink is followed (the file it names is
    replaced, the link stays), and the new file gets the permissions of the file it replaces (a new
    file: those the umask gives), so a file kept private stays private. `check(name)` may read the
    written file before it replaces the old one, and refuse it by raising. The temporary file has a
    name of its own (two writers at once never write into one file) and is removed on any failure.
    Without `overwrite`, a file found at `path` when the new one is put there (another writer's,
    since the caller looked) stays, and FileExistsError is raised: a hard link, which never
    replaces, puts the new file there (where links cannot be made, a check just before a rename).
    OSError propagates."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{os.path.basename(target)}.", suffix=".mgcp-tmp",
                               dir=os.path.dirname(target))
    os.close(fd)
    try:
        result = make(tmp)
        if check is not None:
            check(tmp)
        os.chmod(tmp, mode_of(target))
        if overwrite:
            os.replace(tmp, target)
        else:
            _link_new(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return result


def _link_new(tmp: str, target: str) -> None:
    """Put `tmp` at `target`, which must not exist (FileExistsError)."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        if os.path.lexists(target):
            raise FileExistsError(target) from None
        os.replace(tmp, target)


def mode_of(path: str) -> int:
    """The permissions of the file at `path`, else those a new file gets."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
