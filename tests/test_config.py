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
