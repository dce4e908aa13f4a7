import pytest
import yaml

from conftest import ROOT
from mgcp.config import DEFAULTS, db_path, load_config, parse_config
from mgcp.errors import ConfigError


def test_defaults_equal_the_shipped_file():
    shipped = yaml.safe_load((ROOT / "rem-config.yaml").read_text())
    assert shipped["rem"] == DEFAULTS


def test_shipped_reinforcement_equals_the_default():
    from mgcp.config import REINFORCEMENT_DEFAULTS

    assert yaml.safe_load((ROOT / "rem-config.yaml").read_text())["reinforcement"] == REINFORCEMENT_DEFAULTS


def test_reinforcement_boost_can_be_turned_on():
    config = parse_config({"reinforcement": {"boost": True, "max_boost": 0.25}}, "x")
    assert config.reinforcement == {"boost": True, "weight": 0.05, "max_boost": 0.25}


def test_partial_file_keeps_other_defaults(tmp_path):
    path = tmp_path / "rem.yaml"
    path.write_text("rem:\n  staleness_scan:\n    interval: 3\n")
    config = load_config(path)
    assert config.operations["staleness_scan"]["interval"] == 3
    assert config.operations["duplicate_detection"] == DEFAULTS["duplicate_detection"]


def test_project_override_applies_to_that_project_only():
    config = parse_config({"projects": {"/p": {"staleness_scan": {"interval": 2}}}}, "x")
    assert config.operation("staleness_scan", "/p")["interval"] == 2
    assert config.operation("staleness_scan", "/q")["interval"] == 5


def test_changing_strategy_requires_its_parameters():
    config = parse_config({"rem": {"context_summary": {"strategy": "fibonacci", "intervals": [3, 5]}}}, "x")
    assert "interval" not in config.operations["context_summary"]


