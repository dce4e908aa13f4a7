"""Plain-text rendering of models for the terminal (the CLI's human output).

Stored text is kept exactly as given, control characters included; `terminal_safe` is what makes
it harmless to print, and the CLI's output helpers pass every line through it.
"""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: formatting a status needs no pydantic
    from mgcp.models import (ContextAt, ContextSnapshot, Lesson, LessonVersion, ProjectContext, RemCycleReport,
                             RemFinding, RemReport, RemRun, RemStatus)


# C0 controls but tab and newline, DEL and the C1 controls: a terminal acts on them (ESC begins a
# sequence that can retitle the window, recolour, move the cursor or rewrite the screen; BEL rings;
# CR returns over what was printed; U+009B is a CSI by itself on terminals that read C1 codes).
# Found by a pattern's scan: once the text holds anything beyond ASCII, `str.translate` goes a
# character at a time through a dict (0.55 s over an 11 MB report; the scan: 0.02-0.05 s).
TODO_MARKS = {"completed": "x", "in_progress": "~"}  # a todo's box: [x] done, [~] in progress, [ ] pending
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with each control character a terminal would act on shown as an escape (ESC as
    `\\x1b`, BEL as `\\x07`); newlines and tabs, which the layout uses, stay."""
    return CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def field(label: str, value: str) -> str:
    """`  label: value`, with continuation lines indented under the value."""
    head = f"  {label + ':':11}"
    return head + str(value).replace("\n", "\n" + " " * len(head))


def lesson(lesson: Lesson) -> str:
    lines = [f"{lesson.id}  (v{lesson.version}, {lesson.status.value}"
             + (f" -> {lesson.superseded_by}" if lesson.superseded_by else "") + ")",
             field("trigger", lesson.trigger), field("action", lesson.action)]
    if lesson.rationale:
        lines.append(field("rationale", lesson.rationale))
    if lesson.tags:
        lines.append(field("tags", ", ".join(lesson.tags)))
    if lesson.relationships:
        lines.append("  links:     " + ", ".join(f"{r.target} ({r.type})" for r in lesson.relationships))
    lines.append(f"  used {lesson.usage_count} time(s); created {lesson.created_at}; refined {lesson.last_refined}")
    quality = f"  {lesson.kind}, confidence {lesson.confidence:.2f}, {lesson.tier}"
    if lesson.importance is not None:
        quality += f", importance {lesson.importance:.2f}"
    if lesson.helped or lesson.failed:
        quality += (f"; helped {lesson.helped}, failed {lesson.failed} (success {lesson.success_rate:.0%})"
                    + (f", {lesson.failure_streak} failure(s) in a row" if lesson.failure_streak else ""))
    lines.append(quality)
    return "\n".join(lines)


def score_parts(parts: dict, weights: dict) -> str:
    """`--explain`: each part of a ranking score, as weight x signal."""
    shown = []
    for name, value in parts.items():
        if name not in weights:  # an added part such as the reinforcement boost
            shown.append(f"{name} {value:.3f}")
            continue
        weight = weights[name]
        signal = value / weight if weight else 0.0
        shown.append(f"{name} {value:.3f} (= {weight:g} x {signal:.2f})")
    return "  score parts: " + ", ".join(shown)


def outcome(result: dict) -> str:
    rate = result["success_rate"]
    lines = [f"recorded: {result['lesson_id']} {result['outcome']}; helped {result['helped']}, failed "
             f"{result['failed']}" + (f" (success {rate:.0%})" if rate is not None else "")
             + (f"; {result['streak']} failure(s) in a row (a finding is raised at {result['failure_threshold']})"
                if result["streak"] else "")]
    if result.get("finding") is not None:
        f = result["finding"]
        lines.append(f"raised finding {f.id}: {f.title} - review it with `mgcp rem review`")
    return "\n".join(lines)


def stats(figures: dict) -> str:
    q, o = figures["queries"], figures["outcomes"]
    lines = [f"{figures['lessons']} active lesson(s); {figures['never_used']} never used",
             "  by kind: " + (", ".join(f"{k} {n}" for k, n in figures["by_kind"].items()) or "none"),
             "  by tier: " + ", ".join(f"{k} {n}" for k, n in figures["by_tier"].items()),
             f"queries: {q['total']} ({q['found']} found something, {q['found_nothing']} found nothing)",
             f"outcomes: helped {o['helped']}, failed {o['failed']}"
             + (f" (success rate {o['success_rate']:.0%})" if o["success_rate"] is not None else "")
             + f"; {o['lessons_on_a_failure_streak']} lesson(s) failing lately"]
    return "\n".join(lines)


def version(v: LessonVersion) -> str:
    head = f"v{v.version}  {v.timestamp}" + ("  [reconstructed: text before versioning is partly lost]" if v.reconstructed else "")
    lines = [head, field("trigger", v.trigger),
             field("action", v.action if v.action is not None else "(not recoverable: overwritten before versioning)")]
    if v.rationale is not None:
        lines.append(field("rationale", v.rationale))
    if v.tags:
        lines.append(field("tags", ", ".join(v.tags)))
    if v.kind is not None:
        lines.append(field("kind", f"{v.kind}, confidence {v.confidence:.2f}"))
    if v.refinement_reason:
        lines.append(f"  refined because: {v.refinement_reason}" + (f"  (session {v.session_id})" if v.session_id else ""))
    return "\n".join(lines)


def snapshot(s: ContextSnapshot) -> str:
    lines = [f"session {s.session_number}  {s.timestamp}" + (f"  ({s.session_id})" if s.session_id else "")]
    if s.notes:
        lines.append("  notes: " + textwrap.shorten(s.notes, 200))
    pending = [t.content for t in s.todos if t.status != "completed"]
    done = [t.content for t in s.todos if t.status == "completed"]
    if pending:
        lines.append("  todos: " + "; ".join(pending))
    if done:
        lines.append("  done: " + "; ".join(done))
    if s.recent_decisions:
        lines.append("  decisions: " + textwrap.shorten("; ".join(s.recent_decisions), 300))
    if s.active_files:
        lines.append("  files: " + ", ".join(s.active_files))
    if s.catalogue_delta:
        parts = [f"{k} {', '.join(v)}" for k, v in s.catalogue_delta.items() if v]
        if parts:
            lines.append("  catalogue: " + "; ".join(parts))
    return "\n".join(lines)


def finding(f: RemFinding, index: int | None = None, total: int | None = None) -> str:
    head = f"[{index}/{total}]  " if index else ""
    lines = [f"{head}{f.operation}  -  finding {f.id}", f.title, ""]
    lines += [textwrap.fill(p, 100) if len(p) > 100 and not p.startswith(("-", " ")) else p
              for p in f.description.splitlines()]
    lines.append("")
    for i, option in enumerate(f.options, 1):
        mark = " (Recommended)" if i == f.recommended else ""
        lines.append(f"  [{i}] {option.label}{mark}")
        if option.description:
            lines.append(f"      {option.description}")
    return "\n".join(lines)


def rem_status(s: RemStatus) -> str:
    lines = [f"{s.project_path}  (project {s.project_id}, session {s.session_number})", ""]
    lines.append(f"  {'operation':22} {'strategy':12} {'last run':>8} {'next due':>8}  due")
    for op in s.operations:
        last = op.last_run_session if op.last_run_timestamp else "never"
        lines.append(f"  {op.operation:22} {op.strategy:12} {last:>8} {op.next_due_session:>8}  "
                     + ("yes" if op.due else "no" if op.enabled else "no (off: enabled: false)"))
    lines.append("")
    lines.append(f"  {s.pending_findings} finding(s) pending review"
                 + (" - run `mgcp rem review`" if s.pending_findings else ""))
    return "\n".join(lines)


def project(ctx: ProjectContext) -> str:
    lines = [f"{ctx.project_name}  ({ctx.project_path}, project {ctx.project_id}, session {ctx.session_count})"]
    if ctx.notes:
        lines.append(f"notes: {ctx.notes}")
    lines += [f"  [{TODO_MARKS.get(t.status, ' ')}] {t.content}" for t in ctx.todos]
    if ctx.recent_decisions:
        lines.append("recent decisions:")
        lines += [f"  - {d}" for d in ctx.recent_decisions]
    if ctx.active_files:
        lines.append("active files: " + ", ".join(ctx.active_files))
    if ctx.catalogue:
        lines.append("catalogue keys: " + ", ".join(sorted(ctx.catalogue)))
    return "\n".join(lines)


def context_at(result: ContextAt) -> str:
    import json

    head = f"context at the end of session {result.session}"
    if result.snapshot.session_number != result.session:
        head += f" (last saved in session {result.snapshot.session_number})"
    return "\n".join([head, snapshot(result.snapshot), "catalogue (verified against its hash):",
                      json.dumps(result.catalogue, indent=2, sort_keys=True, ensure_ascii=False)])


def cycle(report: RemCycleReport) -> str:
    ran = ", ".join(o.operation for o in report.operations) or "nothing (no operation is due)"
    lines = [f"REM run {report.run_id} at session {report.session_number}: ran {ran} in {report.duration_ms:.0f} ms"]
    for o in report.operations:
        unchanged = "  (nothing it reads changed since its last run)" if o.summary.get("skipped") else ""
        beyond = o.summary.get("not_shown")
        lines.append(f"  {o.operation:22} {o.findings:>4} new finding(s)" + unchanged
                     + (f"  ({beyond} more lesson(s) it could raise: the next as these are answered)"
                        if beyond else "") + (f"  FAILED: {o.error}" if o.error else ""))
    return "\n".join(lines)


def rem_run(result: RemRun) -> str:
    lines = [cycle(result.report)]
    if result.auto:
        verb = "would apply" if result.dry_run else "applied"
        lines.append(f"--auto {verb} {len(result.applied)} finding(s), left {len(result.left_pending)} pending for review")
        lines += [f"  {verb}: {a.id}  {a.title}  ->  {a.option} ({a.why})" for a in result.applied]
        if result.settled_elsewhere:
            lines.append(f"  skipped {len(result.settled_elsewhere)} finding(s) answered elsewhere or no longer "
                         "applying (stale): " + ", ".join(a.id for a in result.settled_elsewhere))
        lines += [f"  left: {a.id}  {a.title}  ({a.result})" for a in result.left_pending if a.result]
        if result.left_pending:
            lines.append("  review the rest with `mgcp rem review`")
    elif result.report.findings:
        lines.append(f"{len(result.report.findings)} new finding(s); review them with `mgcp rem review`")
    return "\n".join(lines)


def unfinished(run_id: int) -> str:
    return (f"run {run_id} did not finish (interrupted, or still running): what its finished operations "
            "found is among the findings waiting")


def rem_report(result: RemReport) -> str:
    lines = [cycle(result.last_run) if result.last_run else
             "no REM run yet for this project; start one with `mgcp rem run`" if not result.unfinished_run else
             "no REM run of this project finished yet"]
    if result.last_run:
        lines += [f"  {f.id}  [{f.status.value:8}] {f.operation:20} {f.title}" for f in result.last_run.findings]
    if result.unfinished_run:
        lines.append(unfinished(result.unfinished_run))
    lines.append("")
    lines.append(f"{len(result.pending)} finding(s) waiting for review"
                 + (" - run `mgcp rem review`:" if result.pending else "."))
    lines += [f"  {f.id}  {f.operation:20} {f.title}" for f in result.pending]
    return "\n".join(lines)


# -- reinforced patterns ----------------------------------------------------------------------------

def patterns(found, filtered: bool = False) -> str:
    """`filtered`: the list was narrowed (by kind or date), so an empty one says only that none matched."""
    if not found:
        return ("no reinforced patterns match" if filtered
                else "no reinforced patterns (pattern_reinforcement has not found any yet)")
    lines = [f"Reinforced patterns ({len(found)}):"]
    for p in found:
        lesson = f", lesson {p.lesson_id}" if p.lesson_id else ", no lesson holds it"
        lines.append(f"[{p.reinforcement_count}x] {p.id} ({p.category}{lesson}, "
                     f"last reinforced {p.last_reinforced_at})")
        lines.append("    " + textwrap.shorten(p.text, 110, placeholder="…"))
    return "\n".join(lines)


def pattern_explanation(e) -> str:
    p = e.pattern
    lines = [f"Pattern: {p.id}", field("count", str(p.reinforcement_count)),
             field("last", p.last_reinforced_at + " (last reinforced)"), field("category", p.category),
             field("via", p.derived_via), field("canonical", p.canonical)]
    if p.lesson_id:
        lines.append(field("lesson", f"{p.lesson_id} ({e.lesson_status or 'missing'})"))
    lines += ["", "Canonical text:", "  " + e.canonical_text, "", f"Derived from ({len(e.sources)}):"]
    for s in e.sources:
        if "lesson" in s:
            lines.append(f"  - lesson {s['lesson']} ({s.get('status', '?')}"
                         + (f", added {s['created_at']}" if s.get("created_at") else "") + ")")
        else:
            lines.append(f"  - session {s['session']} of {s['project']}")
    if p.category == "lesson":
        lines += ["", f"Superseded members ({len(e.members)}):"]
        lines += [f"  - {m.id} (superseded {m.superseded_at})" for m in e.members] or ["  (none)"]
    return "\n".join(lines)
