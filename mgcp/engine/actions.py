"""Applying a finding's chosen option, the --auto policy, and undo.

Every option maps to an action below. Applying runs in one transaction inside
`store.recording()`, which captures each row the action touches; the captured before/after images
are stored in `rem_actions` so that `undo` can restore exactly those rows (and refuses if a later
change would be overwritten). Lesson edits go through versioning (`refine_lesson`); "delete" and
"archive" only change the lesson's lifecycle, so history is never destroyed.

A finding whose subject changed since it was raised (a lesson refined, merged, archived, deleted)
is marked stale instead of applied.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from mgcp.config import RemConfig
from mgcp.engine import review
from mgcp.engine.lessons import gate
from mgcp.errors import ConflictError, InvalidInputError, NotFoundError, SettledError
from mgcp.models import REJECTING_ACTIONS, AutoResult, FindingStatus, Lesson, LessonStatus, RemFinding, Todo
from mgcp.operations import BULK_ACTIONS, BULK_WORDS
from mgcp.persistence.store import Store
from mgcp.validation import MAX_TEXT, check_lesson_id, check_text, numeral



@dataclass
class Outcome:
    finding_id: str
    action: str
    status: str
    message: str
    changes: int = 0
    details: dict = field(default_factory=dict)


async def resolve(store: Store, config: RemConfig, finding_id: str, option: int,
                  input_text: str | None = None, selection: list[str] | None = None,
                  auto: bool = False, project_path: str | None = None, run_id: int | None = None,
                  merged: MergedSoFar | None = None) -> Outcome:
    """Apply option `option` (1-based) of a pending finding, in one write transaction with the
    check that it is still pending and still speaks: two answers to one finding apply it once, and
    the second gets a ConflictError. With `project_path`, only a finding that project's review may
    show is answered. The action is recorded under `run_id` (the --auto run applying it), else
    under the run that raised the finding. `merged`: the merges of the batch the answer is part of
    (an --auto run), which the finding is read after, and which take in this one's."""
    if project_path is not None:
        finding = await review.finding_for(store, project_path, finding_id)
    else:
        finding = await store.rem.get_finding(finding_id)
    if not 1 <= option <= len(finding.options):
        raise InvalidInputError(f"finding {finding.id} has options 1 to {len(finding.options)}; got {option}")
    chosen = finding.options[option - 1]
    if input_text is not None and not (chosen.needs_input or chosen.multi_select or chosen.action in OPTIONAL_INPUT):
        # an answer meant for another option (a refine's text sent with an archive) must not apply this one
        raise InvalidInputError(f"option {option} ({chosen.label}) takes no input; give it without, or choose "
                                "the option the input is for")
    if selection is not None and not chosen.multi_select:
        raise InvalidInputError(f"option {option} ({chosen.label}) takes no selection; give it without, or "
                                "choose the option the selection is for")
    if input_text is not None:  # kept with the answer as given: screened as stored text is
        check_text("the input", input_text, required=False, limit=4 * MAX_TEXT)
    if chosen.needs_input and not input_text and selection is None and chosen.action not in OPTIONAL_INPUT:
        raise InvalidInputError(f"option {option} ({chosen.label}) needs input: {chosen.needs_input}")
    executor = ACTIONS.get(chosen.action)
    if executor is None and chosen.action != "skip":
        raise InvalidInputError(f"option {option} has an unknown action {chosen.action!r}")
    stale = None
    async with store.recording() as changes:
        # BEGIN IMMEDIATE holds the write lock from here on: nobody can answer the finding or
        # change its subject between these checks and the action.
        current = await store.rem.get_finding(finding.id)
        if current.status != FindingStatus.pending:
            raise SettledError(f"finding {finding.id} is already {current.status.value}"
                                + (f" (option {current.chosen_option})" if current.chosen_option else "")
                                + "; nothing was applied")
        if chosen.action == "skip":
            return Outcome(finding.id, "skip", "pending", "skipped; the finding stays pending")
        read = finding if merged is None else await merged.left(store, finding)
        stale = "its lessons were merged into one already" if read is None else await review.is_stale(store, read)
        if stale:
            await store.rem.set_finding_status(finding.id, FindingStatus.stale)
        else:
            message, details = await executor(store, config, read, input_text, selection)
            if merged is not None and details.get("superseded"):
                await merged.note(store, read.subject, details)
            status = FindingStatus.rejected if chosen.action in REJECTING_ACTIONS else FindingStatus.applied
            await store.rem.set_finding_status(finding.id, status, option, input_text)
            if finding.kind == "reinforced_duplicates" and status == FindingStatus.rejected:
                from mgcp.operations.duplicate_detection import pair_fingerprints

                # its lessons kept apart: duplicate detection's findings about their pairs ask nothing now
                await store.rem.retire(pair_fingerprints(finding.subject))
            lesson_changes = [c for c in changes if c["table"] != "rem_findings"]
            await store.rem.record_action(finding.id, finding.run_id if run_id is None else run_id,
                                          chosen.action, lesson_changes, auto)
    if stale:
        raise ConflictError(f"finding {finding.id} is stale: {stale}; run REM again for a fresh finding")
    return Outcome(finding.id, chosen.action, status.value, message, len(lesson_changes), details)


