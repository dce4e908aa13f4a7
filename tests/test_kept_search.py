"""Duplicate detection's kept pair search (`mgcp.operations.kept_search`, `kept_pairs`): a repeat
cycle that compares only the changed actions with the others finds exactly what a full search finds,
and the kept state is a cache."""

import json
import math
import random
import sqlite3
import struct

import numpy as np
import pytest

import planted
from mgcp import engine
from mgcp.config import DEFAULTS, parse_config
from mgcp.engine import actions, cycle
from mgcp.operations import duplicate_detection, kept_search, sparse
from mgcp.operations.similarity import LexicalBackend
from test_operations_duplicate_detection import lesson, synthetic

SETTINGS = {**DEFAULTS["duplicate_detection"], "max_findings": 10_000}
P = planted.PROJECT


@pytest.fixture
def spied(monkeypatch) -> list[int]:
    """How many rows each search touched (-1: a full search), any share of changed rows allowed."""
    monkeypatch.setattr(kept_search, "CHANGED_SHARE", 1.0)
    calls = []
    full, touching = sparse.pairs, sparse.pairs_touching

    def pairs(m, t, tick=None):
        calls.append(-1)
        return full(m, t, tick)

    def pairs_touching(m, t, touched, tick=None):
        calls.append(int(touched.sum()))
        return touching(m, t, touched, tick)

    monkeypatch.setattr(sparse, "pairs", pairs)
    monkeypatch.setattr(sparse, "pairs_touching", pairs_touching)
    return calls


def _json(findings) -> list:
    return [f.model_dump(mode="json") for f in findings]


def _words(rng, vocabulary, n):
    return " ".join(rng.choice(vocabulary) for _ in range(n))


def _docs_sweep(rng):
    """A small corpus of few words (so that idf moves a lot when a few documents change)."""
    vocabulary = [f"w{i}" for i in range(rng.randint(8, 40))] + ["file", "name", "filename", "names"]
    return vocabulary, {f"d{i:03d}": _words(rng, vocabulary, rng.randint(0, 7)) for i in range(rng.randint(2, 50))}


def test_the_kept_search_finds_the_pairs_and_values_of_a_full_search_over_random_changes(spied, monkeypatch):
    """Random small corpora changed at random over several cycles (texts edited, removed, added,
    copied; a compound word added, which changes how other texts are read), under several DRIFT
    bounds: each repeat search gives the full search's pairs with the same values, bit for bit,
    without a full search, and many with rows left unchanged."""
    rng = random.Random(5)
    incremental = partly = contained = 0
    for corpus in range(60):
        monkeypatch.setattr(kept_search, "DRIFT", rng.choice([kept_search.DRIFT, 1.02, 1.1]))
        vocabulary, docs = _docs_sweep(rng)
        t = rng.choice([0.2, 0.4, 0.6, 0.79])
        # the contained pairs too, under a rule that a few changed texts move (a low max_df)
        containment = (rng.choice([1, 2, 3]), rng.choice([1.5, 2.0, 3.0]), rng.choice([1, 2, 4, 200]))
        state = None
        for step in range(4):
            search = kept_search.KeptSearch(state)
            got = search.pairs(docs, t, LexicalBackend(), containment)
            assert got == LexicalBackend().pairs(docs, t), (corpus, step)
            keys = list(docs)
            small, large = sparse.contained(LexicalBackend().matrix(docs), *containment)
            expected = sorted(zip([keys[i] for i in small.tolist()], [keys[i] for i in large.tolist()]))
            assert sorted(search.contained) == expected and len(set(search.contained)) == len(expected), (corpus, step)
            contained += step > 0 and len(expected)
            incremental += search.changed is not None
            partly += search.changed is not None and search.changed < len(docs)
            assert (search.changed is None) == (step == 0)
            state = search.keep or state
            keys = list(docs)
            for _ in range(rng.randint(1, 4)):
                what = rng.random()
                if what < 0.3 and keys:
                    docs[rng.choice(keys)] += " " + _words(rng, vocabulary, 1)
                elif what < 0.5 and len(keys) > 2:
                    docs.pop(keys.pop(rng.randrange(len(keys))))
                elif what < 0.7 and keys:
                    docs[f"c{corpus}-{step}-{len(docs)}"] = docs[rng.choice(keys)]
                else:
                    docs[f"n{corpus}-{step}-{len(docs)}"] = _words(rng, vocabulary, rng.randint(1, 6))
    assert incremental == 60 * 3 and partly > 60 and contained > 100


