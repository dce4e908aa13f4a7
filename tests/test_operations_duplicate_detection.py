import itertools
import random

import pytest

from mgcp.config import DEFAULTS
from mgcp.models import Lesson
from mgcp.operations import duplicate_detection
from mgcp.operations.similarity import LexicalBackend

SETTINGS = DEFAULTS["duplicate_detection"]
TS = "2026-01-01T00:00:00+00:00"

TOPICS = {
    "webhooks": "webhook payload signature delivery endpoint",
    "caching": "cache eviction ttl invalidation key",
    "migrations": "migration schema column backfill rollback",
    "auth": "token session password login credential",
    "logging": "log level structured trace context",
    "testing": "fixture mock assertion coverage flaky",
    "git": "branch commit rebase merge history",
    "queues": "queue consumer retry backoff deadletter",
}
GENERAL = """
always check verify before after every request response handler client server database query index
transaction lock timeout config environment variable secret file path directory module package version
dependency release build pipeline deploy container image network socket port header body json yaml
parser error exception message stack warning failure success status code field value type default
limit size batch page cursor offset order filter sort count metric alert dashboard owner team review
document example note reason cost latency memory thread process worker job schedule event hook callback
api route url domain user account role permission scope audit record row table view cursor stream file
buffer chunk encode decode compress hash random seed clock date time zone locale string number list map
""".split()


def lesson(id, trigger, action, *, usage=0, version=1, created=TS, tags=()):
    return Lesson(id=id, trigger=trigger, action=action, tags=list(tags), usage_count=usage,
                  version=version, created_at=created, last_refined=created)


