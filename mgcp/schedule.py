"""Schedule arithmetic for REM operations: the one implementation of `next_due`.

Pure and dependency-free (stdlib `math` only) so that the SessionStart hook can import it without
pulling in pydantic. An operation that last ran at session `last` (0 = never) is due at session `s`
exactly when `s >= next_due(strategy, params, last)`. Missed runs never pile up: whatever `last` is,
the next due session is the first one strictly after it.

Strategies:
- linear       {"interval": n}                      next_due = last + n
- fibonacci    {"intervals": [5, 8, 13, ...]}       the first term > last; the list is extended by
                                                    the Fibonacci rule (each term the sum of the two before)
- logarithmic  {"base_interval": b, "scale": c}     runs owed by s: floor(c * ln(s / b)) + 1 for s >= b,
                                                    0 before; the k-th run falls at the first s >= b * e^(k/c)
"""

from __future__ import annotations

import math

STRATEGIES = ("linear", "fibonacci", "logarithmic")
DEFAULT_FIBONACCI = (5, 8, 13, 21, 34)


def fibonacci_terms(intervals=DEFAULT_FIBONACCI):
    """Yield the configured terms, then extend them forever by the Fibonacci rule."""
    terms = [int(t) for t in intervals]
    yield from terms
    a, b = (terms[-2], terms[-1]) if len(terms) >= 2 else (terms[-1], terms[-1])
    while True:
        a, b = b, a + b
        yield b


def runs_owed(session: int, base_interval: float, scale: float) -> int:
    """How many runs a logarithmic schedule owes by `session` (0 before `base_interval`)."""
    if session < base_interval or session <= 0:
        return 0
    return math.floor(scale * math.log(session / base_interval) + 1e-12) + 1


def next_due(strategy: str, params: dict, last: int) -> int:
    """The first session at which the operation is due again, given it last ran at `last`."""
    last = max(int(last), 0)
    if strategy == "linear":
        return last + int(params.get("interval", 5))
    if strategy == "fibonacci":
        for term in fibonacci_terms(params.get("intervals") or DEFAULT_FIBONACCI):
            if term > last:
                return term
    if strategy == "logarithmic":
        base = float(params.get("base_interval", 10))
        scale = float(params.get("scale", 2.0))
        owed = runs_owed(last, base, scale)
        # Closed form for the next run point, then nudged so that floating-point error can never
        # make it disagree with runs_owed (the definition).
        candidate = max(math.ceil(base * math.exp(owed / scale)), last + 1)
        while candidate > last + 1 and runs_owed(candidate - 1, base, scale) > owed:
            candidate -= 1
        while runs_owed(candidate, base, scale) <= owed:
            candidate += 1
        return candidate
    raise ValueError(f"unknown schedule strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")


SCHEDULE_PARAMS = ("interval", "intervals", "base_interval", "scale")


def plan(settings: dict, last_runs: dict, session: int) -> list[tuple[str, str, dict, int, int, bool]]:
    """For each operation in `settings` ({op: {"strategy": ..., params...}}): (operation, strategy,
    schedule params, last run session, next due session, due now). The one place where status, run
    and the hook turn settings and cursors into what is due. An operation whose settings say
    `enabled: false` is never due (it runs only when named)."""
    rows = []
    for op, s in settings.items():
        params = {k: v for k, v in s.items() if k in SCHEDULE_PARAMS}
        last = int(last_runs.get(op) or 0)
        due_at = next_due(s["strategy"], params, last)
        enabled = s.get("enabled", True) is not False
        rows.append((op, s["strategy"], params, last, due_at, session >= due_at and enabled))
    return rows