def _changed_by_definition(base, m, digests, codes) -> np.ndarray:
    """Per row: not in the base with the same code, or stretched by more than DRIFT (every row's
    stretch worked out, as the module docstring defines it)."""
    at = base._at(digests)
    same = at >= 0
    same[same] = (base.codes[at[same]] == codes[same]).all(axis=1)
    known = dict(zip(base.stems, base.df.tolist()))
    changed = []
    for r in range(m.n):
        ranks, tfs = m.rank[m.start[r]:m.start[r + 1]].tolist(), m.tf[m.start[r]:m.start[r + 1]].tolist()
        if not ranks:
            changed.append(not same[r])
            continue
        if any(m.words[k] not in known for k in ranks):
            changed.append(True)
            continue
        idf0 = [math.log((1 + base.n) / (1 + known[m.words[k]])) + 1 for k in ranks]
        idf = [math.log((1 + m.n) / (1 + int(m.df[k]))) + 1 for k in ranks]
        ratio = [b / a for a, b in zip(idf0, idf)]
        then = sum(((1 + math.log(t)) * a) ** 2 for t, a in zip(tfs, idf0))
        now = sum(((1 + math.log(t)) * b) ** 2 for t, b in zip(tfs, idf))
        changed.append(not same[r] or max(ratio) * math.sqrt(then / now) > kept_search.DRIFT)
    return np.array(changed, dtype=bool)


def test_the_changed_rows_are_those_the_definition_finds(monkeypatch):
    """Random corpora changed a little and a lot: `compare` marks changed exactly the rows whose
    text is new or read otherwise, or whose stretch is above DRIFT, though it works out the stretch
    only of rows with a stem whose idf moved far."""
    rng = random.Random(21)
    seen = 0
    for corpus in range(40):
        monkeypatch.setattr(kept_search, "DRIFT", rng.choice([kept_search.DRIFT, 1.02, 1.1, 1.0]))
        vocabulary, docs = _docs_sweep(rng)
        search = kept_search.KeptSearch()
        search.pairs(docs, 0.5, LexicalBackend())
        keys = list(docs)
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.5 and keys:
                docs[rng.choice(keys)] += " " + _words(rng, vocabulary, 1)
            else:
                docs[f"n{len(docs)}"] = _words(rng, vocabulary, rng.randint(1, 6))
        base = kept_search._Base.decode(search.keep, 0.5 / kept_search.DRIFT ** 2 - kept_search.SLACK)
        m = LexicalBackend().matrix(docs)
        digests = kept_search.digests(kept_search.WORDS, list(docs.values()))
        codes = kept_search._codes(m)
        _, _, changed, _ = base.compare(m, digests, codes)
        expected = _changed_by_definition(base, m, digests, codes)
        assert changed.tolist() == expected.tolist(), corpus
        seen += int((~changed).sum())
    assert seen > 100


def _edit(rng, action: str) -> str:
    words = action.split()
    words.insert(rng.randrange(len(words) + 1), rng.choice(["carefully", "again", "first", "quietly"]))
    return " ".join(words)


