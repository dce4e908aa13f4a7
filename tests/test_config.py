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
