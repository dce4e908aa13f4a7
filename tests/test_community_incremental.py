"""Incremental community detection: what a run keeps for the next (`community_kept_runs`), how close an
incremental run comes to a full run on the same data, and that the kept state is only a cache.

The drift bound these tests hold an incremental run to, against a full run on the same data after
a few percent of the lessons changed: modularity within 1% of the full run's, and each side's
lessons at least 95% in the community that best matches theirs on the other side, and every kept
title the one drawn anew for the same community (a title is kept only for the very members and
texts it was drawn from, so only the idf may have moved; here it moves none). Exact: an
incremental run on unchanged edges gives back the kept partition; a community no change reaches
keeps its id and description; the candidates of every lesson that searched again are the full
search's; a run whose state is due for a full run (or has none) is the full run."""

import json
import math
import random
from collections import defaultdict

import numpy as np
import pytest

from mgcp import engine
from mgcp.config import DEFAULTS, parse_config
from mgcp.models import Lesson, LessonStatus
from mgcp.operations import community_detection, framed, sparse
from mgcp.operations.shared import CycleCache
from mgcp.operations.similarity import LexicalBackend

SETTINGS = {**DEFAULTS["community_detection"], "louvain": "python-louvain"}
SETTINGS_AUTO = parse_config({}, "t").operation("community_detection")  # as a cycle reads them
P = "/work/alpha"
TS = "2026-01-01T00:00:00+00:00"
TOPICS = ["webhook retry", "database migration", "cache invalidation", "git rebase", "docker image",
          "test fixture", "logging level", "api pagination", "secret rotation", "css layout",
          "memory leak", "thread pool", "queue consumer", "schema validation", "feature flag",
          "dns record", "tls certificate", "cron schedule", "csv export", "image upload"]
FILLER = ["check", "prefer", "avoid", "always", "first", "later", "small", "large", "quick", "careful",
          "owner", "module", "review", "measure", "document", "name", "split", "merge", "rename", "keep"]


def lesson(id, trigger, action, tags=()):
    return Lesson(id=id, trigger=trigger, action=action, tags=list(tags), created_at=TS, last_refined=TS)


def corpus(rng: random.Random, n: int, offset: int = 0) -> list:
    lessons = []
    for i in range(offset, offset + n):
        topic = TOPICS[i % len(TOPICS)]
        a, b = topic.split()
        words = rng.sample(FILLER, 4)
        extra = f"{a}{rng.randrange(6)}"  # a word shared by a few lessons of the topic
        lessons.append(lesson(f"l{i:04d}", f"When the {topic} {words[0]} {extra}",
                              f"{words[1].capitalize()} the {b} {words[2]} and {words[3]} the {topic} {extra}.",
                              tags=[a] if rng.random() < 0.3 else []))
    return lessons


def change(rng: random.Random, lessons: list, share: float) -> list:
    """A third each refined, archived and added, `share` of the lessons in all."""
    third = max(1, int(len(lessons) * share / 3))
    picked = rng.sample([x.id for x in lessons], 2 * third)
    refined, gone = set(picked[:third]), set(picked[third:])
    out = [x.model_copy(update={"action": x.action + " Check it twice.", "version": x.version + 1})
           if x.id in refined else x for x in lessons if x.id not in gone]
    return out + corpus(rng, third, offset=len(lessons) + 1000)


def full(lessons, **kw):
    return community_detection.run(lessons, None, SETTINGS, cache=CycleCache(), **kw)


def best_match_share(x: dict, y: dict) -> float:
    groups = defaultdict(list)
    for member, label in x.items():
        groups[label].append(member)
    agree = 0
    for members in groups.values():
        counts = defaultdict(int)
        for m in members:
            counts[y.get(m, ("alone", m))] += 1
        agree += max(counts.values())
    return agree / len(x)