def test_repeat_duplicate_detection_equals_a_full_run_on_the_same_lessons(spied, monkeypatch):
    """Findings (their JSON, order and cap included) after refines, archives, added lessons and
    copies, and a rare word's idf moved a lot, equal those of a run with nothing kept. (A corpus
    this small moves every idf by more than DRIFT allows; a wider bound leaves rows unchanged.)"""
    monkeypatch.setattr(kept_search, "DRIFT", 1.05)
    rng = random.Random(3)
    lessons, _ = synthetic(300)
    search = kept_search.KeptSearch()
    first = duplicate_detection.run(lessons, SETTINGS, search=search)
    state = search.keep
    assert state and spied == [-1]
    assert _json(first) == _json(duplicate_detection.run(lessons, SETTINGS))
    for step in range(3):
        for i in rng.sample(range(len(lessons)), 3):  # refined
            old = lessons[i]
            lessons[i] = lesson(old.id, old.trigger, _edit(rng, old.action), version=old.version + 1,
                                tags=old.tags)
        for i in sorted(rng.sample(range(len(lessons)), 3), reverse=True):  # archived
            del lessons[i]
        source = rng.choice(lessons)
        lessons.append(lesson(f"copy-{step}", "when it comes up again", source.action))  # a copy
        lessons.append(lesson(f"new-{step}", "when naming flags", f"Name each flag zyzzyva{step} after "
                              "what it switches, never after a ticket."))
        # a rare word held by one lesson becomes common: its idf falls far
        holder = rng.choice(lessons)
        rare = f"quokka{step}"
        i = lessons.index(holder)
        lessons[i] = lesson(holder.id, holder.trigger, holder.action + f" Mind the {rare}.",
                            version=holder.version + 1, tags=holder.tags)
        lessons += [lesson(f"rare-{step}-{k}", f"when {rare} {k}", f"Feed the {rare} {k} times a day.")
                    for k in range(4)]
        calls = len(spied)
        search = kept_search.KeptSearch(state)
        repeat = duplicate_detection.run(lessons, SETTINGS, search=search)
        assert spied[calls:] == [search.changed] and 0 < search.changed < len(lessons)
        assert _json(repeat) == _json(duplicate_detection.run(lessons, SETTINGS))
        assert repeat and any(f.data["copy"] for f in repeat)
        state = search.keep or state


def test_a_stale_or_broken_state_means_a_full_search_with_the_same_result(spied):
    lessons, _ = synthetic(120)
    search = kept_search.KeptSearch()
    expected = _json(duplicate_detection.run(lessons, SETTINGS, search=search))
    good = search.keep
    other = {**SETTINGS, "review_threshold": 0.75}
    size = struct.unpack_from("<I", good)[0]
    header = json.loads(good[4:4 + size])

    def with_header(changed):  # the same body under another header
        text = json.dumps(changed).encode()
        return struct.pack("<I", len(text)) + text + good[4 + size:]

    flipped = bytearray(good)
    flipped[-3] ^= 1  # a byte of the body's arrays changed: sizes that still fit, a damaged state
    broken = [bytes(flipped), with_header([1]), with_header({k: v for k, v in header.items() if k != "contained"}),
              with_header({**header, "n": -5}), with_header({**header, "n": float("inf")})]
    for state, settings in [(good[:-5], SETTINGS), (b"nonsense", SETTINGS), (good, other),
                            (good.replace(kept_search.RULES.hex().encode(), b"0" * 32), SETTINGS),
                            *[(state, SETTINGS) for state in broken]]:
        calls = len(spied)
        search = kept_search.KeptSearch(state)
        found = _json(duplicate_detection.run(lessons, settings, search=search))
        assert spied[calls:] == [-1] and search.keep  # a full search, and a new state to keep
        assert found == (expected if settings is SETTINGS else _json(duplicate_detection.run(lessons, settings)))


def test_a_state_whose_texts_do_not_fill_their_count_is_ignored(spied):
    """A state framed whole (its digest holds) whose text digests are cut short of 16 bytes each is
    not a state these rules made: ignored, never raised on."""
    from mgcp.operations import framed

    lessons, _ = synthetic(60)
    search = kept_search.KeptSearch()
    expected = _json(duplicate_detection.run(lessons, SETTINGS, search=search))
    header, parts = framed.unframe(search.keep, 8)
    parts[2] = parts[2][:-15]  # as many pieces as texts, the last one byte long
    short = framed.frame({k: v for k, v in header.items() if k not in ("sizes", "body")}, parts)
    calls = len(spied)
    assert _json(duplicate_detection.run(lessons, SETTINGS, search=kept_search.KeptSearch(short))) == expected
    assert spied[calls:] == [-1]


def test_a_state_kept_for_another_containment_rule_means_a_full_search():
    docs = {f"d{i}": f"alpha beta gamma{i % 7} delta{i % 5}" + " epsilon" * (i % 2) for i in range(40)}
    rule = (3, 2.0, 200)
    search = kept_search.KeptSearch()
    search.pairs(docs, 0.5, LexicalBackend(), rule)
    assert search.contained
    for other in [None, (2, 2.0, 200), (3, 1.5, 200), (3, 2.0, 10)]:
        again = kept_search.KeptSearch(search.keep)
        again.pairs(docs, 0.5, LexicalBackend(), other)
        assert again.changed is None and again.keep
    again = kept_search.KeptSearch(search.keep)
    again.pairs(docs, 0.5, LexicalBackend(), rule)
    assert again.changed == 0 and again.keep is None and sorted(again.contained) == sorted(search.contained)


