"""What REM cycles keep of the indexes over the lessons (`kept_indexes`): the word index
(`LessonWords`) and what pattern reinforcement decided (`pattern_kept.Kept`). Built from what was
kept, each gives exactly what it gives built from nothing; a state made by other rules is ignored;
deleting it changes no result; a dry run keeps nothing."""

import json
import sqlite3

import numpy as np
import pytest

import planted
from clihelp import process_cli
from mgcp import engine
from mgcp.config import parse_config
from mgcp.models import LessonRow, LessonStatus
from mgcp.operations import pattern_kept
from mgcp.operations.lesson_words import RULES, LessonWords, lesson_digest, lesson_digests

WORDS = ["pool", "cache", "schema", "worker", "deploy", "release", "migration", "queue", "retry", "index"]


def _lesson(i: int, extra: str = "") -> LessonRow:
    return LessonRow(f"l{i:03d}", f"when {WORDS[i % 10]} {WORDS[(i * 3) % 10]}",
                     f"Check the {WORDS[(i * 7) % 10]} before {WORDS[(i + 1) % 10]} {extra}".strip(),
                     [WORDS[(i * 5) % 10], f"t{i % 7}"], (), 1, 0, f"2026-01-{1 + i % 28:02d}T00:00:00",
                     "2026-01-01T00:00:00")


def _same_index(a: LessonWords, b: LessonWords) -> None:
    words = {w for w in a.words if len(a.of(w))}
    assert words == {w for w in b.words if len(b.of(w))}
    for word in words | {"absent"}:
        assert np.array_equal(a.of(word), b.of(word)), word


def test_a_lesson_is_known_by_its_id_creation_time_and_texts():
    lesson = _lesson(1)
    digests = lesson_digests([lesson, lesson._replace(usage_count=9, version=4, last_refined="2026-05-01")])
    assert digests[0] == digests[1] == lesson_digest(lesson)
    for change in ({"id": "other"}, {"created_at": "2026-02-02T00:00:00"}, {"trigger": lesson.trigger + "!"},
                   {"action": lesson.action + " again"}, {"tags": lesson.tags[:1]}, {"tags": [" ".join(lesson.tags)]}):
        assert lesson_digests([lesson._replace(**change)])[0] != digests[0], change


def test_the_word_index_built_from_a_kept_one_is_the_one_built_from_nothing():
    lessons = [_lesson(i) for i in range(60)]
    kept = LessonWords(lessons).state()
    changed = [_lesson(i, "zebrafish lanterns") if i % 9 == 0 else lesson
               for i, lesson in enumerate(lessons) if i % 7 != 3] + [_lesson(i) for i in range(60, 66)]
    changed.sort(key=lambda lesson: lesson.id)
    again = LessonWords(changed, kept)
    assert again.read == 6 + 6 and again.gone == 9 + 6  # l045 changed and removed
    _same_index(again, LessonWords(changed))
    assert len(again.of("zebrafish")) == 6
    unchanged = LessonWords(lessons, kept)
    assert (unchanged.read, unchanged.gone) == (0, 0)
    _same_index(unchanged, LessonWords(lessons))
    # a word no lesson holds any more is not kept: without the zebrafish lessons, neither is the word
    without = [lesson for lesson in changed if "zebrafish" not in lesson.action]
    again = LessonWords(without, LessonWords(without, again.state()).state())
    assert "zebrafish" not in again.words and "zebrafish" in LessonWords(changed, kept).words
    _same_index(again, LessonWords(without))