# -- the actions ---------------------------------------------------------------------------------

def _lesson(finding: RemFinding) -> str:
    return finding.data.get("lesson") or next(iter(finding.subject))


async def _archive(store, config, finding, text, selection):
    lesson_id = _lesson(finding)
    await store.lessons.set_lifecycle(lesson_id, LessonStatus.archived, reason=f"REM {finding.kind}")
    return f"archived {lesson_id} (out of retrieval, kept in history)", {}


async def _delete(store, config, finding, text, selection):
    lesson_id = _lesson(finding)
    await store.lessons.set_lifecycle(lesson_id, LessonStatus.deleted, reason=f"REM {finding.kind}")
    return f"deleted {lesson_id} (its history is kept; `mgcp rem undo {finding.id}` restores it)", {}


def _staleness_reason(finding: RemFinding) -> str:
    """Why a staleness finding's lesson is refined: what the scan found, in the finding's words (its
    kind first, then any other reason it names)."""
    data = finding.data
    said = {
        "stale_unused": f"never retrieved in the {data.get('age_days')} days since it was created",
        "popular_unrefined": (f"retrieved {data.get('usage_count')} times but not refined for "
                              f"{data.get('unrefined_days')} days"),
        "unmatched_trigger": "trigger keywords matched no recent query",
    }
    reasons = [finding.kind] + [r for r in data.get("reasons") or [] if r != finding.kind]
    return "REM staleness scan: " + "; ".join(said.get(r, r.replace("_", " ")) for r in reasons)


async def _update_trigger(store, config, finding, text, selection):
    lesson_id = _lesson(finding)
    trigger = check_text("trigger", text, limit=1000)
    gate(trigger, None, required=False)
    await store.lessons.refine(lesson_id, reason=_staleness_reason(finding), trigger=trigger)
    return f"refined {lesson_id} with a new trigger", {}


async def _refine(store, config, finding, text, selection):
    lesson_id = _lesson(finding)
    action = check_text("action", text)
    gate(None, action, required=False)
    await store.lessons.refine(lesson_id, reason=f"REM {finding.kind}: reviewed and refined", action=action)
    return f"refined {lesson_id} with a new action", {}


async def _reject(store, config, finding, text, selection):
    return "kept as is; this finding will not be raised again unless its subject changes", {}


async def _merge(store, config, finding, text, selection):
    canonical_id, other_id = finding.data["canonical"], finding.data["other"]
    canonical, other = await store.lessons.get(canonical_id), await store.lessons.get(other_id)
    rels = {r.target: r.model_dump() for r in canonical.relationships}
    for r in other.relationships:
        if r.target not in rels and r.target not in (canonical_id, other_id):
            rels[r.target] = r.model_dump()
    examples = list(canonical.examples) + [e for e in other.examples if e not in canonical.examples]
    similarity = finding.data.get("similarity")
    await store.lessons.refine(
        canonical_id,
        reason=f"merged duplicate {other_id}" + (f" (similarity {similarity:.2f})" if similarity else ""),
        tags=sorted(set(canonical.tags) | set(other.tags)), examples=examples,
        relationships=list(rels.values()))
    await store.lessons.set_lifecycle(other_id, LessonStatus.superseded, reason="merged by REM",
                              superseded_by=canonical_id)
    repointed = []
    for lesson in await store.lessons.linking_to(other_id):
        if lesson.id == other_id:
            continue
        new, seen = [], set()
        for r in lesson.relationships:
            target = canonical_id if r.target == other_id else r.target
            if target == lesson.id or target in seen:
                continue
            seen.add(target)
            new.append({**r.model_dump(), "target": target})
        await store.lessons.set_relationships(lesson.id, new)
        repointed.append(lesson.id)
    return (f"merged {other_id} into {canonical_id}; {other_id} is archived as superseded"
            + (f"; re-pointed links from {', '.join(repointed)}" if repointed else ""),
            {"canonical": canonical_id, "superseded": other_id, "repointed": repointed})


