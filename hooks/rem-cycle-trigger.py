#!/usr/bin/env python3
"""Claude Code SessionStart hook for mgcp: registers the session and reminds the agent when a REM
cycle is due or findings await review. It never runs the cycle and never fails the session.

Installs made before the `mgcp-hook` console script run it as `"<python>" "<this file>"` (running
`mgcp init` again moves them to `mgcp-hook`); it works from a checkout and from the copy an installed
wheel carries at `mgcp/hooks/`. The logic lives in `mgcp.surfaces.hook`.
"""

import sys

try:
    from mgcp.surfaces.hook import main
except Exception as exc:  # mgcp is not importable by this interpreter: stay out of the session's way
    print(f"rem-cycle-trigger: mgcp unavailable ({type(exc).__name__}: {exc})", file=sys.stderr)
    sys.exit(0)

if __name__ == "__main__":
    sys.exit(main())
