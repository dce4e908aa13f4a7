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


# Lessons that differ only in where a NUL, an empty field or a tag boundary falls, or in how a
# character beyond the BMP is written (one code point, or two surrogates).
TRICKY = [("a", "b\0c", "t", "x", []), ("a\0b", "c", "t", "x", []), ("a", "b", "c\0t", "x", []),
          ("a", "b", "t", "x", ["\0"]), ("a", "b", "t", "x", ["", ""]), ("a", "b", "t", "x", [""]),
          ("a", "b", "t", "x", []), ("a", "b", "t", "x\0", []), ("a", "b", "t\0", "x", []),
          ("a", "b", "t", "x", ["a\0", "b"]), ("a", "b", "t", "x", ["a", "\0b"]), ("a", "b", "t", "x", ["a\0\0b"]),
          ("a", "b", "tx", "", []), ("a", "b", "", "tx", []), ("a", "b", "t", "x", ["x"]), ("a", "b", "t", "xx", []),
          ("a", "b", "t", "x\0x", []), ("a", "b", "t", "x", ["\U0001f600"]), ("a", "b", "t", "x", ["\ud83d\ude00"]),
          ("a", "b", "t", "x", ["\ud83d"]), ('["a", "b", "t", "x", []]', "", "", "", []), ("a", "b", "t", "x", ["\\u0000"])]


def _with(fields) -> LessonRow:
    lesson_id, created_at, trigger, action, tags = fields
    return _lesson(0)._replace(id=lesson_id, created_at=created_at, trigger=trigger, action=action, tags=tags)


def test_no_two_lessons_read_alike_wherever_their_fields_split():
    digests = lesson_digests([_with(fields) for fields in TRICKY])
    assert len(set(digests)) == len(TRICKY)
    assert digests == [lesson_digest(_with(fields)) for fields in TRICKY]  # alone or among others alike


def test_no_two_random_lessons_of_nuls_and_short_fields_read_alike():
    """Fields drawn from a few characters, NUL among them: different lessons, different digests;
    the same lesson, the same digest, whatever lessons come with it."""
    import random

    rng = random.Random(8)

    def field() -> str:
        return "".join(rng.choice("a\0b") for _ in range(rng.randrange(3)))

    drawn = [(field(), field(), field(), field(), [field() for _ in range(rng.randrange(3))]) for _ in range(3000)]
    digests = lesson_digests([_with(fields) for fields in drawn])
    by_digest = {}
    for fields, digest in zip(drawn, digests):
        assert by_digest.setdefault(digest, fields) == fields
    assert len(by_digest) > 1000
    shuffled = list(range(len(drawn)))
    rng.shuffle(shuffled)
    assert lesson_digests([_with(drawn[k]) for k in shuffled]) == [digests[k] for k in shuffled]


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


def _framed_state(lessons, counts, holders, words) -> bytes:
    from mgcp.operations import framed

    return framed.frame({"rules": RULES, "lessons": len(lessons), "words": words},
                        [b"".join(lesson_digests(lessons)), np.array(counts, dtype="<i4").tobytes(),
                         np.array(holders, dtype="<i4").tobytes()])


@pytest.mark.parametrize("counts, holders", [([2, 1], [1, 0, 2]), ([1, 2], [0, 2, 2]), ([2, 1], [0, 3, 1]),
                                             ([3, 0], [0, 1, 2]), ([2, 2], [0, 1, 2])])
def test_a_kept_word_index_whose_parts_disagree_is_ignored(counts, holders):
    """A state intact as bytes whose word's lessons do not rise, a lesson past the lessons kept, a
    word with no lesson or counts that do not add up is ignored: the index is read anew."""
    lessons = [_lesson(i) for i in range(3)]
    kept = _framed_state(lessons, counts, holders, ["pool", "cache"])
    index = LessonWords(lessons, kept)
    assert index.read == 3
    _same_index(index, LessonWords(lessons))
    # the same lessons rising, as a kept state gives them, are taken as they are
    assert LessonWords(lessons, _framed_state(lessons, [2, 1], [0, 2, 1], ["pool", "cache"])).read == 0


def test_kept_lessons_whose_digests_share_their_first_8_bytes_are_read_again_never_taken_for_another():
    from mgcp.operations import lesson_words

    now = [bytes(8) + bytes([i]) * 8 for i in range(4)] + [bytes(range(16))]
    kept = b"".join([now[2], now[0], bytes(8) + b"\xff" * 8, now[4]])
    places = lesson_words._places(kept, b"".join(now))
    for digest, place in zip(now, places.tolist()):
        assert place == -1 or kept[16 * place:16 * place + 16] == digest
    assert places[4] == 3
    assert lesson_words._places(b"", b"".join(now)).tolist() == [-1] * 5


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