async def _delete_one(store, config, finding, text, selection):
    pair = [finding.data["canonical"], finding.data["other"]]
    target = (text or "").strip()
    if numeral(target) and 1 <= int(target) <= 2:
        target = pair[int(target) - 1]
    if target not in pair:
        raise InvalidInputError(f"name the lesson to delete: {pair[0]} or {pair[1]}")
    await store.lessons.set_lifecycle(target, LessonStatus.deleted, reason="duplicate removed by REM")
    return f"deleted {target} (history kept)", {}


async def _link(store, members: list[str]) -> list[tuple[str, str]]:
    """Link every pair of `members` not yet related: a parent and its child already are."""
    parent = {m: (await store.lessons.get(m)).parent_id for m in members}
    made = []
    for i, a in enumerate(members):
        for b in members[i + 1:]:
            if b != parent[a] and a != parent[b] and \
                    await store.lessons.link(a, b, "related", 0.5, ["linked by REM community detection"]):
                made.append((a, b))
    return made


def _members(finding: RemFinding) -> list[str]:
    """The lessons a cluster finding's "link them all" links."""
    return finding.data.get("members") or list(finding.subject)


async def _link_all(store, config, finding, text, selection):
    members = _members(finding)
    made = await _link(store, members)
    return f"linked {len(members)} lessons ({len(made)} new links)", {"links": made}


async def _link_subset(store, config, finding, text, selection):
    choices = finding.data.get("members") or finding.data.get("suggested") or list(finding.subject)
    picked = selection if selection is not None else _parse_selection(text, choices)
    if finding.kind == "orphan":
        lesson = finding.data["lesson"]
        bad = [p for p in picked if p not in choices]
        if bad or not picked:
            raise InvalidInputError(f"pick one or more of: {', '.join(choices)}")
        made = [(lesson, t) for t in picked if await store.lessons.link(lesson, t, "related", 0.5)]
        return f"linked {lesson} to {', '.join(picked)}", {"links": made}
    if len(picked) < 2 or any(p not in choices for p in picked):
        raise InvalidInputError(f"pick two or more of: {', '.join(choices)}")
    made = await _link(store, picked)
    return f"linked {len(picked)} lessons ({len(made)} new links)", {"links": made}


def _parse_selection(text: str | None, choices: list[str]) -> list[str]:
    """'1,3' (1-based numbers) or 'id-a id-b' (ids) -> ids."""
    picked = []
    for token in re.split(r"[\s,]+", (text or "").strip()):
        if not token:
            continue
        if numeral(token) and 1 <= int(token) <= len(choices):
            picked.append(choices[int(token) - 1])
        else:
            picked.append(token)
    return list(dict.fromkeys(picked))


async def _link_suggested(store, config, finding, text, selection):
    lesson = finding.data["lesson"]
    made = [(lesson, t) for t in finding.data.get("suggested", [])
            if await store.lessons.link(lesson, t, "related", 0.5, ["suggested by REM"])]
    return f"linked {lesson} to {len(made)} suggested lesson(s)", {"links": made}


DRAFT_FIELDS = ("id", "trigger", "action", "rationale", "tags")


def draft_edits(text: str | None) -> dict:
    """The user's edits to a drafted lesson: a JSON object overrides fields; plain text replaces
    the action. An edit that would be lost or mangled (a misspelt field, tags given as one string)
    is refused rather than half-applied."""
    if not text or not text.strip():
        return {}
    text = text.strip()
    if not text.startswith("{"):
        return {"action": text}
    try:
        edits = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"the draft edits are not valid JSON ({exc.msg})") from None
    if not isinstance(edits, dict):
        raise InvalidInputError("the draft edits must be a JSON object")
    problems = []
    unknown = [k for k in edits if k not in DRAFT_FIELDS]
    if unknown:
        problems.append(f"the draft edits name an unknown field{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))} (a draft has {', '.join(DRAFT_FIELDS[:-1])} "
                        f"and {DRAFT_FIELDS[-1]})")
    for key in ("id", "trigger", "action", "rationale"):
        value = edits.get(key)
        if key in edits and not isinstance(value, str) and not (key == "rationale" and value is None):
            problems.append(f"a draft's {key} must be a string (got {json.dumps(value, ensure_ascii=False)[:80]})")
        elif key == "id" and isinstance(value, str) and not value.strip():
            # an empty id would silently fall back to the draft's own: say so instead
            problems.append("the draft edits give an empty id: name one, or leave id out to take the draft's")
    tags = edits.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        problems.append('a draft\'s tags must be a list of strings, e.g. ["testing"] '
                        f"(got {json.dumps(tags, ensure_ascii=False)[:80]})")
    if problems:
        raise InvalidInputError("; ".join(problems))
    return edits


