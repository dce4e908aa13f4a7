"""The write gate, the importance heuristic, text identity, and the ranking parts."""

import pytest

from mgcp import quality, ranking


@pytest.mark.parametrize("a, b", [
    ("Use WAL mode!", "use  wal-mode"),
    ("  Read the_signature first. ", "read the signature FIRST"),
    ("Ｕｓｅ ＷＡＬ", "use wal"),  # compatibility forms fold
])
def test_normalized_ignores_case_spacing_and_punctuation(a, b):
    assert quality.normalized(a) == quality.normalized(b)


def test_normalized_keeps_the_words_apart():
    assert quality.normalized("use wal") != quality.normalized("use wall")


@pytest.mark.parametrize("field, text", [
    ("action", "ok"), ("action", "Thanks!!"), ("trigger", "hello"), ("trigger", "got it"),
    ("action", "🎉🎉🎉🎉🎉🎉🎉🎉🎉🎉"), ("action", "short one"), ("trigger", "...!?"),
])
def test_trivial_text_has_a_reason(field, text):
    assert quality.trivial_reason(field, text)


@pytest.mark.parametrize("field, text", [
    ("action", "Read its signature first."), ("trigger", "deploys"), ("trigger", "on merge"),
])
def test_real_text_passes(field, text):
    assert quality.trivial_reason(field, text) is None


def test_importance_rewards_directives_details_and_reasons_and_punishes_hedging():
    plain = quality.importance("writing code", "Think about the design of the module a bit.")
    strong = quality.importance("writing SQL migrations", "Never alter legacy tables; add `new_table` in a new "
                                "migration file.", "A changed legacy row broke older clients twice.", ["db"])
    hedged = quality.importance("writing code", "Maybe think about the design of the module a bit.")
    assert 0 <= hedged < plain < strong <= 1
    assert strong == 0.95  # 0.3 + 0.2 directive + 0.15 detail + 0.15 rationale + 0.1 length + 0.05 tags


def test_tiers():
    assert ranking.tier("active", 0, 0) == "candidate"
    assert ranking.tier("active", 1, 0) == "validated"
    assert ranking.tier("active", 0, ranking.VALIDATED_AFTER_USES) == "validated"
    assert ranking.tier("archived", 5, 50) == "archived"


def test_the_score_is_the_sum_of_its_named_parts():
    signal = ranking.signals(relevance=1.0, confidence=0.8, usage_count=0, helped=0, failed=0,
                             importance=0.5, tier="candidate")
    parts = ranking.parts(signal)
    assert set(parts) == set(ranking.WEIGHTS)
    assert signal["success"] == 0.5 and signal["use"] == 0.0
    assert ranking.total(parts) == round(1.0 + 0.25 * 0.8 + 0.25 * 0.5, 4)  # importance weighs 0 by default
    assert ranking.parts(signal, {"relevance": 2.0})["confidence"] == 0.0  # a part without a weight counts 0


def test_ties_go_to_the_more_important_lesson():
    keys = [ranking.order_key(1.2, 0.4, "a"), ranking.order_key(1.2, 0.9, "b"), ranking.order_key(1.5, 0.1, "c")]
    assert [k[2] for k in sorted(keys)] == ["c", "b", "a"]