@pytest.mark.parametrize("text, needle", [
    ("rem:\n  staleness_scan:\n    strategy: weekly\n", "rem.staleness_scan.strategy'; allowed: linear, fibonacci, logarithmic"),
    ("rem:\n  dedupe: {}\n", "unknown operation 'rem.dedupe'"),
    ("pattern_reinforcement:\n  enabled: true\n", "go under rem: 'rem.pattern_reinforcement'"),
    ("rem:\n  duplicate_detection:\n    merge_threshold: 2\n", "between 0 and 1"),
    ("rem:\n  staleness_scan:\n    interval: 0\n", "whole number from 1 to 1000000000"),
    ("rem:\n  staleness_scan:\n    colour: red\n", "unknown key 'rem.staleness_scan.colour'"),
    ("rem: [\n", "not valid YAML"),
    ("rem:\n  community_detection:\n    louvain: networkx\n", "allowed: auto, python-louvain, igraph"),
    ("rem:\n  pattern_reinforcement:\n    enabled: yes please\n", "allowed: true, false"),
    ("rem:\n  pattern_reinforcement:\n    categories: [fact]\n", "allowed: a list of any of: lesson, decision, note"),
    ("rem:\n  contradiction_scan:\n    claim_threshold: 1.5\n", "between 0 and 1"),
    ("reinforcement:\n  boost: 1\n", "'reinforcement.boost'; allowed: true, false"),
    ("reinforcement:\n  weight: 2\n", "'reinforcement.weight'; allowed: a number between 0 and 1"),
    ("reinforcement:\n  cap: 2\n", "unknown key 'reinforcement.cap'"),
    # values and keys shown as YAML writes them, not as Python would
    ("rem:\n  staleness_scan:\n    interval: true\n", "invalid value true for 'rem.staleness_scan.interval'"),
    ("rem:\n  staleness_scan:\n    interval: '5'\n", "invalid value '5' for"),
    ("rem:\n  community_detection:\n    intervals: [1, yes]\n", "invalid value [1, true] for"),
    ("rem:\n  duplicate_detection:\n    merge_threshold: .nan\n", "invalid value .nan for"),
    ("rem:\n  duplicate_detection:\n    merge_threshold: 2000-01-01\n", "invalid value 2000-01-01 for"),
    ("similarity:\n  backend: null\n", "invalid value null for 'similarity.backend'"),
    ("reinforcement:\n  boost: ~\n", "invalid value null for 'reinforcement.boost'"),
    ("rem:\n  true: {}\n", "unknown operation 'rem.true'"),
    ("rem:\n  staleness_scan:\n    1: 2\n    colour: red\n", "unknown key 'rem.staleness_scan.1'"),
    ("1: a\nfoo: b\n", "unknown key '1'"),
    ("ranking:\n  null: 1\n", "unknown key 'ranking.null'"),
])
def test_bad_config_names_file_key_and_allowed_values(tmp_path, text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(path) in str(exc.value) and needle in str(exc.value)


def test_db_path_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("MGCP_DATA_DIR", str(tmp_path / "d"))
    assert db_path() == tmp_path / "d" / "lessons.db"
    monkeypatch.setenv("MGCP_DB", str(tmp_path / "x.db"))
    assert db_path() == tmp_path / "x.db"
    assert db_path("given.db").name == "given.db"


# -- ranking, recall and outcomes ----------------------------------------------------------------------

def test_quality_defaults_equal_the_shipped_file():
    from mgcp.config import OUTCOME_DEFAULTS, RANKING_DEFAULTS, RECALL_DEFAULTS
    from mgcp.ranking import WEIGHTS

    shipped = yaml.safe_load((ROOT / "rem-config.yaml").read_text())
    assert (shipped["ranking"], shipped["recall"], shipped["outcomes"]) == (RANKING_DEFAULTS, RECALL_DEFAULTS,
                                                                           OUTCOME_DEFAULTS)
    assert RANKING_DEFAULTS == WEIGHTS
    config = load_config(ROOT / "rem-config.yaml")
    assert (config.ranking, config.recall, config.outcomes) == (RANKING_DEFAULTS, RECALL_DEFAULTS, OUTCOME_DEFAULTS)


def test_a_partial_quality_section_keeps_the_other_defaults():
    config = parse_config({"recall": {"hook_budget": 0, "shares": {"state": 0.5}}, "ranking": {"use": 0.3}}, "x")
    assert config.recall["hook_budget"] == 0 and config.recall["budget"] == 8000
    assert config.recall["shares"]["state"] == 0.5 and config.recall["shares"]["lessons"] == 0.3
    assert config.ranking["use"] == 0.3 and config.ranking["relevance"] == 1.0
    assert config.outcomes["failure_threshold"] == 3


@pytest.mark.parametrize("raw, needle", [
    ({"ranking": {"boost": 1}}, "unknown key 'ranking.boost'"),
    ({"ranking": {"use": -1}}, "'ranking.use'; allowed: a number from 0"),
    ({"recall": {"budget": 100}}, "'recall.budget'; allowed: a whole number from 400"),
    ({"recall": {"hook_budget": 50}}, "allowed: 0 (off) or a whole number from 400"),
    ({"recall": {"shares": {"gossip": 1}}}, "unknown key 'recall.shares.gossip'"),
    ({"outcomes": {"failure_threshold": 0}}, "'outcomes.failure_threshold'; allowed: a whole number from 1"),
    ({"rem": {"staleness_scan": {"speculative_confidence": 2}}}, "between 0 and 1"),
    ({"outcomes": [3]}, "'outcomes' must be a mapping"),
])
def test_bad_quality_settings_are_refused_naming_the_key(raw, needle):
    with pytest.raises(ConfigError, match=None) as caught:
        parse_config(raw, "rem.yaml")
    assert needle in str(caught.value) and str(caught.value).startswith("rem.yaml: ")


# -- settings that contradict each other ---------------------------------------------------------------

@pytest.mark.parametrize("raw, needle", [
    ({"rem": {"duplicate_detection": {"merge_threshold": 0.5, "review_threshold": 0.99}}},
     "'rem.duplicate_detection.review_threshold' is 0.99 but 'rem.duplicate_detection.merge_threshold' is 0.5; "
     "review_threshold must be at most merge_threshold"),
    ({"rem": {"duplicate_detection": {"auto_merge_threshold": 0.5}}},
     "'rem.duplicate_detection.auto_merge_threshold' is 0.5 but 'rem.duplicate_detection.merge_threshold' is 0.9 "
     "(the default); auto_merge_threshold must be at least merge_threshold"),
])
def test_contradicting_settings_are_refused_naming_keys_values_and_rule(raw, needle):
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, "rem.yaml")
    assert str(caught.value).startswith("rem.yaml: ") and needle in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_project_override_is_checked_merged_with_the_file():
    raw = {"rem": {"duplicate_detection": {"merge_threshold": 0.85}},
           "projects": {"/p": {"duplicate_detection": {"review_threshold": 0.88}}}}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, "rem.yaml")
    assert ("'projects./p.duplicate_detection.review_threshold' is 0.88 but "
            "'rem.duplicate_detection.merge_threshold' is 0.85; review_threshold must be at most") in str(caught.value)