# How to edit a draft, in the words of each surface: the option takes the edits as its input.
EDIT_HINT = ('edit it by giving the option JSON input such as {"action": "..."} (`--input` of '
             '`mgcp rem resolve`, the prompt of `mgcp rem review`, `input` of the MCP tool rem_answer)')


async def _draft_lesson(store, config, finding, text, selection):
    """Add the drafted lesson, with the user's edits. A draft the gate refuses says how to edit it.
    An id the user named must be free (a lesson is never added under an id they did not give); the
    draft's own id, when taken, gets a number (-2, -3, ...) and the message says so."""
    edits = draft_edits(text)
    draft = {**(finding.data.get("draft") or {}), **edits}
    try:
        lesson_id = check_lesson_id(draft.get("id") or f"lesson-{finding.id}")
        trigger, action = gate(draft.get("trigger"), draft.get("action"))
        rationale = check_text("rationale", draft.get("rationale"), required=False)
        tags = [check_text("tag", t, limit=100) for t in draft.get("tags") or []]
    except InvalidInputError as exc:
        what = "the drafted lesson with these edits" if edits else "the drafted lesson as it is"
        raise InvalidInputError(f"{what} cannot be added: {exc}; {EDIT_HINT}") from None
    held = (await store.queue.same_texts([(trigger, action)], action_only=True)).get((trigger, action))
    if held is not None:  # another finding's draft (or a person) already wrote it, perhaps under another trigger
        raise ConflictError(f"finding {finding.id} is stale: lesson {held} already says this (the same action)")
    base, n = lesson_id, 2
    if edits.get("id") and await store.lessons.exists(lesson_id):
        raise InvalidInputError(f"lesson id {lesson_id!r} is taken (by an active, archived or deleted lesson): "
                                "name another id in the edits, or leave id out to take the draft's, numbered")
    while await store.lessons.exists(lesson_id):
        lesson_id, n = f"{base}-{n}", n + 1
    lesson = await store.lessons.add(lesson_id, trigger, action, rationale, tags=tags)
    renamed = f" (the draft's id {base!r} is taken)" if lesson.id != base else ""
    return f"added lesson {lesson.id}{renamed}", {"lesson": lesson.id}


async def _todo_change(store, finding, close: bool):
    project = await store.context.project_by_id(finding.project_id)
    content = finding.data["todo"]
    todos = [t for t in project.todos]
    match = [t for t in todos if t.content == content and t.status != "completed"]
    if not match:
        raise ConflictError(f"finding {finding.id} is stale: the todo {content!r} is no longer pending")
    if close:
        new = [t.model_copy(update={"status": "completed"}) if t.content == content else t for t in todos]
    else:
        new = [t for t in todos if t.content != content]
    await store.context.save(project.project_path, todos=[Todo(**t.model_dump()) for t in new])
    return project


async def _close_todo(store, config, finding, text, selection):
    await _todo_change(store, finding, close=True)
    return f"closed the todo {finding.data['todo']!r} (a new context save records it)", {}


async def _drop_todo(store, config, finding, text, selection):
    await _todo_change(store, finding, close=False)
    return f"dropped the todo {finding.data['todo']!r} (a new context save records it)", {}


async def _apply_all(store, config, finding, text, selection):
    """A summary's bulk answer: each finding it stands for gets the summary's bulk action, as one
    action (so one undo takes all of it back). A finding whose lessons changed since the run, or
    that a person answered to keep apart meanwhile (`review.kept_apart`), is left out and counted;
    what the batch itself merged is not such a change (`MergedSoFar`): a set of copies ends as one
    lesson."""
    action = finding.data.get("bulk_action")
    executor = ACTIONS.get(action) if action in BULK_ACTIONS.values() else None
    if executor is None:
        raise InvalidInputError(f"finding {finding.id} has no bulk answer")
    from mgcp.operations.duplicate_detection import pair_fingerprints

    done = skipped = kept_apart = 0
    kept = await review.kept_apart(store) if action == "merge" else frozenset()
    merged = MergedSoFar(kept)
    for item in finding.data.get("items", []):
        member = await merged.left(store, finding.model_copy(update={"kind": item["kind"], "data": item["data"],
                                                                     "subject": item["subject"]}))
        if member is None:  # its two lessons are one already
            done += 1
            continue
        if pair_fingerprints(item["subject"]) & kept:
            kept_apart += 1
            continue
        if await review.is_stale(store, member):
            skipped += 1
            continue
        _, details = await executor(store, config, member, text, selection)
        if details.get("superseded"):
            await merged.note(store, member.subject, details)
        done += 1
    left = f"; {skipped} left out (changed since the run)" if skipped else ""
    left += f"; {kept_apart} left out (a person answered to keep them apart)" if kept_apart else ""
    return f"{BULK_WORDS[action]}: {done} done{left}", {"done": done, "skipped": skipped + kept_apart}


