"""Replacing a file whole: what a reader finds at its path is the old file or the new one, never
half of one, and the new one keeps what the old one had that is not its content. Stdlib only."""

from __future__ import annotations

import os
import tempfile
from typing import IO, Callable, TypeVar

T = TypeVar("T")


def replace(path: str | os.PathLike, write: Callable[[IO[str]], T],
            check: Callable[[str], None] | None = None) -> T:
    """Write a new file with `write(handle)` beside the one at `path`, then put it in its place;
    returns what `write` returned. A symlink is followed (the file it names is replaced, the link
    stays), and the new file gets the permissions of the file it replaces (a new file: those the
    umask gives), so a file kept private stays private. `check(name)` may read the written file
    before it replaces the old one, and refuse it by raising. The temporary file has a name of its
    own (two writers at once never write into one file) and is removed on any failure. OSError
    propagates."""
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{os.path.basename(target)}.", suffix=".mgcp-tmp",
                               dir=os.path.dirname(target))
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as handle:
            result = write(handle)
        if check is not None:
            check(tmp)
        os.chmod(tmp, mode_of(target))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return result


def mode_of(path: str) -> int:
    """The permissions of the file at `path`, else those a new file gets."""
    try:
        return os.stat(path).st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