def membership(result, lessons) -> dict:
    of = {m: c["community_id"] for c in result.communities for m in c["member_ids"]}
    return {x.id: of.get(x.id, ("alone", x.id)) for x in lessons}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_incremental_run_stays_within_the_bound_of_a_full_run_on_the_same_data(seed):
    rng = random.Random(seed)
    before = corpus(rng, 600)
    first = full(before)
    after = change(rng, before, 0.03)
    incremental = community_detection.run(after, first.communities, SETTINGS, first.graph_hash, first.modularity,
                                          cache=CycleCache(), kept=first.kept)
    again = full(after)
    assert incremental.incremental and not again.incremental
    assert abs(incremental.modularity - again.modularity) <= 0.01 * again.modularity
    mine, theirs = membership(incremental, after), membership(again, after)
    assert best_match_share(mine, theirs) >= 0.95 and best_match_share(theirs, mine) >= 0.95
    assert incremental.described < len(incremental.communities)  # most titles were kept
    # a kept title against the one drawn now (the same partition, every title drawn with today's idf)
    drawn = community_detection.run(after, first.communities, SETTINGS, first.graph_hash, first.modularity,
                                    cache=CycleCache(), kept=community_detection.Kept(
                                        first.kept.settings, first.kept.runs_since_full, first.kept.lessons))
    assert drawn.described == len(drawn.communities)
    assert [c["member_ids"] for c in drawn.communities] == [c["member_ids"] for c in incremental.communities]
    assert [c["summary"] for c in drawn.communities] == [c["summary"] for c in incremental.communities]
    differ = sum(a["title"] != b["title"] for a, b in zip(drawn.communities, incremental.communities))
    assert differ == 0  # on these corpora the idf moved no title
    # the kept state describes exactly the lessons of this run, with candidates among them
    kept = incremental.kept.lessons
    assert kept.ids == sorted(x.id for x in after)
    owner = np.repeat(np.arange(len(kept.ids)), np.diff(kept.candidates.start))
    assert ((kept.candidates.other >= 0) & (kept.candidates.other < len(kept.ids))).all()
    assert (kept.candidates.other != owner).all()
    assert incremental.kept.runs_since_full == 1


def test_a_community_no_change_reaches_keeps_its_id_and_description_and_unchanged_edges_keep_the_partition():
    rng = random.Random(5)
    before = corpus(rng, 400)
    first = full(before)
    same = community_detection.run(before, first.communities, SETTINGS, None, 0.0, cache=CycleCache(),
                                   kept=first.kept)
    assert same.incremental and same.communities == first.communities and same.described == 0
    assert same.modularity == first.modularity
    # one new lesson on a topic of its own reaches no community
    alone = lesson("zz-new", "When the boiler pressure drops", "Bleed the radiator valve.")
    added = community_detection.run(before + [alone], first.communities, SETTINGS, None, 0.0,
                                    cache=CycleCache(), kept=first.kept)
    assert added.incremental and added.communities == first.communities


def test_the_lessons_that_search_again_find_what_a_full_search_finds():
    rng = random.Random(3)
    docs = {x.id: x.trigger + " " + x.action for x in corpus(rng, 300)}
    m = LexicalBackend().matrix(docs)
    eligible = m.df <= 200
    row, other = sparse.proposals(m, eligible, 10)
    some = np.array([3, 17, 150, 299])
    part_row, part_other = sparse.proposals(m, eligible, 10, some)
    wanted = np.isin(row, some)
    assert row[wanted].tolist() == part_row.tolist() and other[wanted].tolist() == part_other.tolist()


def test_a_title_is_kept_only_for_the_very_members_and_texts_it_was_drawn_from():
    from mgcp.operations.community_detection import _sample_key

    sample = [f"m{i:02d}" for i in range(40)]
    content = {lid: bytes(16) for lid in sample + ["x"]}
    key = _sample_key(sample, content)
    assert _sample_key(list(sample), dict(content)) == key
    assert _sample_key(sample[:-1], content) != key and _sample_key(sample[1:] + ["x"], content) != key
    assert _sample_key(sample, {**content, "m07": b"\1" * 16}) != key