class MergedSoFar:
    """What the merges of one batch (a bulk answer, an --auto run) did so far, so that a finding
    raised before them is read as the batch left its lessons. A set of copies is raised as pairs
    with one lesson of the set, which each merge refines: the version a merge of the batch made is
    expected in place of the one it refined, and a lesson the batch merged away is followed to the
    lesson kept, so that the set ends as one lesson in one batch. Only copies are followed: two
    lessons each alike to a third need not be alike to each other, and a pair a person kept apart
    (`kept`: `review.kept_apart`) is never made by following."""

    def __init__(self, kept: frozenset[str] = frozenset()):
        self.kept = kept
        self.versions: dict[str, tuple[int, int]] = {}  # a lesson the batch refined: its version before, after
        self.into: dict[str, str] = {}  # a lesson the batch merged away -> the lesson kept

    def _kept(self, lesson_id: str) -> str:
        while lesson_id in self.into:
            lesson_id = self.into[lesson_id]
        return lesson_id

    async def left(self, store: Store, finding: RemFinding) -> RemFinding | None:
        """A copy's finding as the batch left its lessons (any other finding as raised: a lesson
        the batch changed reads as changed, stale); None when its two lessons are one already. A
        merged-away lesson is followed to the one kept, and then which of the two to keep is chosen
        again, as duplicate detection chooses it (the most used, ...), among the lessons as they
        were before the batch."""
        from mgcp.operations.duplicate_detection import canonical_order, pair_fingerprints

        data = finding.data
        if not ("canonical" in data and "other" in data and data.get("copy")):
            return finding
        keep, other = self._kept(data["canonical"]), self._kept(data["other"])
        if keep == other:
            return None
        if (keep, other) != (data["canonical"], data["other"]):
            pair = canonical_order(*[await self._before(store, lesson_id) for lesson_id in (keep, other)])
            if pair_fingerprints({lesson.id: lesson.version for lesson in pair}) & self.kept:
                return finding  # kept apart by a person: as raised, it reads as changed (stale)
            keep, other = pair[0].id, pair[1].id
        data = {**data, "canonical": keep, "other": other}
        subject: dict[str, int] = {}
        for lesson_id, version in finding.subject.items():
            target = self._kept(lesson_id)
            before, after = self.versions.get(target, (None, None))
            subject[target] = after if after is not None and (target != lesson_id or version == before) else version
        return finding.model_copy(update={"data": data, "subject": subject})

    async def _before(self, store: Store, lesson_id: str) -> Lesson:
        """The lesson with the version it had before the batch's merges refined it (those are not
        refinements that make it the one to keep)."""
        lesson = await store.lessons.get(lesson_id)
        return lesson.model_copy(update={"version": self.versions.get(lesson_id, (lesson.version,))[0]})

    async def note(self, store: Store, subject: dict[str, int], details: dict) -> None:
        """Take in what a merge of the batch did: `details` (its lessons superseded and the one
        kept) and the versions of the lessons it read (`subject`) now."""
        superseded, kept = details.get("superseded"), details.get("canonical")
        for other in [superseded] if isinstance(superseded, str) else superseded or []:
            # a lesson the batch merged into this one earlier names the lesson kept now, not a
            # superseded one (no chain of supersessions for `lesson show` to follow)
            for earlier in [lesson_id for lesson_id, into in self.into.items() if into == other]:
                await store.lessons.set_lifecycle(earlier, LessonStatus.superseded, reason="merged by REM",
                                                  superseded_by=kept)
                self.into[earlier] = kept
            self.into[other] = kept
        states = await store.queue.lesson_states(subject)
        for lesson_id, version in subject.items():
            if lesson_id in states and states[lesson_id][0] != version:
                self.versions[lesson_id] = (self.versions.get(lesson_id, (version,))[0], states[lesson_id][0])


async def _supersede_duplicates(store, config, finding, text, selection):
    """A reinforced lesson's other members merged into the kept one, one by one, as one action."""
    canonical = finding.data["canonical"]
    merged = []
    for other in finding.data["others"]:
        pair = finding.model_copy(update={"data": {"canonical": canonical, "other": other}})
        await _merge(store, config, pair, text, selection)
        merged.append(other)
    if finding.data.get("pattern"):  # the pattern reinforces the lesson kept, not one superseded
        await store.patterns.repoint(finding.data["pattern"], merged, canonical)
    return (f"superseded {', '.join(merged)} by {canonical} (their tags, examples and links merged in)",
            {"canonical": canonical, "superseded": merged})


