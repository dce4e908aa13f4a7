"""The REM engine: what is due, running operations, the review queue, applying and undoing
findings, and the --auto policy. Surfaces call these functions (and the store's plain lesson and
context methods); they decide nothing of their own.
"""

from mgcp.engine.actions import ACTIONS, Outcome, resolve, undo_finding, undo_run
from mgcp.engine.cycle import check_operations, report, run, run_cycle, run_on_demand, status
from mgcp.engine.review import next_finding, pending_findings

__all__ = [
    "ACTIONS", "Outcome", "check_operations", "next_finding", "pending_findings", "report", "resolve", "run",
    "run_cycle", "status", "undo_finding", "undo_run",
    "run_on_demand",
]
