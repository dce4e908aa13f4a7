"""The REM engine: what is due, running operations, applying and undoing findings, --auto.

Surfaces call only these functions (and the store's plain lesson/context methods).
"""

from mgcp.engine.actions import (Outcome, apply_auto, auto_decision, resolve, undo_finding,
                                 undo_run)
from mgcp.engine.findings import is_stale, pending_findings
from mgcp.engine.cycle import check_operations, report, run_cycle, schedules, status

__all__ = [
    "Outcome", "apply_auto", "auto_decision", "check_operations", "is_stale", "pending_findings", "report",
    "resolve", "run_cycle", "schedules", "status", "undo_finding", "undo_run",
]