async def _archive_one(store, finding, which: str):
    lesson_id = finding.data[which]
    kept = finding.data["newer" if which == "older" else "older"]
    await store.lessons.set_lifecycle(lesson_id, LessonStatus.archived,
                                      reason=f"REM contradiction: {kept} kept instead")
    return f"archived {lesson_id}; {kept} stays (undo restores it)", {"archived": lesson_id, "kept": kept}


async def _archive_older(store, config, finding, text, selection):
    return await _archive_one(store, finding, "older")


async def _archive_newer(store, config, finding, text, selection):
    return await _archive_one(store, finding, "newer")


async def _refine_one(store, config, finding, text, selection):
    """Input "ID: new action" (or "1: ..." for the older, "2: ..." for the newer)."""
    pair = [finding.data["older"], finding.data["newer"]]
    target, _, action = (text or "").partition(":")
    target = target.strip()
    if numeral(target) and 1 <= int(target) <= 2:
        target = pair[int(target) - 1]
    if target not in pair or not action.strip():
        raise InvalidInputError(f'give the lesson and its new action: "{pair[0]}: ..." or "{pair[1]}: ..."')
    await store.lessons.refine(target, reason="REM contradiction: reviewed and refined",
                               action=check_text("action", action))
    return f"refined {target} with a new action", {"refined": target}


ACTIONS = {
    "archive": _archive, "delete": _delete, "update_trigger": _update_trigger, "refine": _refine,
    "keep": _reject, "keep_both": _reject, "project_specific": _reject, "merge": _merge,
    "apply_all": _apply_all, "delete_one": _delete_one, "link_all": _link_all, "link_subset": _link_subset,
    "link_suggested": _link_suggested, "draft_lesson": _draft_lesson, "close_todo": _close_todo,
    "drop_todo": _drop_todo,
    "supersede_duplicates": _supersede_duplicates, "archive_older": _archive_older,
    "archive_newer": _archive_newer, "refine_one": _refine_one,
}
OPTIONAL_INPUT = {"draft_lesson"}
MERGING = ("merge", "supersede_duplicates")


async def _confirm(store, config, finding, text, selection):
    """A speculative lesson confirmed in review: its confidence rises to the default (a new version)."""
    from mgcp.quality import DEFAULT_CONFIDENCE

    lesson_id = _lesson(finding)
    await store.lessons.refine(lesson_id, reason=f"REM {finding.kind}: confirmed in review",
                               confidence=DEFAULT_CONFIDENCE)
    return f"confirmed {lesson_id} (confidence {DEFAULT_CONFIDENCE})", {}


ACTIONS["confirm"] = _confirm


# -- --auto ---------------------------------------------------------------------------------------

AUTO_CLUSTER = 4  # the largest cluster --auto links pairwise (6 links)


def auto_decision(finding: RemFinding, config: RemConfig, project_path: str | None) -> str | None:
    """Why --auto may apply the finding's recommended option, or None when a person must decide.

    Auto never deletes, never drafts lessons from extraction, never answers a contradiction, and
    merges only at or above auto_merge_threshold, or true copies: lessons whose whole triggers and
    actions are equal once normalized (pattern reinforcement); never two lessons whose actions say
    opposite things, or order the same words the other way round ("A before B" / "B before A"), or
    give different numbers ("20" / "200"), however alike their words. Links are additive and
    undoable, but many at once are not conservative: an orphan's few suggested links are applied, a
    cluster's links only when it has at most AUTO_CLUSTER lessons (a larger community is more often
    a theme than a set of rules that belong linked pairwise: a person decides)."""
    option = finding.options[finding.recommended - 1]
    if finding.kind == "summary":
        return None  # a bulk answer is a person's decision
    if finding.operation == "contradiction_scan":
        return None  # which of two opposite rules holds is a person's decision
    if option.action == "supersede_duplicates" and finding.data.get("normalized_equal"):
        return "the copies' triggers and actions are equal once normalized"
    if option.action == "merge":
        if finding.data.get("reordered") or _opposed(finding, config, project_path):
            return None  # "prefer A over B" / "prefer B over A": alike in words, opposite in meaning
        if finding.data.get("numbers") or _numbers_apart(finding):
            return None  # "max_connections 20" / "200": alike in every word, not in value
        threshold = config.operation("duplicate_detection", project_path)["auto_merge_threshold"]
        similarity = float(finding.data.get("similarity", 0))
        return f"similarity {similarity:.2f} >= {threshold:.2f}" if similarity >= threshold else None
    if option.action == "link_suggested":
        return "links are additive"
    if option.action == "link_all":
        members = len(_members(finding))
        return f"links are additive ({members} lessons)" if members <= AUTO_CLUSTER else None
    return None


