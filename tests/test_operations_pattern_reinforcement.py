import pytest

from mgcp.config import DEFAULTS
from mgcp.models import Lesson, LessonStatus
from mgcp.operations import pattern_reinforcement
from mgcp.reinforcement import cluster_key, identity, normalize, reinforcement_boost

SETTINGS = {**DEFAULTS["pattern_reinforcement"], "enabled": True}
NOW = "2026-05-01T00:00:00+00:00"
LATER = "2026-05-02T00:00:00+00:00"


def lesson(id, action, created, status=LessonStatus.active, trigger="when deploying"):
    return Lesson(id=id, trigger=trigger, action=action, created_at=created, last_refined=created, status=status)


def snap(id, session, decisions=(), notes="", project="p1"):
    return (project, session, f"2026-04-{session:02d}T00:00:00", notes, list(decisions))


def observed(session, decision, project="p1"):
    return {"project_id": project, "session_number": session, "decision": decision,
            "observed_at": f"2026-04-{session:02d}T00:00:00"}


def run(lessons=(), history=(), observations=(), existing=None, settings=SETTINGS, now=NOW, project="p1",
        wordings=None, settled=frozenset()):
    observed = pattern_reinforcement.Observations.of(list(history), list(observations), settings["categories"])
    observed = observed.observed()
    return pattern_reinforcement.run(list(lessons), observed, existing or {}, settings, now, project_id=project,
                                     wordings=wordings, settled=settled)


def test_normalize_trims_lowercases_collapses_and_keeps_200_characters():
    assert normalize("  Use   PNPM\n workspaces ") == "use pnpm workspaces"
    assert normalize("x" * 300) == "x" * 200
    assert cluster_key("decision", " A  b") == "decision::a b"


@pytest.mark.parametrize("count, expected", [(0, 0.0), (1, 0.05), (4, 0.2), (6, 0.3), (30, 0.3)])
def test_boost_is_weight_times_count_capped(count, expected):
    assert reinforcement_boost(count, 0.05, 0.3) == pytest.approx(expected)


def test_thirty_sessions_of_one_decision_make_one_pattern_of_thirty():
    result = run(observations=[observed(s, "Use pnpm workspaces") for s in range(1, 31)])
    [pattern] = result.patterns
    assert pattern.reinforcement_count == 30 and pattern.category == "decision"
    assert pattern.derived_from == [f"session:p1:{s}" for s in range(1, 31)]
    assert pattern.derived_via == "pattern-reinforcement" and pattern.canonical == "session:p1:30"


def test_a_second_run_on_the_same_data_writes_nothing():
    data = [observed(s, "Use pnpm workspaces") for s in range(1, 31)]
    first = run(observations=data)
    again = run(observations=data, existing={p.cluster_key: p for p in first.patterns}, now=LATER)
    assert again.patterns == [] and again.unchanged == 1


def test_count_grows_only_when_the_cluster_grows():
    data = [observed(s, "Use pnpm workspaces") for s in range(1, 4)]
    [first] = run(observations=data).patterns
    [grown] = run(observations=data + [observed(4, "use pnpm  workspaces")],
                  existing={first.cluster_key: first}, now=LATER).patterns
    assert (grown.reinforcement_count, grown.last_reinforced_at) == (4, LATER)


def test_changed_membership_refreshes_provenance_without_bumping_the_count():
    data = [observed(s, "Use pnpm workspaces") for s in range(1, 5)]
    [first] = run(observations=data).patterns
    rotated = data[1:] + [observed(9, "Use pnpm workspaces")]
    [refreshed] = run(observations=rotated[1:], existing={first.cluster_key: first}, now=LATER).patterns
    assert refreshed.reinforcement_count == 4 and refreshed.last_reinforced_at == NOW
    assert refreshed.derived_from[-1] == "session:p1:9" and refreshed.updated_at == LATER


def test_a_decision_carried_from_save_to_save_counts_once():
    history = [snap(i, i, ["Use pnpm workspaces"], notes=f"n{i}") for i in range(1, 6)]
    result = run(history=history, settings={**SETTINGS, "min_count": 2})
    assert result.patterns == []