def test_the_idf_from_kept_keywords_is_the_idf_read_from_every_lesson():
    from collections import Counter

    from mgcp import text
    from mgcp.operations.community_detection import _content, _idf, _Keywords

    def read_all(lessons):  # the definition: every lesson's trigger and tags read now
        df = Counter()
        for x in lessons:
            df.update(set(text.keywords(x.trigger + " " + " ".join(x.tags))))
        n = len(lessons)
        return {w: math.log((1 + n) / (1 + d)) + 1.0 for w, d in df.items()}

    rng = random.Random(8)
    before = sorted(corpus(rng, 300), key=lambda x: x.id)
    idf, kept = _idf(before, {x.id: _content(x) for x in before})
    assert idf == read_all(before)
    # refined (new words, one word gone from a trigger), archived, added; tags changed
    after = change(rng, before, 0.1)
    after = [x.model_copy(update={"trigger": "When the zanzibar quokka " + x.trigger.split()[-1], "tags": ["quokka"]})
             if i % 17 == 0 else x for i, x in enumerate(after)]
    after.sort(key=lambda x: x.id)
    content = {x.id: _content(x) for x in after}
    state = kept.state()
    warm, again = _idf(after, content, state)
    assert warm == read_all(after) == _idf(after, content)[0]
    # a word no lesson holds any more is not kept; what is kept reads back as itself
    assert set(again.vocabulary) == {w for x in after for w in text.keywords(x.trigger + " " + " ".join(x.tags))}
    assert _idf(after, content, again.state())[1].state() == again.state()
    # a state kept under other rules, or cut short, is not read
    _, parts = framed.unframe(state, 4)
    assert _Keywords.read(state[:-4]) is None and _Keywords.read(framed.frame({"rules": "other"}, parts)) is None
    lied = _Keywords.read(state)
    lied.held = lied.held.copy()
    lied.held[:] = 0  # every lesson holds the first word only: were it read, the idf would differ
    assert _idf(after, {x.id: b"\1" * 16 for x in after}, lied.state())[0] == read_all(after)


def test_phrases_taken_from_what_was_kept_are_the_phrases_read_now():
    from mgcp.operations.community_detection import PHRASE_RULES, _content, _member_phrases, _Phrases

    rng = random.Random(12)
    lessons = corpus(rng, 80) + [lesson("t-tags", "When Webhooks fail, webhook-retry", "Retry webhooks.",
                                        tags=["webhooks", "error-handling"]), lesson("t-empty", "When", "Do.")]
    content = {x.id: _content(x) for x in lessons}
    first = _Phrases(None, content)
    assert all(first(x) == _member_phrases(x) for x in lessons)
    state = first.state([x.id for x in lessons])
    changed = [x.model_copy(update={"action": "Ping the cache twice."}) if i % 5 == 0 else x
               for i, x in enumerate(lessons)]
    content = {x.id: _content(x) for x in changed}
    second = _Phrases(state, content)
    assert len(second.kept) == len(lessons)
    for x in changed:  # the same entries in the same order, whether taken or read
        assert list(second(x).items()) == list(_member_phrases(x).items())
    # only the members given are kept; kept under other rules, a state is not read
    assert len(_Phrases(second.state(["t-tags", "l0001"]), content).kept) == 2
    _, parts = framed.unframe(state, 3)
    assert _Phrases(framed.frame({"rules": "other"}, parts), content).kept == {}
    assert _Phrases(state[:-5], content).kept == {}
    # damaged under the right rules (a number among the ids, forms with a line too many, a digest cut
    # short, a text column): not read, no error
    rules, digest = {"rules": PHRASE_RULES.hex()}, content["l0001"]
    assert _Phrases(framed.frame(rules, [json.dumps(["l0001"]).encode(), b"a b", digest]), content).kept != {}
    assert _Phrases(framed.frame(rules, [json.dumps([7]).encode(), b"a b", digest]), content).kept == {}
    assert _Phrases(framed.frame(rules, [json.dumps(["l0001"]).encode(), b"a\nb", digest]), content).kept == {}
    assert _Phrases(framed.frame(rules, [json.dumps(["l0001"]).encode(), b"a b", digest[:-1]]), content).kept == {}
    assert _Phrases(state.decode("latin-1"), content).kept == {}