def _numbers_apart(finding: RemFinding) -> bool:
    """Whether the actions of the two lessons the finding holds give different numbers (read from
    its data, so that a finding raised before findings said so is judged the same way)."""
    from mgcp.operations.duplicate_detection import numbers_apart

    actions = [lesson.get("action") for lesson in (finding.data.get("lessons") or {}).values()]
    return len(actions) == 2 and numbers_apart(*actions)


def _opposed(finding: RemFinding, config: RemConfig, project_path: str | None) -> bool:
    from mgcp.operations.contradiction_scan import opposed
    from mgcp.operations.duplicate_detection import labelled_apart, words_apart

    actions = [lesson.get("action") or "" for lesson in (finding.data.get("lessons") or {}).values()]
    claim_at = float(config.operation("contradiction_scan", project_path)["claim_threshold"])
    return len(actions) == 2 and (labelled_apart(*actions) or words_apart(*actions)
                                  or opposed(actions[0], actions[1], claim_at))


async def apply_auto(store: Store, config: RemConfig, project_path: str, findings: list[RemFinding],
                     run_id: int | None = None) -> tuple[list[AutoResult], list[AutoResult], list[AutoResult]]:
    """Apply what the policy allows, as actions of the run `run_id` (so that `rem undo --run` of
    that run takes them back); returns (applied, left pending, settled elsewhere). A finding
    whose earlier answer was undone is left pending: --auto never gives again an answer a person
    took back. A finding that another process answered or found stale meanwhile (another --auto, a
    person reviewing), or that an answer of this one made stale (a merge of its lesson), is skipped
    and listed as such, not as pending: a concurrent --auto is no failure; so is one the policy left
    to a person that this run's answers made stale."""
    from mgcp.operations.duplicate_detection import pair_fingerprints

    applied, left, settled = [], [], []
    undone = await store.rem.undone(findings)
    kept = await review.kept_apart(store)
    merged = MergedSoFar(kept)  # a set of copies raised as pairs is merged whole in one run
    # Links before merges: a merge re-points links to the lesson it supersedes, whereas a link
    # finding whose suggested lesson was merged first would only go stale.
    for finding in sorted(findings, key=lambda f: f.options[f.recommended - 1].action in MERGING):
        why = auto_decision(finding, config, project_path)
        entry = AutoResult(id=finding.id, kind=finding.kind, title=finding.title,
                           option=finding.options[finding.recommended - 1].label)
        if why is None:  # said only where a reader would wonder: a pair alike in words left unmerged
            opposite = finding.data.get("opposite") or finding.data.get("reordered")
            left.append(entry.model_copy(update={"result": "its actions may say opposite things: a person decides"
                                                 if opposite else None}))
            continue
        if finding.id in undone:  # taking an answer back is a person's say: theirs to give again
            left.append(entry.model_copy(update={"result": "an earlier answer was undone: a person decides"}))
            continue
        if finding.options[finding.recommended - 1].action in MERGING and pair_fingerprints(finding.subject) & kept:
            left.append(entry.model_copy(update={"result": "a person answered to keep some of these lessons "
                                                           "apart: a person decides"}))
            continue
        try:
            outcome = await resolve(store, config, finding.id, finding.recommended, auto=True, run_id=run_id,
                                    merged=merged)
            applied.append(entry.model_copy(update={"why": why, "result": outcome.message}))
        except SettledError as exc:
            settled.append(entry.model_copy(update={"result": str(exc)}))
        except ConflictError as exc:  # stale (marked so: no longer pending), or refused and still pending
            pending = (await store.rem.get_finding(finding.id)).status == FindingStatus.pending
            (left if pending else settled).append(entry.model_copy(update={"result": str(exc)}))
    if applied:  # a finding left to a person that this run's merges made stale asks nothing now
        still = []
        for entry in left:
            async with store.transaction():
                finding = await store.rem.get_finding(entry.id)
                why = await review.is_stale(store, finding) if finding.status == FindingStatus.pending else None
                if why:
                    await store.rem.set_finding_status(finding.id, FindingStatus.stale)
            if why:
                settled.append(entry.model_copy(update={"result": f"stale after this run's answers: {why}"}))
            else:
                still.append(entry)
        left = still
    return applied, left, settled