def test_a_kept_text_whose_rarest_word_becomes_rare_enough_is_looked_up_again(monkeypatch):
    """x's words are all in three texts (more than max_df, so it is not looked up); one of them goes,
    and x, unchanged, is looked up now: the pair with y, which holds it, is found."""
    monkeypatch.setattr(kept_search, "CHANGED_SHARE", 1.0)
    rule = (3, 2.0, 2)
    docs = {"x": "apple banana cherry", "y": "apple banana cherry damson",
            "z": "apple banana cherry kiwi lemon mango melon", **{f"o{i}": f"other words {i}" for i in range(20)}}
    search = kept_search.KeptSearch()
    search.pairs(docs, 0.5, LexicalBackend(), rule)
    assert search.contained == []
    del docs["z"]
    again = kept_search.KeptSearch(search.keep)
    again.pairs(docs, 0.5, LexicalBackend(), rule)
    assert again.changed is not None and again.contained == [("x", "y")]


def test_contained_touching_is_contained_with_a_searched_end():
    rng = random.Random(4)
    for _ in range(100):
        vocabulary, docs = _docs_sweep(rng)
        m = sparse.tf_idf([doc.split() for doc in docs.values()])
        rule = (rng.choice([1, 2, 3]), rng.choice([1.5, 2.0, 3.0]), rng.choice([1, 3, 200]))
        smaller = np.array([rng.random() < 0.3 for _ in range(m.n)], dtype=bool)
        larger = np.array([rng.random() < 0.3 for _ in range(m.n)], dtype=bool)
        whole = set(zip(*(x.tolist() for x in sparse.contained(m, *rule))))
        part = list(zip(*(x.tolist() for x in sparse.contained_touching(m, *rule, smaller, larger))))
        assert len(part) == len(set(part))
        assert set(part) == {(x, y) for x, y in whole if smaller[x] or larger[y]}


def test_texts_gone_are_dropped_from_the_base_only_beyond_the_changed_share(monkeypatch):
    """A few texts gone leave the kept state as it is (nothing to rewrite), and one coming back is
    found as unchanged; beyond CHANGED_SHARE of the texts they are dropped, and one coming back is new."""
    monkeypatch.setattr(kept_search, "DRIFT", 2.0)  # idf moves never mark a row here
    rule = (3, 2.0, 200)
    docs = {f"d{i:02d}": f"alpha beta gamma{i % 7} delta{i % 5} word{i}" + " epsilon" * (i % 2) for i in range(40)}
    first = kept_search.KeptSearch()
    first.pairs(docs, 0.3, LexicalBackend(), rule)

    def again(docs, state):
        search = kept_search.KeptSearch(state)
        assert search.pairs(docs, 0.3, LexicalBackend(), rule) == LexicalBackend().pairs(docs, 0.3)
        small, large = sparse.contained(LexicalBackend().matrix(docs), *rule)
        keys = list(docs)
        assert sorted(search.contained) == sorted(zip([keys[i] for i in small.tolist()], [keys[i] for i in large.tolist()]))
        return search

    fewer = {k: v for k, v in docs.items() if k != "d03"}
    search = again(fewer, first.keep)
    assert search.changed == 0 and search.keep is None  # one of 40 gone: kept as it is
    search = again(docs, first.keep)
    assert search.changed == 0 and search.keep is None  # and back: one of the base
    fewer = {k: v for k, v in docs.items() if k not in ("d03", "d04", "d05")}
    search = again(fewer, first.keep)
    assert search.changed == 0 and search.keep  # three of 40 gone: dropped
    search = again({**fewer, "d03": docs["d03"]}, search.keep)
    assert search.changed == 1 and search.keep is None  # one back: new to the base


def test_too_many_changed_rows_make_a_new_base(monkeypatch):
    docs = {f"d{i}": f"alpha beta gamma{i % 7} delta{i % 5}" for i in range(40)}
    search = kept_search.KeptSearch()
    search.pairs(docs, 0.5, LexicalBackend())
    state = search.keep
    docs.update({f"e{i}": f"epsilon zeta gamma{i % 3}" for i in range(10)})  # a fifth of the rows new
    again = kept_search.KeptSearch(state)
    assert again.pairs(docs, 0.5, LexicalBackend()) == LexicalBackend().pairs(docs, 0.5)
    assert again.changed is None and again.keep and again.keep != state


