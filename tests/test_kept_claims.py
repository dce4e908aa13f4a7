"""The contradiction scan's kept claim search (`mgcp.operations.claim_search.KeptClaims`, `kept_pairs`
"contradiction_scan"): a repeat that reads and compares only the actions new since the last search
finds exactly what a full scan finds, and the kept state is a cache."""

import json
import random
import sqlite3

import pytest

import planted
from clihelp import mgcp
from mgcp import engine
from mgcp import text
from mgcp.config import DEFAULTS, parse_config
from mgcp.engine import cycle
from mgcp.models import Lesson
from mgcp.operations import claim_search, contradiction_scan
from mgcp.operations.claim_search import KeptClaims

SETTINGS = {**DEFAULTS["contradiction_scan"], "max_findings": 10_000}
TS = "2026-01-01T00:00:00+00:00"
P = planted.PROJECT


def lesson(id, trigger, action):
    return Lesson(id=id, trigger=trigger, action=action, created_at=TS, last_refined=TS, tags=["t"])


def _json(findings) -> list:
    return [f.model_dump(mode="json") for f in findings]


@pytest.fixture
def full_searches(monkeypatch) -> list[int]:
    """How many actions each full search read (one entry per full search)."""
    calls = []
    original = claim_search._Search.__init__

    def init(self, actions, claim_at, scan):
        calls.append(len(actions))
        original(self, actions, claim_at, scan)

    monkeypatch.setattr(claim_search._Search, "__init__", init)
    return calls


# Actions from a few things and a few ways to say or refuse them, so that contradictions, agreeing
# paraphrases, partial overlaps and actions with nothing to refuse all come up.
THINGS = ["mocks for the payment gateway", "a global settings singleton", "server side cursors for large exports",
          "black before committing", "strict mode in tsconfig", "pnpm", "npm", "the result cache", "tabs",
          "spaces for indentation", "retries with backoff", "the staging database"]
SAYING = ["Use {}.", "Always use {}.", "Enable {}.", "Prefer {} over {}.", "Keep {} for every module."]
REFUSING = ["Never use {}.", "Avoid {}.", "Don't use {}.", "Disable {}.", "Use {} instead of {}."]
TRIGGERS = ["writing tests for the api", "configuring the build", "setting up the project", "exporting tables"]


def _action(rng) -> str:
    form = rng.choice(SAYING + REFUSING + ["{} then {}.", "Check {} twice."])
    return form.format(*rng.sample(THINGS, form.count("{}")))


def test_the_kept_search_finds_what_a_full_search_finds_over_random_changes(full_searches):
    """Random corpora changed at random over several cycles (actions refined, lessons archived,
    added, copied, and new refusals of what unread actions say): each repeat gives the full
    scan's pairs (claim pairs and findings, bit for bit) with one full search only, the first."""
    rng = random.Random(11)
    repeats = findings = 0
    for corpus in range(40):
        claim_at = rng.choice([0.6, 0.4, 0.8])
        settings = {**SETTINGS, "claim_threshold": claim_at}
        lessons = [lesson(f"l{i:03d}", rng.choice(TRIGGERS), _action(rng)) for i in range(rng.randint(2, 40))]
        state, count = None, 0
        for step in range(4):
            calls = len(full_searches)
            search = KeptClaims(state)
            got = contradiction_scan.run(lessons, settings, kept=search)
            assert len(full_searches) == calls + (step == 0 or state is None), (corpus, step)
            assert (search.fresh is None) == (state is None)
            expected = contradiction_scan.run(lessons, settings)
            assert _json(got) == _json(expected), (corpus, step)
            actions = list(dict.fromkeys(x.action for x in sorted(lessons, key=lambda x: x.id)))
            assert (sorted(KeptClaims(state).search(actions, claim_at, contradiction_scan)[1])
                    == sorted(claim_search.search(actions, claim_at, contradiction_scan)[1]))
            repeats += state is not None
            findings += len(got)
            state = search.keep or state
            for _ in range(rng.randint(1, 5)):
                what = rng.random()
                i = rng.randrange(len(lessons))
                if what < 0.25:
                    lessons[i] = lesson(lessons[i].id, lessons[i].trigger, _action(rng))
                elif what < 0.4 and len(lessons) > 2:
                    del lessons[i]
                elif what < 0.6:
                    lessons.append(lesson(f"c{corpus}-{step}-{count}", rng.choice(TRIGGERS), lessons[i].action))
                elif what < 0.8:  # a refusal of what another action says
                    said = lessons[i].action.rstrip(".").split(" ", 1)[-1]
                    lessons.append(lesson(f"r{corpus}-{step}-{count}", lessons[i].trigger, f"Never {said}."))
                else:
                    lessons.append(lesson(f"n{corpus}-{step}-{count}", rng.choice(TRIGGERS), _action(rng)))
                count += 1
    assert repeats == 40 * 3 and findings > 100