def test_damaged_kept_keywords_are_ignored_and_a_lessons_content_digest_cannot_be_another_split():
    from mgcp.operations.community_detection import KEYWORD_RULES, _content, _contents, _Keywords

    rules, one, zero = {"rules": KEYWORD_RULES.hex()}, (1).to_bytes(4, "little"), (0).to_bytes(4, "little")
    damaged = framed.frame(rules, [json.dumps([[["l1"]], ["word"]]).encode(), bytes(16), one, zero])
    assert _Keywords.read(damaged) is None and _Keywords.read(damaged.decode("latin-1")) is None
    assert _Keywords.read(framed.frame(rules, [json.dumps([["l1"], ["word"]]).encode(), bytes(15), one, zero])) is None
    assert _Keywords.read(framed.frame(rules, [json.dumps([["l1"], ["word"]]).encode(), bytes(16), one, zero]))
    # the same characters split otherwise between trigger, action, tags and links
    a = lesson("l1", "deploy\0rollback", "x", tags=["web\1hooks"])
    b = lesson("l1", "deploy", "rollback\0x", tags=["web", "hooks"])
    c = lesson("l1", "deploy", "rollback\0x", tags=["webhooks"])
    assert len({_content(a), _content(b), _content(c)}) == 3
    assert _contents([a, b]) == {"l1": _content(b)}


def test_titles_drawn_from_kept_readings_are_those_drawn_from_none():
    rng = random.Random(13)
    before = corpus(rng, 500)
    first = full(before)
    assert set(first.kept.readings) == {"keywords", "phrases"}
    after = change(rng, before, 0.05)
    with_readings = community_detection.run(after, first.communities, SETTINGS, first.graph_hash, first.modularity,
                                            cache=CycleCache(), kept=first.kept)
    bare = community_detection.Kept(first.kept.settings, first.kept.runs_since_full, first.kept.lessons,
                                    first.kept.titles)
    without = community_detection.run(after, first.communities, SETTINGS, first.graph_hash, first.modularity,
                                      cache=CycleCache(), kept=bare)
    assert with_readings.described == without.described > 0
    assert with_readings.communities == without.communities
    # a full run (one due, under `full_every`) takes the readings too, and finds what a run without any state finds
    due = community_detection.run(after, first.communities, {**SETTINGS, "full_every": 1}, cache=CycleCache(),
                                  kept=first.kept)
    assert not due.incremental and due.communities == full(after).communities
    # what is kept of the phrases: every title sample member's, read now or kept for its content as it is
    samples = set(_phrases_kept(with_readings.kept.readings["phrases"]))
    assert set(_phrases_kept(without.kept.readings["phrases"])) < samples <= {x.id for x in after}


def _phrases_kept(state: bytes) -> dict:
    from mgcp.operations.community_detection import _Phrases

    return _Phrases(state, {}).kept


def _candidates(rows: list[list[int]], scores: list[list[float]] | None = None):
    from mgcp.operations.similarity import Candidates

    scores = scores or [[0.0] * len(found) for found in rows]
    return Candidates(sparse.starts(np.array([len(found) for found in rows], dtype=np.int64)),
                      np.array([x for found in rows for x in found], dtype=np.int64),
                      np.array([x for found in scores for x in found]))


def _rows(found) -> list[list[int]]:
    return [found.other[lo:hi].tolist() for lo, hi in zip(found.start[:-1].tolist(), found.start[1:].tolist())]