@pytest.mark.parametrize("spoil", ["rules", "truncated", "grown", "garbage", "pointing nowhere", "reordered"])
def test_a_kept_word_index_made_otherwise_is_ignored(spoil):
    lessons = [_lesson(i) for i in range(30)]
    kept = LessonWords(lessons).state()
    if spoil == "rules":
        kept = kept.replace(RULES.encode(), b"0" * 32)
    elif spoil == "grown":
        kept = kept + bytes(4)
    elif spoil == "truncated":
        kept = kept[:-4]
    elif spoil == "garbage":
        kept = b"\xff" * 40
    elif spoil == "pointing nowhere":  # the last holder's number past the lessons kept
        kept = kept[:-4] + (2**31 - 1).to_bytes(4, "little")
    else:  # the same lessons in another order: their numbers mean other lessons
        lessons = lessons[::-1]
    index = LessonWords(lessons, kept)
    assert index.read == len(lessons)
    _same_index(index, LessonWords(lessons))


def test_a_kept_word_index_with_a_changed_byte_is_ignored():
    """Whichever byte of its digests, word counts or lessons changes, the whole state is ignored:
    never a lesson taken for changed while its entries stay, nor numbers that still fit read as
    other lessons or words."""
    lessons = [_lesson(i) for i in range(30)]
    kept = LessonWords(lessons).state()
    body = len(kept) - 16 * 30 - 4 * len(LessonWords(lessons).words) - 4 * len(LessonWords(lessons)._holders)
    for at in range(body, len(kept), 7):
        spoilt = kept[:at] + bytes([kept[at] ^ 1]) + kept[at + 1:]
        index = LessonWords(lessons, spoilt)
        assert index.read == len(lessons), at
        _same_index(index, LessonWords(lessons))


def test_a_kept_pattern_state_made_by_other_rules_is_ignored():
    digests = np.array([bytes(range(16)), bytes(16)], dtype="S16")
    kept = pattern_kept.Kept(pattern_kept.rules(3, ["decision"]), "m", digests, digests[::-1], digests,
                             np.array([1, 2], dtype=np.uint8), {"decision::x": ("x", None, None, "x", ["x"])})
    state = kept.state()
    assert pattern_kept.Kept.of(state, pattern_kept.rules(3, ["decision"])).same(kept)
    assert pattern_kept.Kept.of(state, pattern_kept.rules(2, ["decision"])) is None
    assert pattern_kept.Kept.of(state, pattern_kept.rules(3, ["decision", "note"])) is None
    assert pattern_kept.Kept.of(state[:-1], pattern_kept.rules(3, ["decision"])) is None
    spoilt = pattern_kept.Kept(kept.rules, "m", digests, digests[::-1], digests, np.array([1, 2], dtype=np.uint8),
                               {"decision::x": ("x", "l1", "not a digest", "x", ["x"])})
    assert pattern_kept.Kept.of(spoilt.state(), pattern_kept.rules(3, ["decision"])) is None


def test_a_kept_pattern_state_with_a_changed_byte_is_ignored():
    """A changed byte of its arrays (a lesson's digest, its cluster key's or action's, its status)
    makes the whole state be ignored, never read as another lesson or status."""
    digests = np.array([bytes(range(16)), bytes(16), bytes(range(1, 17))], dtype="S16")
    rules = pattern_kept.rules(3, ["decision"])
    state = pattern_kept.Kept(rules, "m", digests, digests[::-1], digests, np.array([1, 2, 1], dtype=np.uint8)).state()
    assert pattern_kept.Kept.of(state, rules) is not None
    for at in range(len(state) - 3 * 49, len(state)):
        assert pattern_kept.Kept.of(state[:at] + bytes([state[at] ^ 1]) + state[at + 1:], rules) is None, at
    assert pattern_kept.Kept.of(state + b"\0", rules) is None


# -- in the engine ----------------------------------------------------------------------------------

SETTINGS = {"enabled": True, "min_count": 2, "max_findings": 500}
CONFIG = parse_config({"rem": {"pattern_reinforcement": SETTINGS, "knowledge_extraction": {"enabled": True}}}, "t")
OPS = ["knowledge_extraction", "pattern_reinforcement"]
MAIN = "/work/app"
DECISIONS = ["Keep the pool at twenty connections", "Use pnpm workspaces for every package", "Ship on Tuesdays",
             "Retry the queue three times", "Index the schema before the release"]