def synthetic(n_lessons=300, seed=11):
    """Distinct lessons in eight topics, plus light-edit rewrites of some of them (planted pairs)."""
    rng = random.Random(seed)

    def clause(topic_words):
        return " ".join(rng.choice(topic_words) if rng.random() < 0.25 else rng.choice(GENERAL)
                        for _ in range(rng.randint(6, 9)))

    lessons, planted = [], set()
    topics = [t.split() for t in TOPICS.values()]
    for i in range(n_lessons):
        words = topics[i % len(topics)]
        lessons.append(lesson(f"l{i:03d}", "When " + clause(words),
                              ", ".join(clause(words) for _ in range(3)) + ".", tags=words[:1]))
    for k, source in enumerate(rng.sample(lessons, n_lessons // 10)):
        clauses = [c.split() for c in source.action.rstrip(".").split(", ")]
        for _ in range(rng.randint(1, 3)):
            target = rng.choice(clauses)
            op = rng.choice(["swap", "add", "remove"])
            if op == "swap":
                target[rng.randrange(len(target))] = rng.choice(GENERAL)
            elif op == "add":
                target.insert(rng.randrange(len(target) + 1), rng.choice(GENERAL))
            else:
                del target[rng.randrange(len(target))]
        rng.shuffle(clauses)
        copy = lesson(f"d{k:03d}", source.trigger, ", ".join(" ".join(c) for c in clauses) + ".",
                      tags=source.tags)
        lessons.append(copy)
        planted.add(frozenset((source.id, copy.id)))
    return lessons, planted


def test_planted_light_edits_are_found_with_high_precision_and_recall():
    lessons, planted = synthetic()
    findings = duplicate_detection.run(lessons, dict(SETTINGS, max_findings=10_000))
    found = {frozenset((f.data["canonical"], f.data["other"])) for f in findings}
    true_positives = len(found & planted)
    assert true_positives / len(found) >= 0.95
    assert true_positives / len(planted) >= 0.90


def test_distinct_lessons_on_one_topic_stay_below_review():
    a = "When a webhook delivery fails, retry with exponential backoff and log every attempt."
    b = "When receiving a webhook, verify the payload signature before parsing the body."
    assert LexicalBackend().pairs({"a": a, "b": b}, 0.0)[0][2] < 0.8


REFACTOR = lesson("verify-method-exists", "Before calling any method on an unfamiliar object",
                  "Verify the method exists by reading its definition, then check its signature and "
                  "return type before calling it.", usage=12, version=3)
REWORDED = lesson("check-method-exists", "Before calling any method on an unfamiliar object",
                  "Check the method exists by reading its definition, then verify its signature and "
                  "return type before you call it.", usage=2)
NEAR = lesson("check-method-signature", "Before calling a method on an object you have not used",
              "Read the method definition and check its signature and its return type before calling it.")
OTHER = lesson("rotate-keys", "When an api key leaks", "Rotate the key at once and audit its recent use.")


def test_near_identical_pair_is_a_merge_candidate():
    [finding] = duplicate_detection.run([REFACTOR, REWORDED, OTHER], SETTINGS)
    assert finding.kind == "duplicate_merge"
    assert [o.action for o in finding.options] == ["merge", "keep_both", "delete_one", "skip"]
    assert finding.recommended == 1
    assert finding.options[2].needs_input


def test_two_lessons_alike_in_another_script_are_a_pair():
    a = lesson("ru-a", "при развёртывании сервиса", "Всегда проверяйте журналы сервиса после развёртывания")
    b = lesson("ru-b", "после развёртывания сервиса", "Всегда проверяйте журналы сервиса после развёртывания!")
    c = lesson("ru-c", "при написании тестов", "Пишите тест до исправления ошибки")
    [finding] = duplicate_detection.run([a, b, c], SETTINGS)
    assert finding.subject == {"ru-a": 1, "ru-b": 1}


def test_a_good_and_a_bad_example_alike_in_words_may_say_opposite_things():
    trigger = "naming component files in a solidjs project"
    good = lesson("good", trigger, "GOOD: MyButton.jsx, UserProfile.jsx, SettingsPanel.jsx")
    bad = lesson("bad", trigger, "BAD: mybutton.jsx, user-profile.jsx, settings_panel.jsx")
    [finding] = duplicate_detection.run([good, bad, OTHER], SETTINGS)
    assert finding.data["opposite"] and finding.options[finding.recommended - 1].action == "keep_both"
    assert "may say opposite things" in finding.title


def test_canonical_is_the_more_used_lesson():
    [finding] = duplicate_detection.run([REWORDED, REFACTOR], SETTINGS)
    assert (finding.data["canonical"], finding.data["other"]) == ("verify-method-exists", "check-method-exists")
    assert set(finding.data["lessons"]) == {"verify-method-exists", "check-method-exists"}


@pytest.mark.parametrize("usage, version, created, expected", [
    ((1, 1), (1, 1), ("2026-01-02T00:00:00+00:00", TS), "b"),   # older wins
    ((1, 1), (3, 1), (TS, TS), "a"),                          # more versions win
    ((0, 9), (3, 1), (TS, TS), "b"),                          # usage first
])
def test_canonical_order(usage, version, created, expected):
    a = lesson("a", "t", "x", usage=usage[0], version=version[0], created=created[0])
    b = lesson("b", "t", "x", usage=usage[1], version=version[1], created=created[1])
    assert duplicate_detection.canonical_order(a, b)[0].id == expected


def test_review_band_recommends_keeping_both():
    findings = duplicate_detection.run([REFACTOR, NEAR], dict(SETTINGS, review_threshold=0.5))
    [finding] = findings
    assert finding.kind == "duplicate_review" and 0.5 <= finding.data["similarity"] < 0.9
    assert finding.options[finding.recommended - 1].action == "keep_both"


def test_description_names_both_lessons_and_similarity():
    [finding] = duplicate_detection.run([REFACTOR, REWORDED], SETTINGS)
    assert f"{finding.data['similarity']:.2f}" in finding.description
    assert '"verify-method-exists"' in finding.description and '"check-method-exists"' in finding.description


def test_deterministic_regardless_of_input_order():
    lessons, _ = synthetic(120)
    a = duplicate_detection.run(lessons, SETTINGS)
    b = duplicate_detection.run(list(reversed(lessons)), SETTINGS)
    assert [f.model_dump() for f in a] == [f.model_dump() for f in b]


def test_new_version_changes_the_fingerprint():
    [a] = duplicate_detection.run([REFACTOR, REWORDED], SETTINGS)
    [b] = duplicate_detection.run([REFACTOR, REWORDED.model_copy(update={"version": 2})], SETTINGS)
    assert a.fingerprint != b.fingerprint


def test_capped_at_max_findings_of_each_kind_with_a_summary_of_the_rest():
    lessons, _ = synthetic()
    everything = duplicate_detection.run(lessons, dict(SETTINGS, max_findings=10_000))
    findings = duplicate_detection.run(lessons, dict(SETTINGS, max_findings=5))
    for kind in ("duplicate_merge", "duplicate_review"):
        shown = [f for f in findings if f.kind == kind]
        total = sum(f.kind == kind for f in everything)
        sims = [f.data["similarity"] for f in shown]
        assert len(shown) == min(5, total) and sims == sorted(sims, reverse=True)
        summaries = [f for f in findings if f.kind == "summary" and f.data["of_kind"] == kind]
        assert [s.data["count"] for s in summaries] == ([total - 5] if total > 5 else [])


def test_custom_backend_is_used():
    class Everything(LexicalBackend):
        def pairs(self, docs, min_similarity):
            return [(a, b, 0.99) for a, b in itertools.combinations(docs, 2)]

    assert len(duplicate_detection.run([REFACTOR, OTHER], SETTINGS, backend=Everything())) == 1


# -- reading lessons as a reviewer does: pairs written for these tests ------------------------------

def score(a: Lesson, b: Lesson, *others: Lesson) -> duplicate_detection.Score | None:
    """The pair's score among a few unrelated lessons (so that idf has a corpus to work with)."""
    background = [lesson(f"bg{i}", f"when {t}", f"Handle the {t} carefully and write it down.")
                  for i, t in enumerate(["deploying", "logging", "caching", "queueing", "paging"])]
    scores = duplicate_detection.score_pairs([a, b, *others, *background], SETTINGS, LexicalBackend())
    return scores.get((min(a.id, b.id), max(a.id, b.id)))


MERGE, REVIEW = SETTINGS["merge_threshold"], SETTINGS["review_threshold"]


@pytest.mark.parametrize("first, second", [
    ("Utilize environment variables for every secret the service reads.",
     "Use environment variables for every secret the service reads."),
    ("Make sure every handler returns a typed response object.",
     "Ensure every handler returns a typed response object."),
    ("Do not commit generated files to the repository.",
     "Never commit generated files to the repository."),
    ("Don't commit generated files to the repository.",
     "Do not commit generated files to the repository."),
], ids=["use-utilize", "ensure-make-sure", "never-do-not", "dont-do-not"])
def test_synonyms_meet(first, second):
    found = score(lesson("a", "writing a service", first), lesson("b", "writing a service", second))
    assert found is not None and found.value >= MERGE, found


@pytest.mark.parametrize("first, second", [
    ("Style components with TailwindCSS utility classes only.", "Style components with Tailwind CSS utility classes only."),
    ("Name variables in camelCase and constants in UPPER_CASE.", "Name variables in camel case and constants in upper case."),
    ("Name database columns in snake_case everywhere.", "Name database columns in snake case everywhere."),
    ("Configure the NextJS app router for every new page.", "Configure the Next JS app router for every new page."),
], ids=["compound-case", "camel-case", "snake-case", "compound-joined"])
def test_identifier_and_compound_spellings_meet(first, second):
    found = score(lesson("a", "styling and naming", first), lesson("b", "styling and naming", second))
    assert found is not None and found.value >= MERGE, found


def test_a_rule_that_adds_a_qualifier_is_a_duplicate():
    found = score(lesson("a", "handling errors in API routes", "Log every error with the request id."),
                  lesson("b", "handling errors in API routes",
                         "Log every error with the request id, for example through pino."))
    assert found is not None and found.value >= REVIEW, found


def test_a_general_rule_and_a_much_longer_specific_one_stay_apart():
    found = score(lesson("a", "typing", "Use TypeScript for new code."),
                  lesson("b", "typing", "Use TypeScript for new code with strict mode, noImplicitAny, exhaustive "
                                        "switch checks, branded ids and zod schemas at every boundary."))
    assert found is None or found.value < REVIEW, found


def test_different_actions_under_one_trigger_stay_apart():
    trigger = "writing React components in a Next.js app with the app router and server actions"
    found = score(lesson("a", trigger, "Fetch data in server components, never in client effects."),
                  lesson("b", trigger, "Keep each component file under two hundred lines."))
    assert found is None or found.value < REVIEW, found


def test_one_action_under_two_triggers_is_a_merge():
    found = score(lesson("a", "building a React app", "Prefer functional components with hooks over classes."),
                  lesson("b", "writing Vue single-file components", "Prefer functional components with hooks over classes."))
    assert found is not None and found.copy and found.value >= MERGE, found


def test_copies_are_duplicates_not_clusters_or_orphans():
    from mgcp.operations import community_detection

    rule = "Validate every request body with a schema before it reaches the handler."
    lessons = [lesson(f"copy-{i}", f"rules file {i}: {topic}", rule, tags=["api"])
               for i, topic in enumerate(["express apps", "fastify apps", "koa apps", "hono apps"])]
    settings = DEFAULTS["community_detection"]
    result = community_detection.run(lessons, None, settings)
    assert [f for f in result.findings if f.kind in ("unlinked_cluster", "orphan")] == []
    findings = duplicate_detection.run(lessons, SETTINGS)
    assert len(findings) == 3 and all(f.kind == "duplicate_merge" and f.data["copy"] for f in findings)
    assert all("copy-0" in (f.data["canonical"], f.data["other"]) for f in findings)  # each copy with the first


DETERMINISM_SCRIPT = """
import json
from tests.test_operations_duplicate_detection import SETTINGS, lesson, synthetic
from mgcp.operations import duplicate_detection

lessons, _ = synthetic()
# copies of one rule, and rules that add a qualifier to another, beside the light edits
lessons += [lesson(f"c{i}", f"when copying {i}", "Retry webhook deliveries with exponential backoff.")
            for i in range(3)]
lessons.append(lesson("q0", "when retrying", "Retry webhook deliveries with exponential backoff and jitter."))
settings = {**SETTINGS, "max_findings": 25}
findings = duplicate_detection.run(lessons, settings)
print(json.dumps([(f.kind, f.fingerprint, f.data.get("canonical"), f.data.get("other"),
                   f.data.get("similarity")) for f in findings]))
"""


def test_findings_and_their_order_do_not_depend_on_the_hash_seed():
    from hashseeds import outputs_under_hash_seeds

    outputs = outputs_under_hash_seeds(DETERMINISM_SCRIPT)
    kinds = {kind for kind, *_ in outputs[0]}
    assert {"duplicate_merge", "duplicate_review", "summary"} <= kinds
    assert outputs[0] == outputs[1] == outputs[2]


def test_the_same_words_ordered_the_other_way_round_are_not_recommended_for_a_merge():
    """"A before B" / "B before A" score alike in words: the finding says they may say opposite
    things and recommends keeping both; a pair in the same order is still recommended for a merge."""
    pairs = [lesson("mig-first", "deploying a release", "Run the database migrations before restarting the app servers"),
             lesson("app-first", "deploying a release", "Restart the app servers before running the database migrations"),
             lesson("pin-a", "adding a dependency", "Pin the version with uv before you commit the lockfile"),
             lesson("pin-b", "adding a dependency", "Pin the version with uv before committing the lockfile")]
    found = {f.data["canonical"] + "/" + f.data["other"]: f
             for f in duplicate_detection.run(pairs, SETTINGS) if f.kind == "duplicate_merge"}
    opposite = next(f for key, f in found.items() if "first" in key)
    same = next(f for key, f in found.items() if "pin" in key)
    assert opposite.data["reordered"] and opposite.options[opposite.recommended - 1].action == "keep_both"
    assert "opposite" in opposite.title and "opposite" in opposite.description
    assert not same.data["reordered"] and same.options[same.recommended - 1].action == "merge"


def test_lessons_alike_in_every_word_but_a_number_are_not_a_copy_nor_merged_by_auto():
    """Similarity reads words, not numbers: "max_connections to 20" / "to 200" score 1.0. The finding
    says they give different numbers, recommends keeping both, and --auto leaves it to a person; the
    same pair with the same number is still a copy recommended for a merge."""
    from mgcp.config import load_config
    from mgcp.engine.actions import auto_decision

    pairs = [lesson("pool-api", "sizing the DB pool for the API", "Set max_connections to 20"),
             lesson("pool-batch", "sizing the DB pool for the API", "Set max_connections to 200"),
             lesson("node-a", "writing the Dockerfile", "Use node 22 as the base image"),
             lesson("node-b", "writing the Dockerfile", "Use node 22 as the base image")]
    found = {f.data["canonical"]: f for f in duplicate_detection.run(pairs, SETTINGS) if f.kind == "duplicate_merge"}
    apart, same = found["pool-api"], found["node-a"]
    assert apart.data["numbers"] == [["20"], ["200"]] and not apart.data["copy"]
    assert apart.options[apart.recommended - 1].action == "keep_both"
    assert "different numbers" in apart.title and "(20 / 200)" in apart.description
    assert auto_decision(apart, load_config(None), "/p") is None
    assert "numbers" not in same.data and same.options[same.recommended - 1].action == "merge"
    assert auto_decision(same, load_config(None), "/p") is not None


@pytest.mark.parametrize("action, values", [
    ("Log these events: (1) login failures, (2) authorization failures, (3) admin actions.", []),
    ("Steps:\n1. Pin the version\n2) Run the tests", []),
    ("Hash passwords with Argon2id; deploy with k8s", []),
    ("Use API v2 with a 20ms timeout", ["2", "20"]),
    ("Use SHA-256, Python 3.11, x86_64 and call f(2)", ["256", "3.11", "86", "64", "2"]),
    ("Set the timeout to (30) seconds, then stop after 10) tries", ["30", "10"]),
    ("(1) pin it, (2) test it, (10) ship it", ["1", "2", "10"]),  # not a run from 1: values, maybe
])
def test_the_numbers_read_are_values_not_list_markers_nor_names(action, values):
    assert duplicate_detection.numbers(action) == values


def test_a_list_numbered_in_one_action_only_is_not_different_numbers():
    pairs = [lesson("log-a", "deciding what security events to log",
                    "Log these events: (1) login failures, (2) authorization failures, (3) admin actions."),
             lesson("log-b", "deciding what security events to log",
                    "Log these events: login failures, authorization failures, admin actions.")]
    [found] = [f for f in duplicate_detection.run(pairs, SETTINGS) if f.kind.startswith("duplicate")]
    assert "numbers" not in found.data and "different numbers" not in found.title


def test_a_rule_and_its_denial_are_not_recommended_for_a_merge():
    """"Read its tests before editing it" / "Never read its tests before editing it" score as
    duplicates in words; the finding says one denies the other and recommends keeping both."""
    pairs = [lesson("read-tests", "changing code you did not write", "Read its tests before editing it"),
             lesson("never-tests", "changing code you did not write", "Never read its tests before editing it")]
    [finding] = [f for f in duplicate_detection.run(pairs, SETTINGS) if f.kind.startswith("duplicate")]
    assert finding.data["opposite"] and not finding.data["reordered"]
    assert finding.options[finding.recommended - 1].action == "keep_both"
    assert "opposite" in finding.title and "says not to" in finding.description


def test_a_list_negated_as_a_whole_agrees_with_its_items_denied_one_by_one():
    """"Never X in A, B, or C" denies B and C too: a paraphrase that denies B on its own agrees with
    it (B was once read as a rule of its own that claims B, and the pair as one that may say opposite
    things)."""
    pairs = [lesson("keys-ci", "storing api keys for a build pipeline",
                    "Keep API keys in the pipeline secret store. Never hardcode API keys in source files, "
                    "pipeline definitions, or plain-text environment files."),
             lesson("keys-ci-2", "storing api keys for the build pipeline",
                    "Keep API keys in the pipeline secret store. Never hardcode API keys in source files. "
                    "Never publish pipeline definitions.")]
    [finding] = [f for f in duplicate_detection.run(pairs, SETTINGS) if f.kind.startswith("duplicate")]
    assert not finding.data["opposite"] and "opposite" not in finding.title + finding.description


def test_actions_apart_in_a_word_that_decides_what_they_say_are_no_copy_and_may_say_opposite_things():
    """Similarity and the copy key leave out stop words: "before" / "after" scored 1.0 as copies,
    and --auto merged them."""
    trigger = "deploying the web service"
    before = lesson("before", trigger, "Run the database migrations before you deploy the service")
    after = lesson("after", trigger, "Run the database migrations after you deploy the service")
    [finding] = duplicate_detection.run([before, after, OTHER], SETTINGS)
    assert finding.data["copy"] is False and finding.data["opposite"]
    assert finding.options[finding.recommended - 1].action == "keep_both"