def test_kept_candidates_are_searched_again_only_when_they_or_theirs_are_stale_or_gone():
    from mgcp.operations.similarity import nearest_in

    rng = random.Random(6)
    docs = {x.id: x.trigger + " " + x.action for x in corpus(rng, 200)}
    keys = list(docs)
    m = LexicalBackend().matrix(docs)
    *searched, full_found = nearest_in(m, keys, 0.2, 3)
    # kept candidates unlike the search's, so that what was kept and what was searched show
    kept = [[(i + 1) % len(keys), (i + 2) % len(keys)] for i in range(len(keys))]
    kept[10] = [11, -1]  # a candidate gone leaves fewer than k: searched again
    kept[50] = [51, 52, 53, -1, 54]  # a candidate gone leaves k or more: dropped, the rest kept
    kept[60] = [61, -1]  # kept fewer than k, and one is gone: searched again
    kept[20] = []  # nothing kept: stale
    stale = np.zeros(len(keys), dtype=bool)
    stale[[20, 30, 40]] = True
    *_, found = nearest_in(m, keys, 0.2, 3, _candidates(kept), stale)
    again = {10, 20, 30, 40, 60}  # rows 18, 19, 28, 29, 38, 39 hold a stale candidate: kept, not searched
    rows, full_rows = _rows(found), _rows(full_found)
    assert rows[50] == [51, 52, 53, 54] and rows[18] == kept[18] == [19, 20]
    assert {i for i in range(len(keys)) if rows[i] != kept[i]} == again | {50}
    assert all(rows[i] == full_rows[i] for i in again)
    # kept as the search would find them, with their scores: the pairs of a full search
    *pairs, same = nearest_in(m, keys, 0.2, 3, full_found, stale)
    assert [x.tolist() for x in pairs] == [x.tolist() for x in searched]
    assert _rows(same) == full_rows and same.score.tolist() == full_found.score.tolist()


def test_a_pair_keeps_its_kept_score_unless_an_end_searched_again():
    from mgcp.operations.similarity import nearest_in

    rng = random.Random(7)
    docs = {x.id: x.trigger + " " + x.action for x in corpus(rng, 200)}
    keys = list(docs)
    m = LexicalBackend().matrix(docs)
    *_, full_found = nearest_in(m, keys, 0.2, 3)
    rows = _rows(full_found)
    # every kept score made up (and each pair's alike from either end), so that a kept one shows
    made_up = [[0.9 - 0.001 * ((min(i, j) * 7 + max(i, j)) % 100) for j in found] for i, found in enumerate(rows)]
    stale = np.zeros(len(keys), dtype=bool)
    stale[[5, 50]] = True
    a, b, s, found = nearest_in(m, keys, 0.2, 3, _candidates(rows, made_up), stale)
    again = stale  # none gone: only the stale rows search again
    scores = _rows(found)
    for i, found_i in enumerate(_rows(found)):
        for place, j in enumerate(found_i):
            score = found.score[found.start[i] + place]
            expected = m.dots(np.array([min(i, j)]), np.array([max(i, j)]))[0] if again[i] or again[j] \
                else made_up[i][rows[i].index(j)]
            assert score == expected
    assert scores  # the edges are the k best of those scores
    assert all(v >= 0.2 for v in s.tolist())


def test_a_run_due_for_a_full_run_or_without_kept_state_is_exactly_the_full_run():
    rng = random.Random(9)
    before = corpus(rng, 400)
    first = full(before)
    after = change(rng, before, 0.05)
    settings = {**SETTINGS, "full_every": 2}
    due = community_detection.run(after, first.communities, settings, first.graph_hash, first.modularity,
                                  cache=CycleCache(), kept=community_detection.Kept(first.kept.settings, 1,
                                                                                    first.kept.lessons))
    fresh = community_detection.run(after, first.communities, settings, first.graph_hash, first.modularity,
                                    cache=CycleCache())
    assert not due.incremental and due.kept.runs_since_full == 0
    assert due.communities == fresh.communities and due.modularity == fresh.modularity
    assert [f.model_dump() for f in due.findings] == [f.model_dump() for f in fresh.findings]
    other = {**SETTINGS, "similarity_edge_threshold": 0.4}  # state kept under other settings is not used
    assert not community_detection.run(after, None, other, cache=CycleCache(), kept=first.kept).incremental


