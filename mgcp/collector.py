"""Python's cyclic garbage collector paused while a REM operation runs or many rows are read.

An operation over a large knowledge base makes hundreds of thousands of small objects (terms,
edges, findings) next to the lessons it was given; so does reading 100k rows into objects. None of
them forms a reference cycle, so reference counting frees them all, yet their number sets off full
collections that walk every live object again and again: at 100k lessons these cost a third of an
operation's time. Pausing the collector for the call changes no result; garbage cycles made
meanwhile (by any thread) are collected once it runs again. Stdlib only. A block inside that makes
many cycles (networkx graphs) runs with the collector on (`collector_running`), so that memory does
not grow with them.

When the collector runs again, its first collection would walk every object the block left alive
(the lessons read, the corpora, the findings), and the collections after each later operation of
a cycle would walk them again. A cycle therefore freezes what each operation leaves alive
(`collector_paused(freeze=True)`: frozen objects are never walked, yet freed as usual once nothing
refers to them) and thaws it all when it ends (`thawed_after`), so that garbage cycles among them
are still collected.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def collector_paused(freeze: bool = False):
    """Usable as `with collector_paused():` or as a decorator `@collector_paused()`. The collector
    runs again afterwards only if it ran before. With `freeze` (only inside `thawed_after`), what
    is alive at the end is frozen first (`gc.freeze`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()


@contextmanager
def thawed_after():
    """What was frozen inside is thawed when the block ends (`gc.unfreeze`: it joins the oldest
    generation, which the collector walks again)."""
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def collector_running():
    """The collector on for a block that makes garbage cycles by the thousand (networkx graphs),
    inside a paused call; paused again afterwards if it was."""
    enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not enabled:
            gc.disable()