def test_a_decision_that_enters_the_history_again_counts_again():
    history = [snap(1, 1, ["Use pnpm"]), snap(2, 2, ["Other"]), snap(3, 3, ["Other", "Use pnpm"])]
    [pattern] = run(history=history, settings={**SETTINGS, "min_count": 2}).patterns
    assert pattern.derived_from == ["session:p1:1", "session:p1:3"]


def test_a_decision_and_a_note_with_the_same_words_stay_apart():
    history = [snap(i, i, notes=f"Session {i}. Run the linter before every commit.") for i in range(1, 4)]
    observations = [observed(s, "Run the linter before every commit.") for s in range(1, 4)]
    result = run(history=history, observations=observations)
    assert sorted(p.category for p in result.patterns) == ["decision", "note"]


def test_notes_count_only_when_written_anew():
    same = [snap(i, i, decisions=[f"d{i}"], notes="Connection pooling keeps timing out.") for i in range(1, 5)]
    assert [p for p in run(history=same).patterns if p.category == "note"] == []
    rewritten = [snap(i, i, notes=f"Day {i}. Connection pooling keeps timing out.") for i in range(1, 5)]
    [pattern] = run(history=rewritten).patterns
    assert pattern.reinforcement_count == 4 and pattern.text == "Connection pooling keeps timing out."


def test_slight_note_sentences_are_not_patterns():
    history = [snap(i, i, notes=f"Day {i}. Tests pass.") for i in range(1, 6)]
    assert run(history=history).patterns == []


@pytest.mark.parametrize("min_count, made", [(0, True), (1, True), (2, True), (3, False), (5000, False)])
def test_min_count_is_clamped_to_two_and_up(min_count, made):
    data = [observed(s, "Use pnpm") for s in (1, 2)]
    assert bool(run(observations=data, settings={**SETTINGS, "min_count": min_count}).patterns) == made


def test_categories_limit_what_is_clustered():
    data = [observed(s, "Use pnpm") for s in range(1, 4)]
    assert run(observations=data, settings={**SETTINGS, "categories": ["lesson"]}).patterns == []
    assert run(observations=data, settings={**SETTINGS, "categories": []}).patterns == []


def test_lessons_added_again_get_the_most_recent_active_as_canonical():
    lessons = [lesson("a", "Pin  dependencies.", "2026-01-01"), lesson("b", "pin dependencies.", "2026-02-01"),
               lesson("c", "Pin dependencies.", "2026-03-01"),
               lesson("d", "Pin dependencies.", "2026-04-01", LessonStatus.archived)]
    result = run(lessons)
    [pattern] = result.patterns
    assert (pattern.lesson_id, pattern.reinforcement_count) == ("c", 3)
    [finding] = result.findings
    assert finding.kind == "reinforced_duplicates" and finding.data["canonical"] == "c"
    assert finding.data["others"] == ["a", "b"] and set(finding.subject) == {"a", "b", "c"}
    assert finding.options[finding.recommended - 1].action == "supersede_duplicates"


def test_superseded_copies_still_count_and_raise_no_finding():
    lessons = [lesson("a", "Pin dependencies.", "2026-01-01", LessonStatus.superseded),
               lesson("b", "Pin dependencies.", "2026-02-01", LessonStatus.superseded),
               lesson("c", "Pin dependencies.", "2026-03-01")]
    result = run(lessons)
    assert result.patterns[0].reinforcement_count == 3 and result.findings == []


def test_a_recurring_decision_no_lesson_holds_is_a_draft_finding_naming_count_and_sessions():
    result = run(observations=[observed(s, "Use pnpm workspaces") for s in (2, 5, 7)])
    [finding] = result.findings
    assert finding.kind == "reinforced_draft" and finding.data["count"] == 3
    assert finding.data["sessions"] == [{"project_id": "p1", "project": "p1", "sessions": [2, 5, 7]}]
    assert "3 sessions" in finding.title and "sessions 2, 5, 7" in finding.description
    assert finding.data["draft"]["action"] == "Use pnpm workspaces"