def test_kept_pair_scores_made_by_other_rules_are_not_used(monkeypatch):
    """Another way of reading, weighing or scoring the texts (a changed stemmer, sparse.py): the kept
    scores were made by other rules, so the run is a full one."""
    rng = random.Random(10)
    before = corpus(rng, 200)
    first = full(before)
    after = change(rng, before, 0.05)
    assert community_detection.run(after, first.communities, SETTINGS, cache=CycleCache(), kept=first.kept).incremental
    monkeypatch.setattr(community_detection, "SCORE_RULES", "other rules")
    assert not community_detection.run(after, first.communities, SETTINGS, cache=CycleCache(),
                                       kept=first.kept).incremental


# -- through the engine ---------------------------------------------------------------------------

OPS = ["community_detection"]


async def _seed(store, n=120):
    for x in corpus(random.Random(11), n):
        await store.lessons.add(x.id, x.trigger, x.action, tags=x.tags)


async def _kept(store):
    """Each kept lesson's candidates (ids), and the runs since the last full one, as stored."""
    runs = await store.db.fetchall("SELECT runs_since_full, lessons FROM community_kept_runs")
    if not runs:
        return {}, []
    kept = community_detection.KeptLessons.read(runs[0][1])
    found = _rows(kept.candidates)
    return {lid: [kept.ids[j] for j in found[i]] for i, lid in enumerate(kept.ids)}, [r[0] for r in runs]


async def _active(store):
    return {x.id for x in await store.lessons.rows()}


def test_archived_merged_and_refined_lessons_leave_the_kept_state_consistent(db, run):
    async def scenario(store):
        await _seed(store)
        first = await engine.run_cycle(store, parse_config({}, "t"), P, OPS)
        kept_first, runs_first = await _kept(store)
        await store.lessons.set_lifecycle("l0003", LessonStatus.archived, "gone")
        await store.lessons.refine("l0023", reason="merged duplicate l0043", action="Retry it, merged.")
        await store.lessons.set_lifecycle("l0043", LessonStatus.superseded, reason="merged", superseded_by="l0023")
        await store.lessons.add("l9999", "When the webhook retry fails again", "Retry the webhook later.")
        second = await engine.run_cycle(store, parse_config({}, "t"), P, OPS)
        # what the database keeps is what a run on it keeps: run again on the same lessons, every
        # row is as it was kept
        from mgcp.engine.cycle import _kept_communities

        last = await store.rem.last_community_run()
        loaded = await store.community_kept.load()
        again = community_detection.run(await store.lessons.rows(), last["communities"], SETTINGS_AUTO, None,
                                        cache=CycleCache(), kept=_kept_communities(loaded))
        assert again.incremental and again.kept.lessons.state() == loaded[2] and again.described == 0
        assert again.kept.titles == _kept_communities(await store.community_kept.load()).titles
        return first, kept_first, runs_first, second, await _kept(store), await _active(store)

    first, kept_first, runs_first, second, (kept, runs), active = run(db, scenario)
    assert runs_first == [0] and set(kept_first) >= {"l0003", "l0043"}
    summary = second.operations[0].summary
    assert summary["incremental"] is True and runs == [1]
    assert set(kept) == active and "l0003" not in kept and "l0043" not in kept and "l9999" in kept
    assert all(set(c) <= active for c in kept.values())