def test_a_new_refusal_reads_an_action_the_kept_search_left_unread(full_searches):
    """An action with nothing to refuse that no refused claim met is left unread; a new lesson
    refusing what it says makes the repeat read it, and the pair is found."""
    lessons = [lesson("a", "caching query results", "Cache the results of the report query."),
               lesson("b", "naming things", "Name helpers after what they return.")]
    search = KeptClaims()
    assert contradiction_scan.run(lessons, SETTINGS, kept=search) == []
    lessons.append(lesson("c", "caching query results", "Never cache the results of the report query."))
    again = KeptClaims(search.keep)
    [finding] = contradiction_scan.run(lessons, SETTINGS, kept=again)
    assert set(finding.subject) == {"a", "c"} and again.fresh == 1 and len(full_searches) == 1
    assert _json([finding]) == _json(contradiction_scan.run(lessons, SETTINGS))


def test_an_action_kept_once_contradicts_itself_in_a_copy():
    """An action that says and refuses the same thing is a pair of lessons once a second lesson holds
    it: the kept pairs hold an action's pairs with itself."""
    action = "Use mocks for the payment gateway. Avoid mocks for the payment gateway."
    lessons = [lesson("a", "testing payments", action), lesson("b", "naming things", "Name it well.")]
    search = KeptClaims()
    assert contradiction_scan.run(lessons, SETTINGS, kept=search) == []
    lessons.append(lesson("c", "testing payments", action))
    again = KeptClaims(search.keep)
    found = contradiction_scan.run(lessons, SETTINGS, kept=again)
    assert again.fresh == 0 and [set(f.subject) for f in found] == [{"a", "c"}]
    assert _json(found) == _json(contradiction_scan.run(lessons, SETTINGS))


def test_the_trigger_similarity_is_scored_again_on_the_triggers_of_now():
    """A kept claim pair whose triggers grow apart is not raised, and raised again when they meet:
    only claim pairs are kept, never a trigger score."""
    lessons = [lesson("a", "choosing a test runner", "Prefer pytest over unittest."),
               lesson("b", "choosing a test runner", "Prefer unittest over pytest.")]
    search = KeptClaims()
    assert len(contradiction_scan.run(lessons, SETTINGS, kept=search)) == 1
    apart = [lessons[0], lesson("b", "formatting yaml config", "Prefer unittest over pytest.")]
    again = KeptClaims(search.keep)
    assert contradiction_scan.run(apart, SETTINGS, kept=again) == [] and again.fresh == 0 and again.keep is None
    assert len(contradiction_scan.run(lessons, SETTINGS, kept=KeptClaims(search.keep))) == 1


def test_the_action_digests_of_the_cycles_corpus_are_those_the_search_makes():
    """With the corpus of every action built in the cycle (duplicate detection's), the search takes
    the actions' digests from it: the same findings and the same state as without it, first and
    after a change."""
    from mgcp.operations.shared import CycleCache, Reader

    rng = random.Random(11)
    lessons = sorted([lesson(f"l{i:02d}", rng.choice(TRIGGERS), _action(rng)) for i in range(60)], key=lambda x: x.id)
    later = sorted(lessons[5:] + [lesson(f"m{i}", rng.choice(TRIGGERS), _action(rng)) for i in range(8)],
                   key=lambda x: x.id)
    state = {}
    for with_corpus in (False, True):
        kept, found = None, []
        for these in (lessons, later):
            cache = CycleCache(reader=Reader())
            if with_corpus:
                texts = [x.action for x in these]
                cache.reader.corpus(texts, lambda i: contradiction_scan.text.terms(texts[i]))
                assert cache.reader.built_corpus(list(texts)) is not None
            search = KeptClaims(kept)
            found.append(_json(contradiction_scan.run(these, SETTINGS, cache, kept=search)))
            kept = search.keep
        state[with_corpus] = (found, kept)
    assert state[True] == state[False] and state[True][0][0] and state[True][0][1]