# -- undo -----------------------------------------------------------------------------------------

async def undo_finding(store: Store, finding_id: str, force: bool = False, confirmed: list[str] | None = None,
                       project_path: str | None = None) -> str:
    """Restore what the finding's actions changed and make it pending again (--auto leaves it to a
    person from then on). A later change of content makes it refuse (ConflictError listing what
    would be overwritten) unless `force` (`confirmed`: see `_undo`). With `project_path`, only a
    finding that project's review may show is undone (as `resolve`)."""
    async with store.transaction():  # read under the write lock: two undos of one finding never both run
        finding = (await review.finding_for(store, project_path, finding_id) if project_path is not None
                   else await store.rem.get_finding(finding_id))
        actions = await store.rem.actions_for(finding_id=finding.id)
        if not actions:
            raise InvalidInputError(f"finding {finding.id} has no applied action to undo ({finding.status.value})")
        stale = await _undo(store, actions, force, confirmed)
    if finding.id in stale:  # a forced undo over a later change of its subject
        return (f"undid {', '.join(a['action'] for a in actions)} of finding {finding.id}; it no longer applies "
                f"({stale[finding.id]}), so it is marked stale: a later run raises it again if it still holds")
    return (f"undid {', '.join(a['action'] for a in actions)} of finding {finding.id}; it is pending again, "
            "for a person to answer (--auto leaves it)")


async def undo_run(store: Store, run_id: int, force: bool = False, confirmed: list[str] | None = None,
                   project_path: str | None = None) -> str:
    """Undo every action of a run (the answers to its findings given by a person, what it applied
    with --auto, and its automatic outputs), in one transaction (`force`, `confirmed`: see `_undo`).
    With `project_path`, only a run of that project is undone."""
    async with store.transaction():  # read under the write lock, as `undo_finding`
        run = await store.rem.get_run(run_id)
        if project_path is not None and run["project_id"] != (await store.queue.project(project_path)).project_id:
            owner = (await store.context.project_by_id(run["project_id"])).project_path
            raise NotFoundError(f"REM run {run_id} belongs to project {owner}; undo it from there (--project {owner})")
        actions = await store.rem.actions_for(run_id=run_id)
        if not actions:
            raise InvalidInputError(f"run {run_id} has no applied action to undo")
        stale = await _undo(store, actions, force, confirmed)
    what = [f"{a['action']} ({'finding ' + a['finding_id'] if a['finding_id'] else 'the run itself'}"
            f"{', by --auto' if a['auto'] and a['finding_id'] else ''})" for a in actions]
    what += [f"finding {fid} no longer applies ({why}), so it is marked stale" for fid, why in stale.items()]
    return f"undid {len(actions)} action(s) of run {run_id}: " + "; ".join(what)


async def _undo(store: Store, actions: list[dict], force: bool, confirmed: list[str] | None = None) -> dict[str, str]:
    """Restore what the actions (oldest first) changed as one set of changes: a row that several of
    them changed is compared once, with what the last of them left, so that only a change made
    since is named as a conflict. Forced, it overwrites the changes made since, but when
    `confirmed` lists those a person agreed to overwrite, any other found now refuses. Their
    findings are pending again, but those that no longer apply (a forced undo left their subject
    changed; the failure streak one is about ended meanwhile), which are stale: returns those,
    with why."""
    names = ", ".join(dict.fromkeys(action["action"] for action in actions))
    changes, reason = [c for action in actions for c in action["changes"]], f"forced undo of REM action {names}"
    try:
        await store.restore(changes, False, reason)  # a savepoint: refused, it writes nothing
    except ConflictError as exc:
        if not force:
            raise ConflictError("undo would overwrite later changes: " + "; ".join(exc.details)
                                + ". Nothing was undone; --force shows them and asks", details=exc.details) from None
        new = [c for c in exc.details if confirmed is not None and c not in confirmed]
        if new:  # changed again while the person looked at the list: they did not agree to overwrite this
            raise ConflictError("more changed since the overwrite was confirmed: " + "; ".join(new)
                                + ". Nothing was undone", details=exc.details) from None
        await store.restore(changes, True, reason)
    stale = {}
    for action in actions:
        await store.rem.mark_action_undone(action["id"])
        if action["finding_id"]:
            finding_id = action["finding_id"]
            why = await review.is_stale(store, await store.rem.get_finding(finding_id))
            if why:
                stale[finding_id] = why
            await store.rem.set_finding_status(finding_id, FindingStatus.stale if why else FindingStatus.pending)
    return stale