def test_deleting_the_kept_state_makes_the_next_run_a_full_one_and_changes_nothing_else(tmp_path, run):
    """Two copies of one knowledge base, changed alike after a first cycle: deleting the kept state
    in one gives exactly what the other finds when every run is full."""
    from mgcp.persistence.migrate import open_and_migrate

    results = []
    for name, config, forget in [("a", parse_config({}, "t"), True),
                                 ("b", parse_config({"rem": {"community_detection": {"full_every": 1}}}, "t"), False)]:
        path = tmp_path / f"{name}.db"
        open_and_migrate(path)

        async def scenario(store, config=config, forget=forget):
            await _seed(store)
            await engine.run_cycle(store, config, P, OPS)
            for lid in ("l0005", "l0031"):
                await store.lessons.refine(lid, reason="sharper", action="Always check the owner first.")
            if forget:
                await store.community_kept.clear()
            report = await engine.run_cycle(store, config, P, OPS)
            last = await store.rem.last_community_run()
            return (report.operations[0].summary["incremental"], last["communities"], last["modularity"],
                    sorted((f.fingerprint, f.title, f.description) for f in report.findings))

        results.append(run(path, scenario))
    (inc_a, *found_a), (inc_b, *found_b) = results
    assert inc_a is False and inc_b is False
    assert found_a == found_b


def test_a_dry_run_keeps_nothing(db, run):
    async def scenario(store):
        await _seed(store, 40)
        await engine.run(store, parse_config({}, "t"), P, OPS, auto=True, dry_run=True)
        return (await _kept(store), await store.db.fetchall("SELECT title FROM community_kept_titles"),
                await store.db.fetchall("SELECT state FROM community_kept_readings"))

    assert run(db, scenario) == (({}, []), [], [])


def test_every_full_every_th_run_is_full(db, run):
    config = parse_config({"rem": {"community_detection": {"full_every": 3}}}, "t")

    async def scenario(store):
        await _seed(store, 60)
        seen = []
        for i in range(5):
            report = await engine.run_cycle(store, config, P, OPS)
            seen.append(report.operations[0].summary.get("incremental"))
            await store.lessons.add(f"n{i}", f"When the webhook retry fails {i}", "Retry the webhook later.")
        return seen

    assert run(db, scenario) == [False, True, True, False, True]


INCREMENTAL_SCRIPT = """
import json, random
from tests.test_community_incremental import SETTINGS, change, corpus
from mgcp.operations import community_detection
from mgcp.operations.shared import CycleCache

rng = random.Random(4)
before = corpus(rng, 300)
first = community_detection.run(before, None, SETTINGS, cache=CycleCache())
after = change(rng, before, 0.05)
result = community_detection.run(after, first.communities, SETTINGS, first.graph_hash, first.modularity,
                                 cache=CycleCache(), kept=first.kept)
print(json.dumps([result.incremental, result.communities, [f.fingerprint for f in result.findings],
                  result.kept.lessons.state().hex()]))
"""


def test_an_incremental_run_does_not_depend_on_the_hash_seed():
    from hashseeds import outputs_under_hash_seeds

    outputs = outputs_under_hash_seeds(INCREMENTAL_SCRIPT)
    assert outputs[0][0] is True
    assert outputs[0] == outputs[1] == outputs[2]