def test_a_stale_or_broken_state_means_a_full_search_with_the_same_result(full_searches):
    rng = random.Random(4)
    lessons = [lesson(f"l{i:02d}", rng.choice(TRIGGERS), _action(rng)) for i in range(40)]
    search = KeptClaims()
    expected = _json(contradiction_scan.run(lessons, SETTINGS, kept=search))
    good = search.keep
    assert expected and good
    other = {**SETTINGS, "claim_threshold": 0.4}
    for state, settings in [(good[:-5], SETTINGS), (b"nonsense", SETTINGS), (good, other),
                            (good.replace(claim_search.rules(contradiction_scan).hex().encode(), b"0" * 32), SETTINGS)]:
        calls = len(full_searches)
        again = KeptClaims(state)
        found = _json(contradiction_scan.run(lessons, settings, kept=again))
        assert len(full_searches) == calls + 1 and again.fresh is None and again.keep  # a full search, kept anew
        assert found == (expected if settings is SETTINGS else _json(contradiction_scan.run(lessons, settings)))


# -- in the engine: kept between cycles in `kept_pairs` ------------------------------------------------

CONFIG = parse_config({"rem": {"contradiction_scan": {"max_findings": 500}}}, "test")
OPS = ["contradiction_scan"]


def _kept(path) -> dict:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT search, state FROM kept_pairs"))
    finally:
        conn.close()


async def _analysed(store) -> tuple:
    """The scan's findings (before those already pending are left out) and summary, then the
    cycle's stored findings."""
    project = await store.queue.project(P)
    plan = cycle._plan(CONFIG, project, await store.rem.state(project.project_id), OPS)
    [analysis] = [a async for a in cycle._analyse(store, CONFIG, project, plan, None)]
    found = (analysis.error, {k: v for k, v in analysis.summary.items() if k != "input_digest"}, _json(analysis.findings))
    report = await engine.run_cycle(store, CONFIG, P, OPS)
    return found, sorted((f.fingerprint, json.dumps(f.data, sort_keys=True)) for f in report.findings)


async def _change(store):
    """Refined, archived, added (a copy, a new rule), and a rule refusing another one's advice."""
    await planted.change_a_few(store)
    rows = await store.lessons.rows()
    cursors = next(row for row in rows if row.id == "postgres-server-side-cursor-exports")
    await store.lessons.add("no-cursors-anywhere", cursors.trigger, "Never use server-side cursors for large CSV exports.")


def test_a_repeat_cycle_finds_what_a_cycle_with_nothing_kept_finds(tmp_path, run, full_searches):
    path = tmp_path / "a.db"
    planted.build(path)
    first = run(path, _analysed)
    assert first[0][2] and list(_kept(path)) == ["contradiction_scan"] and len(full_searches) == 1
    run(path, _change)
    other = planted.copy_without(path, tmp_path / "b.db", "kept_pairs")
    calls = len(full_searches)
    repeat = run(path, _analysed)
    assert len(full_searches) == calls  # the analysis and the cycle each read only the new actions
    full = run(other, _analysed)
    assert len(full_searches) == calls + 1 and _kept(other)  # nothing kept: a full search, kept for the cycle
    assert repeat == full
    assert repeat[0][0] is None and len(repeat[0][2]) > len(first[0][2])
    # both keep the same actions and claim pairs (the repeat reads every new action, the full search
    # only those that can meet a refused claim)
    made_by = claim_search.rules(contradiction_scan)
    kept, fresh = (claim_search._State.decode(_kept(p)["contradiction_scan"], 0.6, made_by) for p in (path, other))
    assert kept.digests.tolist() == fresh.digests.tolist() and kept.pairs == fresh.pairs and kept.pairs


def test_the_state_of_other_searches_is_left_alone_and_another_state_is_ignored(tmp_path, run, full_searches):
    path = tmp_path / "a.db"
    planted.build(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO kept_pairs (search, state) VALUES ('contradiction_scan', ?), ('duplicate_detection', ?)",
                 [b"kept by another version", b"another search's state"])
    conn.commit()
    conn.close()
    found = run(path, _analysed)
    assert len(full_searches) == 1 and found[0][2]  # the analysis could not use what was kept; the cycle used its state
    kept = _kept(path)
    assert kept["duplicate_detection"] == b"another search's state" and kept["contradiction_scan"] != b"kept by another version"


def test_a_dry_run_keeps_no_search_state(tmp_path):
    path = tmp_path / "a.db"
    planted.build(path)
    code, out, err = mgcp("rem", "run", "--project", P, "--op", "contradiction_scan", "--auto", "--dry-run",
                          "--json", "--db", str(path))
    assert code == 0, err
    assert any(f["kind"] == "contradiction" for f in json.loads(out)["report"]["findings"])
    assert _kept(path) == {}
    code, out, err = mgcp("rem", "run", "--project", P, "--op", "contradiction_scan", "--json", "--db", str(path))
    assert code == 0, err
    assert list(_kept(path)) == ["contradiction_scan"]