def test_a_draft_is_made_of_the_run_projects_own_sessions_and_wording_alone():
    data = [observed(s, "Use pnpm workspaces") for s in (2, 5, 7)] + [
        observed(s, "use PNPM workspaces", project="p2") for s in (1, 2, 3, 4)]
    for project, sessions in (("p1", [2, 5, 7]), ("p2", [1, 2, 3, 4])):
        result = run(observations=data, project=project, wordings={"decision::use pnpm workspaces": f"{project} said"})
        [finding] = result.findings
        assert result.patterns[0].reinforcement_count == 7  # the knowledge base's pattern counts both
        assert finding.data["count"] == len(sessions) and finding.data["text"] == f"{project} said"
        assert finding.data["sessions"] == [{"project_id": project, "project": project, "sessions": sessions}]
    assert run(observations=data, project="p3").findings == run(observations=data, project=None).findings == []


def test_a_drafts_tags_are_words_not_stems():
    data = [observed(s, "Use pnpm workspaces for integrations") for s in (1, 2, 3)]
    [finding] = run(observations=data, project="p1").findings
    tags = finding.data["draft"]["tags"]
    assert "workspaces" in tags and "workspac" not in tags, tags


def test_a_projects_own_wording_is_the_latest_in_the_sessions_read():
    key, other = "decision::use pnpm workspaces", "decision::pin node"
    snapshots = [snap(1, 3, ["Use pnpm workspaces"]), snap(2, 7, ["use PNPM workspaces ", "Pin node"])]
    decided = [observed(3, "USE PNPM WORKSPACES")]
    assert pattern_reinforcement.own_wordings([key, "decision::ship"], snapshots, decided) == {
        key: "use PNPM workspaces"}
    assert pattern_reinforcement.own_wordings([key, other], snapshots[:1], decided) == {key: "Use pnpm workspaces"}


def test_a_lesson_holding_the_decision_is_reinforced_instead():
    holder = lesson("pnpm", "Always use pnpm workspaces in this monorepo.", "2026-01-01")
    result = run([holder], observations=[observed(s, "use pnpm workspaces") for s in (1, 2, 3)])
    assert result.findings == [] and result.patterns[0].lesson_id == "pnpm"


def test_history_fed_in_pages_gives_what_it_gives_whole():
    sessions = [("p1", s) for s in range(1, 8)] + [("p2", s) for s in range(1, 6)]
    history = [snap(i, s, [f"d{s % 3}", "Use pnpm"][: 1 + s % 2], notes=f"Day {s}. Keep the pool warm at night.",
                    project=p) for i, (p, s) in enumerate(sessions)]
    whole = run(history=history, settings={**SETTINGS, "min_count": 2})
    for cut in range(1, len(history)):
        observed = pattern_reinforcement.Observations(SETTINGS["categories"])
        observed.add_history(history[:cut])
        observed.add_history(history[cut:])
        paged = pattern_reinforcement.run([], observed.observed(), {}, {**SETTINGS, "min_count": 2}, NOW,
                                          project_id="p1")
        assert paged.patterns == whole.patterns, cut
    assert {p.category for p in whole.patterns} == {"decision", "note"}


# -- what counts as a copy ------------------------------------------------------------------------

OPENING = "Before you cut a release, " + "check the changelog, the version bump and the tag in that order; " * 4

PAIRS = {**SETTINGS, "min_count": 2}


@pytest.mark.parametrize("a, b", [("Use WAL-mode!", "use  wal mode"), ("Pin  Versions.", "pin versions"),
                                  ("ＦＵＬＬ width", "full WIDTH"), ("Straße", "STRASSE"), ("", "  ")])
def test_copy_identity_is_the_write_time_dedup_rule(a, b):
    from mgcp.quality import normalized

    assert identity(a) == identity(b) == normalized(a) == normalized(b)
    assert identity(a + " and more") != identity(b)


def reproduced():
    """The review's case: one opening, three situations, three endings past the cluster key."""
    return [lesson("a1", OPENING + "Then announce it.", "2026-01-01", trigger="when releasing"),
            lesson("a2", OPENING + "Then pair with the newcomer.", "2026-02-01", trigger="when onboarding"),
            lesson("a3", OPENING + "Then rerun the flaky job.", "2026-03-01", trigger="when CI is flaky")]