async def _seed(store, start: int, count: int):
    for i in range(start, start + count):
        await store.context.register_session(MAIN, f"s{i}")
        await store.context.save(MAIN, notes=f"Day {i}. Warm the cache before the release. Check the worker pool.",
                                 decisions=[DECISIONS[i % 5], DECISIONS[(i // 2) % 5]])


async def _lessons(store, start: int, count: int):
    for i in range(start, start + count):
        await store.lessons.add(f"l{i:03d}", f"when {WORDS[i % 10]} {WORDS[(i * 3) % 10]}",
                                f"Check the {WORDS[(i * 7) % 10]} before {WORDS[(i + 1) % 10]}", tags=[WORDS[i % 4]])


async def _findings(store) -> list:
    report = await engine.run_cycle(store, CONFIG, MAIN, OPS)
    assert all(op.error is None for op in report.operations)
    rows = await store.db.fetchall(
        "SELECT cluster_key, text, lesson_id, canonical, reinforcement_count, derived_from FROM reinforced_patterns "
        "ORDER BY cluster_key")
    return [[(f.kind, f.fingerprint, f.title, json.dumps(f.data, sort_keys=True)) for f in report.findings],
            [tuple(r) for r in rows]]


def _kept(path) -> list:
    conn = sqlite3.connect(path)
    try:
        return [name for (name,) in conn.execute("SELECT name FROM kept_indexes ORDER BY name")]
    finally:
        conn.close()


def test_a_repeat_cycle_from_the_kept_indexes_finds_what_one_without_them_finds(db, run, tmp_path):
    async def seed(store):
        await _lessons(store, 0, 40)
        await _seed(store, 1, 8)

    run(db, seed)
    run(db, _findings)
    assert _kept(db) == ["lesson_words", "pattern_reinforcement"]

    async def change(store):  # lessons refined, archived, added (one holding a decision), more history
        await store.lessons.refine("l003", "sharper", action="Index the schema before the release, always")
        await store.lessons.set_lifecycle("l004", LessonStatus.archived, "not needed")
        await store.lessons.add("ship", "when shipping", "Ship on Tuesdays", tags=["release"])
        await _lessons(store, 40, 3)
        await _seed(store, 9, 3)

    for name, act in [("changed", change), ("unchanged", None)]:
        if act:
            run(db, act)
        other = planted.copy_without(db, tmp_path / f"{name}.db", "kept_indexes")
        assert run(db, _findings) == run(other, _findings)
    # undoing the changed cycle's run puts the patterns back as before it: the kept decisions no
    # longer hold for them
    async def undo(store):
        last = (await store.rem.last_run((await store.queue.project(MAIN)).project_id))["id"]
        from mgcp.engine import actions

        await actions.undo_run(store, last - 1)
        await _seed(store, 12, 1)
    run(db, undo)
    other = planted.copy_without(db, tmp_path / "undone.db", "kept_indexes")
    assert run(db, _findings) == run(other, _findings)


def test_a_dry_run_keeps_no_index_and_a_run_from_the_cli_keeps_them(db, run, tmp_path):
    async def seed(store):
        await _lessons(store, 0, 10)
        await _seed(store, 1, 4)

    run(db, seed)
    config = tmp_path / "rem-config.yaml"
    config.write_text("rem:\n  pattern_reinforcement:\n    enabled: true\n    min_count: 2\n")
    mgcp = process_cli(db, config)

    ops = ["--op", "pattern_reinforcement", "--op", "knowledge_extraction"]
    done = mgcp("rem", "run", "--project", MAIN, *ops, "--auto", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert _kept(db) == []
    done = mgcp("rem", "run", "--project", MAIN, *ops, "--json")
    assert done.returncode == 0, done.stderr
    assert _kept(db) == ["lesson_words", "pattern_reinforcement"]