def test_pairs_touching_is_pairs_with_a_touched_end():
    rng = random.Random(9)
    for _ in range(100):
        vocabulary, docs = _docs_sweep(rng)
        m = sparse.tf_idf([doc.split() for doc in docs.values()])
        t = rng.uniform(0.1, 0.95)
        touched = np.array([rng.random() < 0.3 for _ in range(m.n)], dtype=bool)
        whole = {(a, b): s for a, b, s in zip(*(x.tolist() for x in sparse.pairs(m, t)))}
        part = list(zip(*(x.tolist() for x in sparse.pairs_touching(m, t, touched))))
        assert len(part) == len({(a, b) for a, b, _ in part})
        assert {(a, b): s for a, b, s in part} == {k: s for k, s in whole.items() if touched[k[0]] or touched[k[1]]}


@pytest.mark.parametrize("mask_words", [1, 4])
def test_pairs_touching_is_pairs_with_a_touched_end_on_near_copies(mask_words, monkeypatch):
    """Many candidates close to the threshold, and (with one signature word) every word on one bit:
    the bound of the heaviest weights drops only pairs below it."""
    monkeypatch.setattr(sparse, "MASK_WORDS", mask_words)
    rng = random.Random(11)
    for _ in range(30):
        vocabulary = [f"w{i}" for i in range(rng.randint(5, 30))]
        docs = []
        for _ in range(rng.randint(5, 40)):
            words = [rng.choice(vocabulary) for _ in range(rng.randint(1, 12))]
            docs += [words] + [[w for w in words if rng.random() < 0.8] + [rng.choice(vocabulary)]
                               for _ in range(rng.randint(0, 3))]
        m = sparse.tf_idf(docs)
        t = rng.uniform(0.3, 0.95)
        touched = np.array([rng.random() < 0.3 for _ in range(m.n)], dtype=bool)
        whole = {(a, b): s for a, b, s in zip(*(x.tolist() for x in sparse.pairs(m, t)))}
        part = list(zip(*(x.tolist() for x in sparse.pairs_touching(m, t, touched))))
        assert {(a, b): s for a, b, s in part} == {k: s for k, s in whole.items() if touched[k[0]] or touched[k[1]]}


def test_heaviest_is_each_rows_largest_weight():
    rng = random.Random(3)
    docs = [[f"w{rng.randrange(9)}" for _ in range(rng.randint(0, 6))] for _ in range(60)]
    m = sparse.tf_idf(docs)
    assert m.heaviest.tolist() == [max(m.vector(r).values(), default=0.0) for r in range(m.n)]