def test_lessons_with_other_triggers_are_reported_for_a_person_not_as_copies():
    result = run(reproduced())
    [pattern] = result.patterns
    assert (pattern.lesson_id, pattern.reinforcement_count) == ("a3", 3)  # one cluster: the opening is shared
    [finding] = result.findings
    assert finding.data["normalized_equal"] is False
    assert finding.options[finding.recommended - 1].action == "keep"
    assert finding.data["differences"] == {
        "a1": ["trigger", "action after the first 200 characters"],
        "a2": ["trigger", "action after the first 200 characters"]}
    assert "not a copy, it differs in: trigger; action after the first 200 characters" in finding.description
    assert 'in that order; Then rerun the flaky job."' in finding.description
    assert "not copies" in finding.title


def test_one_action_under_other_triggers_is_titled_so_not_as_actions_alike():
    lessons = [lesson(f"d{i}", "Keep environment variables out of the client bundle.", f"2026-0{i}-01",
                      trigger=f"setting up auth in app {i}") for i in (1, 2, 3)]
    [finding] = run(lessons).findings
    assert finding.title.startswith("3 lessons give one action under different triggers")
    assert finding.data["normalized_equal"] is False


def test_actions_that_differ_after_200_characters_are_not_copies():
    lessons = [lesson("b1", OPENING + "Then announce it.", "2026-01-01"),
               lesson("b2", OPENING + "Then announce it.", "2026-02-01"),
               lesson("b3", OPENING + "Then rerun the flaky job.", "2026-03-01")]
    [finding] = run(lessons).findings
    assert finding.data["normalized_equal"] is False and finding.recommended == 2
    assert finding.data["differences"] == {"b1": ["action after the first 200 characters"],
                                           "b2": ["action after the first 200 characters"]}


def test_copies_up_to_case_spacing_and_punctuation_may_be_superseded_automatically():
    # The cluster key keeps punctuation in the action's first 200 characters (the clustering rule);
    # the copy identity ignores it everywhere, so punctuation past the key and in triggers is no difference.
    lessons = [lesson("c1", OPENING + "Then announce it!", "2026-01-01", trigger="Before a Release:"),
               lesson("c2", OPENING.upper() + "then  announce it", "2026-02-01", trigger="before a  release"),
               lesson("c3", OPENING + "Then announce it.", "2026-03-01", trigger="before a release")]
    [finding] = run(lessons).findings
    assert finding.data["normalized_equal"] is True and finding.data["differences"] == {}
    assert finding.options[finding.recommended - 1].action == "supersede_duplicates"
    assert (finding.data["canonical"], finding.data["others"]) == ("c3", ["c1", "c2"])
    assert "the most recent" in finding.data["kept_because"]


def test_a_copy_used_or_refined_more_is_the_one_kept_and_the_finding_says_why():
    used = [lesson("u1", "Pin dependencies.", "2026-01-01"), lesson("u2", "Pin dependencies.", "2026-02-01")]
    used[0].usage_count = 9
    [finding] = run(used, settings=PAIRS).findings
    assert (finding.data["canonical"], finding.data["others"]) == ("u1", ["u2"])
    assert 'used 9 times, more than the most recent member "u2" (0)' in finding.description
    refined = [lesson("r1", "Pin dependencies.", "2026-01-01"), lesson("r2", "Pin dependencies.", "2026-02-01")]
    refined[0].version = 4
    [finding] = run(refined, settings=PAIRS).findings
    assert finding.data["canonical"] == "r1"
    assert '4 versions, more than the most recent member "r2"' in finding.description
    [pattern] = run(refined, settings=PAIRS).patterns
    assert pattern.lesson_id == "r2"  # the pattern's canonical is still the most recent member


def test_one_member_that_is_not_a_copy_keeps_the_whole_finding_from_auto():
    lessons = [lesson("d1", "Pin dependencies.", "2026-01-01"), lesson("d2", "Pin dependencies.", "2026-02-01"),
               lesson("d3", "Pin dependencies.", "2026-03-01", trigger="when writing a script")]
    [finding] = run(lessons).findings
    assert finding.data["normalized_equal"] is False and finding.data["differences"] == {
        "d1": ["trigger"], "d2": ["trigger"]}
    assert "3 active lessons share their action up to case and spacing" in finding.description


# -- what the faster paths must leave unchanged ---------------------------------------------------

