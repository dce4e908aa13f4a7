"""A cycle writes a kept cache again only once what is kept lacks more than a few of its items
(`mgcp.operations.shared.BEHIND`): the corpora's words and the word index. Until then the next
cycle reads those few again, and finds what a cycle without any kept state finds."""

import json
import sqlite3

import planted
from mgcp import engine
from mgcp.config import parse_config
from mgcp.operations.shared import BEHIND

CONFIG = parse_config({"rem": {"knowledge_extraction": {"enabled": True}}}, "test")
MAIN = "/work/behind"
OPS = ["duplicate_detection", "knowledge_extraction"]
WORDS = ["pool", "cache", "schema", "worker", "deploy", "release", "migration", "queue", "retry", "index"]
N = 120  # BEHIND (2%) of it: 2 lessons


def _kept(path) -> dict:
    conn = sqlite3.connect(path)
    try:
        return {**{f"corpus {name}": state for name, state in conn.execute("SELECT name, state FROM kept_corpora")},
                **{f"index {name}": state for name, state in conn.execute("SELECT name, state FROM kept_indexes")}}
    finally:
        conn.close()


async def _findings(store) -> list:
    report = await engine.run_cycle(store, CONFIG, MAIN, OPS)
    assert all(op.error is None for op in report.operations)
    return [(f.kind, f.fingerprint, json.dumps(f.data, sort_keys=True)) for f in report.findings]


def test_kept_caches_are_written_again_only_past_a_few_changed_lessons_and_find_the_same(db, run, tmp_path):
    assert round(BEHIND * N) == 2

    async def seed(store):
        for i in range(N):
            await store.lessons.add(f"l{i:03d}", f"when the {WORDS[i % 10]} {WORDS[(i * 3) % 10]} fails",
                                    f"Check the {WORDS[(i * 7) % 10]} before the {WORDS[(i + 1) % 10]} {i}",
                                    tags=[WORDS[(i * 5) % 10]])
        await store.context.save(MAIN, notes="We decided to retry the queue before the release",
                                 decisions=["Retry the queue before each release"])

    run(db, seed)
    run(db, _findings)
    first = _kept(db)
    assert {"index lesson_words"} < set(first) and sum(k.startswith("corpus") for k in first) == 2

    def refine(i: int):
        async def act(store):
            await store.lessons.refine(f"l{i:03d}", "sharper", action=f"Drain the worker queue first ({i})")
        return act

    # a refined lesson is one text the kept corpora lack plus one they hold no longer used, and so for
    # the kept index: each is written again at the second refine (4 > 2.4), then not at the third
    kept = first
    for i, index_written, corpora_written in [(0, False, False), (1, True, True), (2, False, False)]:
        run(db, refine(i))
        other = planted.copy_without(db, tmp_path / f"without-{i}.db", "kept_corpora", "kept_indexes")
        assert run(db, _findings) == run(other, _findings)
        now = _kept(db)
        assert (now["index lesson_words"] != kept["index lesson_words"]) is index_written, i
        assert (now["corpus 0"] != kept["corpus 0"] or now["corpus 1"] != kept["corpus 1"]) is corpora_written, i
        kept = now