@pytest.mark.parametrize("mask_words", [1, 4])
def test_mask_sets_a_bit_for_each_word_of_a_row(mask_words, monkeypatch):
    monkeypatch.setattr(sparse, "MASK_WORDS", mask_words)
    rng = random.Random(4)
    for _ in range(50):
        docs = [[f"w{rng.randrange(rng.randint(1, 300))}" for _ in range(rng.choice([0, 1, 3, 40]))]
                for _ in range(rng.randint(0, 30))]
        m = sparse.tf_idf(docs)
        expected = np.zeros((m.n, mask_words), dtype=np.uint64)
        for r in range(m.n):
            for rank in m.rank[m.start[r]:m.start[r + 1]].tolist():
                bit = rank * 2654435761 % (64 * mask_words)
                expected[r, bit // 64] |= np.uint64(1 << (bit % 64))
        assert np.array_equal(m.mask, expected)


@pytest.mark.parametrize("from_end", [True, False])
def test_row_sums_add_each_rows_values_one_after_the_other(from_end):
    """The running sums within each row, bit for bit those of adding its values one at a time."""
    rng = np.random.default_rng(6)
    for _ in range(200):
        lengths = rng.integers(0, rng.integers(1, 30), size=int(rng.integers(0, 40))).astype(np.int64)
        start = sparse.starts(lengths)
        values = rng.random(int(lengths.sum())) ** 3 * 10.0 ** float(rng.integers(-5, 5))
        expected = values.copy()
        for r in range(len(lengths)):
            places = range(start[r + 1] - 2, start[r] - 1, -1) if from_end else range(start[r] + 1, start[r + 1])
            for e in places:
                expected[e] = expected[e] + expected[e + 1 if from_end else e - 1]
        assert sparse._row_sums(values, start, lengths, from_end).tobytes() == expected.tobytes()


# -- in the engine: kept between cycles in `kept_pairs` ------------------------------------------------

CONFIG = parse_config({"rem": {"duplicate_detection": {"max_findings": 500}}}, "test")


def _kept(path) -> list:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT search, length(state) FROM kept_pairs").fetchall()
    finally:
        conn.close()


async def _analysed(store) -> tuple:
    """Duplicate detection's findings (before those already pending are left out) and summary, then
    the cycle's stored findings."""
    project = await store.queue.project(P)
    plan = cycle._plan(CONFIG, project, await store.rem.state(project.project_id), ["duplicate_detection"])
    [analysis] = [a async for a in cycle._analyse(store, CONFIG, project, plan, None)]
    found = (analysis.error, {k: v for k, v in analysis.summary.items() if k != "input_digest"}, _json(analysis.findings))
    report = await engine.run_cycle(store, CONFIG, P, ["duplicate_detection"])
    return found, sorted((f.fingerprint, json.dumps(f.data, sort_keys=True)) for f in report.findings)


async def _change(store):
    """Refined, archived, added (a copy, a new rule), a rare word made common, and a merge answered
    in review."""
    ids = await planted.change_a_few(store)
    held = await store.lessons.get(ids[3])
    rare = held.action.split()[-1].strip(".").lower()
    for k in range(3):
        await store.lessons.add(f"rare-{k}", f"when {rare} comes up {k}", f"Mention {rare} in the log {k} times.")
    merges = [f for f in await store.rem.findings(None, None) if f.kind == "duplicate_merge" and f.status == "pending"]
    assert merges
    await actions.resolve(store, CONFIG, merges[0].id, 1)


def test_a_repeat_cycle_finds_what_a_cycle_with_nothing_kept_finds(tmp_path, run, spied):
    path = tmp_path / "a.db"
    planted.build(path)
    run(path, lambda store: engine.run_cycle(store, CONFIG, P, ["duplicate_detection"]))
    assert _kept(path)[0][0] == "duplicate_detection" and spied == [-1]
    run(path, _change)
    other = planted.copy_without(path, tmp_path / "b.db", "kept_pairs")

    repeat = run(path, _analysed)
    assert spied[1] > 0 and spied[2] > 0  # the analysis and the cycle each compared only the changed rows
    full = run(other, _analysed)
    assert spied[3:] == [-1, 0] and _kept(other)  # nothing kept: a full search, whose state the cycle used
    assert repeat == full
    assert repeat[0][0] is None and repeat[0][2]


def test_a_dry_run_keeps_no_search_state(tmp_path, run):
    path = tmp_path / "a.db"
    planted.build(path)

    async def dry(store):
        return await engine.run(store, CONFIG, P, ["duplicate_detection"], auto=True, dry_run=True)

    run(path, dry)
    assert _kept(path) == []


DETERMINISM_SCRIPT = """
import hashlib, json
from tests.test_operations_duplicate_detection import SETTINGS, lesson, synthetic
from mgcp.operations import duplicate_detection, kept_search

kept_search.DRIFT = 1.05
lessons, _ = synthetic()
first = kept_search.KeptSearch()
duplicate_detection.run(lessons, SETTINGS, search=first)
lessons = lessons[5:] + [lesson("n1", "when copying", lessons[7].action), lesson("n2", "when x", lessons[9].action + " Twice.")]
again = kept_search.KeptSearch(first.keep)
findings = duplicate_detection.run(lessons, {**SETTINGS, "max_findings": 25}, search=again)
print(json.dumps([again.changed, hashlib.sha256(first.keep).hexdigest(), hashlib.sha256(again.keep or b"").hexdigest(),
                  [(f.kind, f.fingerprint, f.data.get("similarity")) for f in findings]]))
"""


def test_the_kept_state_and_the_repeat_findings_do_not_depend_on_the_hash_seed():
    from hashseeds import outputs_under_hash_seeds

    outputs = outputs_under_hash_seeds(DETERMINISM_SCRIPT)
    assert 0 < outputs[0][0] < 300 and outputs[0][3]
    assert outputs[0] == outputs[1] == outputs[2]
