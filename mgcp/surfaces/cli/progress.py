"""How a long command shows its progress on stderr: a bar when stderr is a terminal, plain lines
otherwise, and nothing when `--json` output goes to a pipe (a script reads it).

A reporter is called `report(message)` when a step starts and again when it ends, and
`report(message, fraction)` as the step advances (from any thread)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Report = Callable[..., None]


@contextmanager
def reporter(json_output: bool) -> Iterator[Report]:
    if json_output and not sys.stdout.isatty():
        yield lambda message, fraction=None: None
    elif not sys.stderr.isatty():
        yield _lines
    else:
        with _bar() as report:
            yield report


def _lines(message: str, fraction: float | None = None) -> None:
    """Each step's start and end, and each quarter of a long step."""
    if fraction is None:
        print(message, file=sys.stderr, flush=True)
    elif fraction > 0 and round(fraction * 100) % 25 == 0:
        print(f"{message}: {round(fraction * 100)}%", file=sys.stderr, flush=True)


@contextmanager
def _bar() -> Iterator[Report]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        step: list = []  # the step under way, if any

        def report(message: str, fraction: float | None = None) -> None:
            if fraction is not None:
                if step:
                    bar.update(step[0], completed=fraction)
            elif not step:
                step.append(bar.add_task(message, total=1.0))
            else:
                bar.update(step.pop(), description=message, completed=1.0)

        yield report
