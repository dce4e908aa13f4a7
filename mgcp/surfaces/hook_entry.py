"""`mgcp-hook`: the console script Claude Code runs at SessionStart (what `mgcp init` installs).

A skin over `mgcp.surfaces.hook.main`, guarded so that even an installation too broken to import
the hook's logic stays out of the session's way: a note on stderr, exit status 0, nothing on stdout.
"""

import sys


def main() -> int:
    try:
        from mgcp.surfaces.hook import main as run
    except Exception as exc:  # noqa: BLE001 -- failing open is the contract
        print(f"mgcp-hook: mgcp unavailable ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 0
    return run()