def test_a_project_override_is_checked_against_the_defaults():
    raw = {"projects": {"/p": {"duplicate_detection": {"merge_threshold": 0.97}}}}
    with pytest.raises(ConfigError, match=r"'rem\.duplicate_detection\.auto_merge_threshold' is 0\.95 \(the default\) "
                                          r"but 'projects\./p\.duplicate_detection\.merge_threshold' is 0\.97"):
        parse_config(raw, "rem.yaml")


def test_equal_thresholds_agree():
    config = parse_config({"rem": {"duplicate_detection": {"review_threshold": 0.9, "auto_merge_threshold": 0.9}}}, "x")
    assert config.operations["duplicate_detection"]["review_threshold"] == 0.9


def test_recall_shares_are_weights_that_need_not_add_up_to_one():
    shares = {"state": 0.5, "constraints": 0.5, "preferences": 0.3, "lessons": 0.3, "errors": 0.2}
    config = parse_config({"recall": {"shares": shares}}, "x")
    rows = {row["key"]: row for row in config.explain(None)}
    assert config.recall["shares"] == shares
    assert "28% " in rows["recall.shares.state"]["note"] and "their sum, 1.8" in rows["recall.shares.state"]["note"]


# -- bounded values ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, 1001, 2.5])
def test_min_count_out_of_its_range_is_refused(value):
    with pytest.raises(ConfigError, match=r"'rem\.pattern_reinforcement\.min_count'; allowed: a whole number from 2 to 1000"):
        parse_config({"rem": {"pattern_reinforcement": {"min_count": value}}}, "x")


@pytest.mark.parametrize("value", [2, 1000])
def test_min_count_within_its_range_is_in_force_as_given(value):
    config = parse_config({"rem": {"pattern_reinforcement": {"min_count": value}}}, "x")
    assert {r["key"]: r["value"] for r in config.explain(None)}["rem.pattern_reinforcement.min_count"] == value


# -- messages ------------------------------------------------------------------------------------------

def test_a_top_level_that_is_not_a_mapping_lists_every_top_level_key():
    from mgcp.config import TOP_LEVEL_KEYS

    with pytest.raises(ConfigError) as caught:
        parse_config(["a", "b"], "rem.yaml")
    assert all(f"'{key}'" in str(caught.value) for key in TOP_LEVEL_KEYS)
    assert len(TOP_LEVEL_KEYS) == 7 and "recall" in TOP_LEVEL_KEYS


@pytest.mark.parametrize("value, text", [
    (True, "true"), (None, "null"), (0.5, "0.5"), ("it's", "'it''s'"), ([1, False], "[1, false]"),
    ({"a": None}, "{'a': null}"), (float("-inf"), "-.inf"), ("a\nb", '"a\\nb"'),
])
def test_yaml_text_renders_values_as_yaml(value, text):
    from mgcp.config import yaml_text

    assert yaml_text(value) == text


@pytest.mark.parametrize("value, text", [("auto", "auto"), ("true", "'true'"), ("5", "'5'"), ("a: b", "'a: b'"),
                                         (["lesson", "note"], "[lesson, note]")])
def test_yaml_text_leaves_plain_strings_unquoted_when_asked(value, text):
    from mgcp.config import yaml_text

    assert yaml_text(value, plain=True) == text


@pytest.mark.parametrize("second", ["{app}/", "{app}/../app", "{link}"])
def test_two_keys_naming_one_project_are_refused_naming_both(tmp_path, second):
    app, link = tmp_path / "app", tmp_path / "app-link"
    app.mkdir()
    link.symlink_to(app)
    other = second.format(app=app, link=link)
    raw = {"projects": {str(app): {"staleness_scan": {"interval": 2}},
                        other: {"duplicate_detection": {"interval": 3}}}}
    with pytest.raises(ConfigError) as caught:  # one of them would silently be dropped
        parse_config(raw, "rem-config.yaml")
    assert str(caught.value) == (f"rem-config.yaml: 'projects' names one project twice: '{app}' and '{other}'; "
                                 "merge their settings under one of them")