DETERMINISM_SCRIPT = """
import json
from mgcp.config import DEFAULTS
from mgcp.models import Lesson
from mgcp.operations import contradiction_scan
from mgcp.operations.claim_search import KeptClaims

def lesson(i, trigger, action):
    return Lesson(id=i, trigger=trigger, action=action, created_at="2026-01-01T00:00:00+00:00",
                  last_refined="2026-01-01T00:00:00+00:00", tags=["t"])

things = %r
triggers = %r
forms = ["Use {}.", "Avoid {}.", "Never use {}.", "Prefer {} over {}.", "Use {} instead of {}.", "Check {} twice."]
lessons = [lesson(f"l{i:03d}", triggers[i %% 4], forms[(i // 12) %% len(forms)].format(things[i %% 12], things[(i + 5) %% 12]))
           for i in range(120)]
settings = {**DEFAULTS["contradiction_scan"], "max_findings": 25}
first = KeptClaims()
contradiction_scan.run(lessons, settings, kept=first)
lessons = lessons[7:] + [lesson("n1", triggers[0], "Never check " + things[2] + " twice."),
                         lesson("n2", triggers[1], lessons[20].action)]
again = KeptClaims(first.keep)
findings = contradiction_scan.run(lessons, settings, kept=again)
print(json.dumps([again.fresh, [(f.kind, f.fingerprint, f.data.get("claim_overlap"), f.data.get("trigger_similarity")) for f in findings]]))
""" % (THINGS, TRIGGERS)


def test_the_repeat_findings_do_not_depend_on_the_hash_seed():
    from hashseeds import outputs_under_hash_seeds

    outputs = outputs_under_hash_seeds(DETERMINISM_SCRIPT)
    assert outputs[0][0] and outputs[0][1]
    assert outputs[0] == outputs[1] == outputs[2]


def _kept_claims(state, t: int) -> list[tuple[bool, frozenset[str]]]:
    """The compared claims a state keeps of action t: (polarity, words)."""
    rows = range(state.claim_start[t], state.claim_start[t + 1])
    return [(bool(state.table.positive[c]),
             frozenset(state.vocab[w] for w in state.table.word[state.table.start[c]:state.table.start[c + 1]]))
            for c in rows]


def test_the_kept_claims_of_a_repeat_are_each_actions_own():
    """What a repeat keeps of each action (kept ones carried over, new ones read) is what reading
    the action gives: its compared claims when it was read, else its stems; and each claim a repeat
    gives of a kept action is the one its text reads as."""
    rng = random.Random(5)
    actions = list(dict.fromkeys(_action(rng) for _ in range(80)))
    search = KeptClaims()
    search.search(actions, 0.6, contradiction_scan)
    unread = 0
    for _ in range(6):
        kept = claim_search._State.decode(search.keep, 0.6, claim_search.rules(contradiction_scan))
        actions = [a for a in actions if rng.random() > 0.1] + [_action(rng) + f" ({n})" for n in range(5)]
        rng.shuffle(actions) if rng.random() < 0.3 else None
        actions = list(dict.fromkeys(actions))
        search = KeptClaims(search.keep or kept.encode())
        claims_of, _ = search.search(actions, 0.6, contradiction_scan)
        state = claim_search._State.decode(search.keep, 0.6, claim_search.rules(contradiction_scan))
        assert state.read.any()
        for t, action in enumerate(actions):
            compared = contradiction_scan._compared(action)
            if state.read[t]:
                assert _kept_claims(state, t) == [(c.positive, c.about) for c in compared], action
                assert claims_of(t) == compared
            else:
                unread += 1
                stems = {text.stem(w) for w in contradiction_scan._screen(action)}
                assert {state.vocab[w] for w in state.stem_word[state.stem_start[t]:state.stem_start[t + 1]]} == stems
    assert unread


@pytest.mark.parametrize("spoil", ["a read flag past 1", "claims of an unread action"])
def test_a_kept_claim_state_whose_parts_disagree_is_ignored(spoil, full_searches):
    rng = random.Random(6)
    lessons = [lesson(f"l{i:02d}", rng.choice(TRIGGERS), _action(rng)) for i in range(40)]
    search = KeptClaims()
    expected = _json(contradiction_scan.run(lessons, SETTINGS, kept=search))
    made_by = claim_search.rules(contradiction_scan)
    state = claim_search._State.decode(search.keep, SETTINGS["claim_threshold"], made_by)
    assert state is not None
    read = state.read.astype("u1")
    if spoil == "a read flag past 1":
        read[0] = 2
    else:
        read[int(state.table.text[0])] = 0
    state.read = read
    calls = len(full_searches)
    again = KeptClaims(state.encode())
    assert _json(contradiction_scan.run(lessons, SETTINGS, kept=again)) == expected
    assert len(full_searches) == calls + 1 and again.fresh is None