@pytest.mark.parametrize("said", ["a\x1cb\x1fc", "a\u2028b\u3000c\xa0d\x85e", "\tA  B\r\n", "İstanbul  Ǆ\u2029x", ""])
def test_normalize_collapses_exactly_the_unicode_whitespace_the_regex_does(said):
    import re

    assert normalize(said) == re.sub(r"\s+", " ", said.strip().lower())[:200]


def test_decisions_carried_over_as_none_give_what_the_lists_give():
    # history_pages passes None where a snapshot's recent decisions are the previous one's
    sessions = [("p1", s) for s in range(1, 9)] + [("p2", s) for s in range(1, 7)]
    history = [snap(i, s, [["Use pnpm"], ["Use pnpm", "Pin node"], ["Pin node"]][(s // 2) % 3],
                    notes=f"Day {s // 3}. Keep the pool warm at night.", project=p)
               for i, (p, s) in enumerate(sessions)]
    carried = [row[:4] + (None,) if i and row[0] == history[i - 1][0] and row[4] == history[i - 1][4] else row
               for i, row in enumerate(history)]
    assert any(row[4] is None for row in carried)
    settings = {**SETTINGS, "min_count": 2}
    whole = run(history=history, settings=settings)
    for cut in range(1, len(carried)):
        observed = pattern_reinforcement.Observations(SETTINGS["categories"])
        observed.add_history(carried[:cut])
        observed.add_history(carried[cut:])
        assert observed.snapshots == len(history)
        paged = pattern_reinforcement.run([], observed.observed(), {}, settings, NOW, project_id="p1")
        assert paged.patterns == whole.patterns and paged.findings == whole.findings, cut
    assert {p.category for p in whole.patterns} == {"decision", "note"}


def test_sources_observed_at_the_same_moment_are_ordered_by_source():
    at = "2026-04-01T00:00:00"
    history = [(project, 1, at, "Keep the connection pool warm overnight.", []) for project in ("p3", "p1", "p2")]
    history.append(("p1", 2, "2026-03-01T00:00:00", "Keep the connection pool warm overnight.", []))
    observed = pattern_reinforcement.Observations.of(history, []).observed()
    (key,) = observed.keys(2, {"note"})
    assert observed.sources(key) == ["session:p1:2", "session:p1:1", "session:p2:1", "session:p3:1"]


def _holding_by_hand(active, surface):
    """The rule `_Holders.holding` implements, written out plainly."""
    import math

    from mgcp import text

    ranked = sorted(active, key=lambda lesson: (lesson.created_at, lesson.id), reverse=True)
    full = " ".join(surface.strip().lower().split())
    for lesson in ranked:
        if " ".join(lesson.action.strip().lower().split()) == full:
            return lesson
    words = list(dict.fromkeys(text.keywords(surface)))
    if not words:
        return None
    best, held = None, 0
    for lesson in ranked:
        have = {*text.content_tokens(lesson.trigger + " " + lesson.action), *text.content_tokens(" ".join(lesson.tags))}
        count = sum(word in have for word in words)
        if count > held:
            best, held = lesson, count
    return best if held >= math.ceil(0.6 * len(words) - 1e-9) else None


def test_the_lesson_holding_a_text_is_the_one_the_rule_names():
    active = [Lesson(id=f"l{i}", trigger=trigger, action=action, tags=tags, created_at=f"2026-0{1 + i % 9}-01T00:00:00",
                     last_refined="2026-01-01T00:00:00")
              for i, (trigger, action, tags) in enumerate([
                  ("when deploying the api", "Run the database migrations before the release", ["deploy"]),
                  ("when deploying", "Run migrations first, then restart the workers", ["migrations", "workers"]),
                  ("when testing", "Keep the connection pool warm at night", []),
                  ("when caching", "Invalidate the cache after every schema change", ["cache", "schema"]),
                  ("when releasing", "Tag the release after the changelog", ["release"]),
                  ("when deploying the workers", "Restart the workers after the migrations ran", ["deploy"])])]
    asked = ["Run the database migrations before the release", "restart workers after migrations",
             "Keep the pool warm", "cache schema change invalidation", "Nothing here matches at all",
             "release changelog tag", "deploy api migrations", "the the the"]
    from mgcp.operations.lesson_words import LessonWords

    for index in (pattern_reinforcement._Holders(active, LessonWords(active)), pattern_reinforcement._Holders(active)):
        for surface in asked:
            found, expected = index.holding(surface), _holding_by_hand(active, surface)
            assert (found and found.id) == (expected and expected.id), surface
    assert pattern_reinforcement._Holders([]).holding("restart workers after migrations") is None


def test_the_lesson_holding_a_text_among_many_is_the_one_the_rule_names():
    # many lessons, rare and common words: the shared index gives what the rule names
    import random

    from mgcp.operations.lesson_words import LessonWords

    rng = random.Random(5)
    common = ["deploy", "release", "worker", "cache", "schema"]
    rare = [f"zorb{a}{b}" for a in "bcdfghjklm" for b in "aeiou" * 4][:200]
    rare = list(dict.fromkeys(f"{w}{i}x" for i, w in enumerate(rare)))
    active = [Lesson(id=f"l{i:03d}", trigger="when " + " ".join(rng.sample(common, 2) + rng.sample(rare, 1)),
                     action=" ".join(rng.sample(common + rare, 4)) + " first", tags=rng.sample(rare, 1),
                     created_at=f"2026-0{1 + i % 9}-{1 + i % 28:02d}T00:00:00", last_refined="2026-01-01T00:00:00")
              for i in range(300)]
    asked = [" ".join(rng.sample(rare, k) + rng.sample(common, j)) for k in (1, 2, 3) for j in (0, 1, 2)
             for _ in range(4)] + [active[7].action.upper(), "quuxalpha quuxbeta " + rare[3], "quuxgamma"]
    holders = pattern_reinforcement._Holders(active, LessonWords(active))
    found = [(surface, holders.holding(surface), _holding_by_hand(active, surface)) for surface in asked]
    assert all((a and a.id) == (b and b.id) for _, a, b in found)
    assert sum(1 for _, a, _ in found if a) >= 10 and sum(1 for _, a, _ in found if not a) >= 2


DETERMINISM_SCRIPT = """
import json
from mgcp.config import DEFAULTS
from mgcp.models import Lesson
from mgcp.operations import pattern_reinforcement

settings = {**DEFAULTS["pattern_reinforcement"], "enabled": True, "min_count": 2}
words = ["pool", "cache", "schema", "worker", "deploy", "release", "migration", "tag", "queue", "retry"]
lessons = [Lesson(id=f"l{i}", trigger=f"when {words[i % 10]} and {words[(i * 3) % 10]}",
                  action=f"Check the {words[(i * 7) % 10]} before the {words[(i + 1) % 10]}",
                  tags=[words[i % 10]], created_at=f"2026-01-{1 + i % 28:02d}T00:00:00",
                  last_refined="2026-01-01T00:00:00") for i in range(40)]
history = [(f"p{i % 3}", i // 3 + 1, f"2026-02-{1 + i % 28:02d}T00:00:00",
            f"Keep the {words[i % 4]} {words[(i + 2) % 5]} in sync. Review the {words[i % 6]} queue weekly.",
            [f"use the {words[i % 5]} {words[i % 2]} carefully"]) for i in range(60)]
observed = pattern_reinforcement.Observations.of(history, [], settings["categories"]).observed()
result = pattern_reinforcement.run(lessons, observed, {}, settings, "2026-03-01T00:00:00", project_id="p1")
print(json.dumps([[p.cluster_key, p.lesson_id, p.derived_from] for p in result.patterns]
                 + [[f.kind, f.fingerprint, f.title, f.data] for f in result.findings]))
"""


def test_patterns_findings_and_their_order_do_not_depend_on_the_hash_seed():
    from hashseeds import outputs_under_hash_seeds

    outputs = outputs_under_hash_seeds(DETERMINISM_SCRIPT)
    assert any(item[0] == "reinforced_draft" for item in outputs[0])
    assert outputs[0] == outputs[1] == outputs[2]


def test_a_draft_rejected_before_drafts_were_a_projects_is_not_asked_again():
    from mgcp.operations import fingerprint

    data = [observed(s, "Use pnpm workspaces") for s in (1, 2, 3)]
    assert len(run(observations=data).findings) == 1
    legacy = fingerprint(pattern_reinforcement.OPERATION, "reinforced_draft", "decision::use pnpm workspaces")
    assert run(observations=data, settled=frozenset({legacy})).findings == []