def test_a_damaged_kept_lessons_state_is_ignored_and_the_run_is_full():
    from mgcp.engine.cycle import _kept_communities
    from mgcp.operations.community_detection import KEPT_RULES, KeptLessons

    rng = random.Random(14)
    before = corpus(rng, 200)
    first = full(before)
    state = first.kept.lessons.state()
    read = KeptLessons.read(state)
    assert read.state() == state and read.ids == first.kept.lessons.ids
    damaged = bytearray(state)
    damaged[-3] ^= 1  # a score's byte
    assert KeptLessons.read(bytes(damaged)) is None and KeptLessons.read(state[:-8]) is None
    assert KeptLessons.read(None) is None and KeptLessons.read(state.decode("latin-1")) is None

    def made(ids, label, lengths, other, score=None):  # framed as a run frames it, but not what one keeps
        score = [0.5] * len(other) if score is None else score
        return framed.frame({"rules": KEPT_RULES}, [
            json.dumps(ids).encode(), bytes(16 * len(ids)), np.array(label, dtype="<i8").tobytes(),
            np.zeros(len(ids), dtype="<u8").tobytes(), np.array(lengths, dtype="<i4").tobytes(),
            np.array(other, dtype="<i4").tobytes(), np.array(score, dtype="<f8").tobytes()])

    assert KeptLessons.read(made(["a", "b"], [0, 0], [1, 1], [1, 0])) is not None
    for bad in [made(["b", "a"], [0, 0], [1, 1], [1, 0]),  # ids out of order
                made(["a", "b"], [0, -1], [1, 1], [1, 0]),  # a label below 0
                made(["a", "b"], [0, 0], [1, 1], [0, 0]),  # a lesson its own candidate
                made(["a", "b"], [0, 0], [1, 1], [1, 2]),  # a candidate out of range
                made(["a", "b"], [0, 0], [2, 1], [1, 0]),  # lengths that do not add up
                made(["a", "b"], [0, 0], [1, 1], [1, 0], [0.5, float("nan")])]:
        assert KeptLessons.read(bad) is None
    # the engine's reading of it: the readings and titles stay usable, the run is a full one
    kept = _kept_communities((first.kept.settings + "@" + engine.cycle.__version__, 0, bytes(damaged),
                              first.kept.titles, first.kept.readings))
    assert kept.lessons is None and kept.titles == first.kept.titles
    after = change(rng, before, 0.05)
    result = community_detection.run(after, first.communities, SETTINGS, cache=CycleCache(), kept=kept)
    assert not result.incremental and result.communities == full(after).communities


def test_a_run_from_a_state_kept_of_no_lessons_adds_them_all():
    first = full([])
    rng = random.Random(15)
    lessons = corpus(rng, 100)
    result = community_detection.run(lessons, first.communities, SETTINGS, cache=CycleCache(), kept=first.kept)
    assert result.incremental and result.kept.lessons.ids == sorted(x.id for x in lessons)
    assert result.communities  # every lesson searched and placed
    stored = community_detection.KeptLessons.read(first.kept.lessons.state())  # as the engine keeps it, and reads it back
    assert stored is not None and stored.ids == [] and len(stored.candidates.other) == 0


def test_readings_are_kept_again_only_past_a_share_and_a_run_on_older_ones_finds_the_same():
    rng = random.Random(16)
    before = corpus(rng, 500)
    first = full(before)

    def refined(lessons, ids):
        return [x.model_copy(update={"action": x.action + " Then ping the owner.", "version": x.version + 1})
                if x.id in ids else x for x in lessons]

    after = refined(before, {"l0003", "l0104", "l0205"})  # 0.6% of the lessons: below `shared.BEHIND`
    second = community_detection.run(after, first.communities, SETTINGS, first.graph_hash, first.modularity,
                                     cache=CycleCache(), kept=first.kept)
    assert second.incremental and second.described > 0  # titles were drawn: the keywords and phrases read
    assert second.kept.readings == {}
    # kept as the engine keeps them (a reading not returned stays as it was), then used by the next run
    again = refined(after, {"l0007", "l0308", "l0409"})
    outcomes = []
    for readings in ({**first.kept.readings, **second.kept.readings}, {}):
        kept = community_detection.Kept(second.kept.settings, second.kept.runs_since_full, second.kept.lessons,
                                        second.kept.titles, readings)
        third = community_detection.run(again, second.communities, SETTINGS, second.graph_hash, second.modularity,
                                        cache=CycleCache(), kept=kept)
        outcomes.append((third.communities, third.described, [f.fingerprint for f in third.findings]))
    assert outcomes[0] == outcomes[1]
    # past the share, both are kept again
    many = refined(before, {x.id for x in before[::20]})
    assert set(community_detection.run(many, first.communities, SETTINGS, cache=CycleCache(),
                                       kept=first.kept).kept.readings) == {"keywords", "phrases"}
