"""The REM engine: what is due, running operations, the review queue, applying and undoing
findings, and the --auto policy. Surfaces call these functions (and the store's plain lesson and
context methods); they decide nothing of their own.
"""

from mgcp.engine.actions import (ACTIONS, Outcome, apply_auto, auto_decision, resolve, undo_finding,
                                 undo_run)
from mgcp.engine.cycle import check_operations, report, run, run_cycle, schedules, status
from mgcp.engine.review import finding_for, is_stale, next_finding, pending_findings, visible_to

__all__ = [
    "ACTIONS", "Outcome", "apply_auto", "auto_decision", "check_operations", "finding_for", "is_stale",
    "next_finding", "pending_findings", "report", "resolve", "run", "run_cycle", "schedules", "status",
    "undo_finding", "undo_run", "visible_to",
]
