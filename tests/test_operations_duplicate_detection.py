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


def test_capped_at_max_findings_strongest_first():
    lessons, _ = synthetic()
    findings = duplicate_detection.run(lessons, dict(SETTINGS, max_findings=5))
    sims = [f.data["similarity"] for f in findings]
    assert len(findings) == 5 and sims == sorted(sims, reverse=True)


def test_custom_backend_is_used():
    class Everything(LexicalBackend):
        def pairs(self, docs, min_similarity):
            return [(a, b, 0.99) for a, b in itertools.combinations(docs, 2)]

    assert len(duplicate_detection.run([REFACTOR, OTHER], SETTINGS, backend=Everything())) == 1
