"""`mgcp.operations.copies`: the lessons whose action another lesson also has, once normalised,
grouped by numpy from the actions' word ids; the same groups as comparing each action's stems."""

import random
from collections import defaultdict

import numpy as np

from mgcp import text
from mgcp.operations import copies, kept_words, sparse
from mgcp.operations.shared import WORDS, CycleCache, Reader, digests
from test_operations_duplicate_detection import lesson

WORDS_USED = ["Run", "running", "runs", "the", "a", "tests", "test", "2024", "x", "before", "merge", "merging",
              "DoNotMerge", "don't", "never", "make sure", "snake_case", "type", "script", "typescript", "é"]


def _by_comparing(lessons) -> dict[str, tuple[str, ...]]:
    """The rule as said: each action's words (`text.terms`) stemmed one at a time, those `text.stems`
    leaves out dropped; equal stems, two lessons or more, are copies."""
    groups = defaultdict(list)
    for one in lessons:
        key = tuple(s for w in text.terms(one.action) if (s := "".join(text.stems([w]))))
        if key:
            groups[key].append(one.id)
    return {i: key for key, ids in groups.items() if len(ids) > 1 for i in ids}


def _lessons(rng, n):
    made = []
    for i in range(n):
        if made and rng.random() < 0.3:  # a copy, written a little differently at times
            action = rng.choice(made).action
            action = action.upper() if rng.random() < 0.3 else action + rng.choice(["", " the", " 7", "."])
        else:
            action = " ".join(rng.choice(WORDS_USED) for _ in range(rng.randint(0, 6)))
        made.append(lesson(f"l{i:03d}", "when", action))
    return made


def test_copies_are_the_lessons_whose_stems_equal_another_lessons():
    rng = random.Random(8)
    found = 0
    for _ in range(40):
        lessons = _lessons(rng, rng.randint(1, 60))
        expected = _by_comparing(lessons)
        assert copies(lessons) == expected
        found += len(expected)
        # with a Reader, from the kept corpus of the actions (most of them read by an earlier cycle)
        earlier = [one.action for one in lessons[: len(lessons) // 2]]
        kept = kept_words.build("0", digests(WORDS, earlier), lambda i: text.terms(earlier[i]), None)
        assert copies(lessons, CycleCache(reader=Reader({"0": kept.encode(WORDS)}))) == expected
    assert found > 200


def test_repeated_rows_holds_every_row_equal_to_another():
    rng = random.Random(2)
    for _ in range(200):
        rows = [tuple(rng.randrange(4) for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(0, 30))]
        start = sparse.starts([len(r) for r in rows])
        ids = np.array([i for r in rows for i in r], dtype=np.int64)
        got = sparse.repeated_rows(start, ids).tolist()
        assert got == sorted(got)
        assert {i for i, r in enumerate(rows) if r and rows.count(r) > 1} == set(got)  # (a false match: a chance of about 2^-64)
