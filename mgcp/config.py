"""The only reader of environment variables and of rem-config.yaml.

Database path: `--db PATH`, else `$MGCP_DB`, else `$MGCP_DATA_DIR/lessons.db`, else
`~/.mgcp/lessons.db`. REM config: `--config FILE`, else `$MGCP_REM_CONFIG`, else
`<data dir>/rem-config.yaml`, else the defaults below (which equal the shipped rem-config.yaml; a
test compares them). A file may set any subset of keys; an invalid one raises ConfigError naming the
file, the key and the allowed values.

`similarity` chooses the text similarity of duplicate and community detection: `backend: lexical`
(built in) or `semantic` (the `semantic` extra), which needs `model`: a folder holding a model2vec
model (a relative path is read from the config file's folder), or a Hugging Face model name
("owner/name"). Only the shape is checked here; the engine loads the model when an operation needs it.

`reinforcement` sets the opt-in ranking boost of reinforced lessons (`boost`, `weight`, `max_boost`;
see mgcp.reinforcement). An operation with `enabled: false` (pattern_reinforcement by default) is
never due; it runs only when named.

A value out of its range is refused, never clamped, so that what `mgcp config show` prints is what
is in force. Settings that contradict each other (AGREEMENTS) are refused too, checked for the
file's `rem:` and for each project with its override merged. Messages show keys and values as YAML
writes them (`true`, `null`, `'5'`), not as Python does.
"""

from __future__ import annotations

import copy
import math
import os
from pathlib import Path
# No `typing` import: the SessionStart hook imports this module and typing costs it ~5 ms.
from mgcp.errors import ConfigError
from mgcp.ranking import WEIGHTS
from mgcp.reinforcement import MIN_COUNT_RANGE
from mgcp.schedule import STRATEGIES

OPERATIONS = (
    "staleness_scan",
    "duplicate_detection",
    "community_detection",
    "knowledge_extraction",
    "context_summary",
    # Reinforcement and contradictions (a pattern recurring across sessions; lessons that disagree).
    "pattern_reinforcement",
    "contradiction_scan",
)
# Operations over the lessons, which every project shares: their findings are reviewed from any
# project. The others read projects' history and their findings stay in the project that ran them
# (pattern reinforcement's drafts quote a project's decisions, paths and sessions).
SHARED_OPERATIONS = ("staleness_scan", "duplicate_detection", "community_detection", "contradiction_scan")
# Findings about the lessons that another operation raises: shared as those operations' are.
SHARED_KINDS = ("reinforced_duplicates",)

DEFAULTS: dict[str, dict] = {
    "staleness_scan": {
        "strategy": "linear", "interval": 5,
        "unused_min_age_days": 30, "popular_min_retrievals": 10, "popular_unrefined_days": 180,
        "query_window_days": 30, "unmatched_min_queries": 20, "max_findings": 50,
        "speculative_confidence": 0.5, "speculative_max_age_days": 30,
    },
    "duplicate_detection": {
        "strategy": "linear", "interval": 10,
        "merge_threshold": 0.90, "review_threshold": 0.80, "auto_merge_threshold": 0.95,
        "trigger_weight": 0.1, "trigger_support": 0.05, "containment_factor": 0.9, "max_findings": 50,
    },
    "community_detection": {
        "strategy": "fibonacci", "intervals": [5, 8, 13, 21, 34],
        "seed": 42, "resolution": 1.0, "similarity_edge_threshold": 0.35,
        "similarity_edge_weight": 0.3, "shared_tag_weight": 0.1, "max_tag_frequency": 50,
        "min_cluster_size": 3, "max_findings": 50, "louvain": "auto",
        "full_every": 10,  # a full re-clustering every this many runs; those between are incremental
    },
    "knowledge_extraction": {
        "strategy": "logarithmic", "base_interval": 10, "scale": 2.0,
        "theme_min_sessions": 3, "todo_min_sessions": 5, "max_findings": 50,
    },
    "context_summary": {"strategy": "linear", "interval": 20},
    "pattern_reinforcement": {
        "strategy": "linear", "interval": 10, "enabled": False,
        "min_count": 3, "categories": ["lesson", "decision", "note"], "max_findings": 50,
    },
    "contradiction_scan": {
        "strategy": "linear", "interval": 10,
        "trigger_threshold": 0.5, "claim_threshold": 0.6, "max_findings": 50,
    },
}

# The categories pattern_reinforcement can cluster: lessons added again, decisions, note sentences.
PATTERN_CATEGORIES = ("lesson", "decision", "note")
# The opt-in reinforcement boost of lesson ranking (top-level key `reinforcement`).
REINFORCEMENT_DEFAULTS = {"boost": False, "weight": 0.05, "max_boost": 0.3}

# What each strategy needs, with its allowed values (for messages).
STRATEGY_KEYS = {
    "linear": {"interval": "a whole number from 1 to 1000000000"},
    "fibonacci": {"intervals": "a list of whole numbers from 1 to 1000000000, increasing"},
    "logarithmic": {"base_interval": "a number > 0, at most 1000000000", "scale": "a number > 0, at most 1000000000"},
}
SCHEDULE_KEYS = {"strategy", "interval", "intervals", "base_interval", "scale"}

# Settings of one operation that must agree, each valid alone: (operation, key, "at most" or
# "at least", other key, why). Equal values agree (no review band; --auto merges every merge).
AGREEMENTS = (
    ("duplicate_detection", "review_threshold", "at most", "merge_threshold",
     "pairs scoring from review_threshold up to merge_threshold are reviewed, those at or above it are merge "
     "candidates"),
    ("duplicate_detection", "auto_merge_threshold", "at least", "merge_threshold",
     "`rem run --auto` merges only merge candidates, which score merge_threshold or more"),
)

# Lesson quality: ranking weights (mgcp.ranking), the recall budgets and shares (mgcp.recall),
# and outcome feedback.
RANKING_DEFAULTS = dict(WEIGHTS)
MIN_RECALL_BUDGET = 400
RECALL_DEFAULTS = {"budget": 8000, "hook_budget": 2000,
                   "shares": {"state": 0.25, "constraints": 0.2, "preferences": 0.15, "lessons": 0.3, "errors": 0.1}}
OUTCOME_DEFAULTS = {"failure_threshold": 3}
QUALITY_SECTIONS = ("ranking", "recall", "outcomes")
TOP_LEVEL_KEYS = ("rem", "similarity", "projects", *QUALITY_SECTIONS, "reinforcement")

SIMILARITY_BACKENDS = ("lexical", "semantic")
SIMILARITY_DEFAULTS = {"backend": "lexical", "model": None}
MODEL_VALUES = "a folder holding a model2vec model, or a Hugging Face model name such as 'minishlab/potion-base-8M'"


def plain_path(path: str) -> str:
    """An absolute, normalized path, symlinks left as they are."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(str(path))))


def normalize_path(path: str) -> str:
    """A project's key: absolute and normalized, with symlinks resolved when the path exists (a
    link to a project is the same project); a path need not exist (projects move, history stays)."""
    plain = plain_path(path)
    return os.path.realpath(plain) if os.path.exists(plain) else plain


def data_dir() -> Path:
    return Path(os.environ.get("MGCP_DATA_DIR") or Path.home() / ".mgcp")


def db_path(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit)
    if os.environ.get("MGCP_DB"):
        return Path(os.environ["MGCP_DB"])
    return data_dir() / "lessons.db"


def db_path_source(explicit: str | os.PathLike | None = None) -> str:
    """Where `db_path(explicit)` came from, for `mgcp config show`."""
    if explicit:
        return "--db"
    if os.environ.get("MGCP_DB"):
        return "$MGCP_DB"
    return "$MGCP_DATA_DIR" if os.environ.get("MGCP_DATA_DIR") else "default (~/.mgcp)"


def config_path_source(explicit: str | os.PathLike | None = None) -> str:
    """Where `config_path(explicit)` came from, for `mgcp config show`."""
    if explicit:
        return "--config"
    if os.environ.get("MGCP_REM_CONFIG"):
        return "$MGCP_REM_CONFIG"
    return "the data directory" if config_path() else "none: built-in defaults"


def config_path(explicit: str | os.PathLike | None = None) -> Path | None:
    """The rem-config file in force, or None for the built-in defaults."""
    if explicit:
        if not Path(explicit).is_file():
            raise ConfigError(f"{explicit}: no such config file")
        return Path(explicit)
    if os.environ.get("MGCP_REM_CONFIG"):
        return Path(os.environ["MGCP_REM_CONFIG"])
    candidate = data_dir() / "rem-config.yaml"
    return candidate if candidate.is_file() else None


def http_token(token_file: str | os.PathLike | None = None) -> str | None:
    """The bearer token `mgcp serve --http` requires: the first line of `token_file`, else
    $MGCP_TOKEN, else None. An empty or unreadable token file is a ConfigError."""
    if token_file is not None:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the token file {token_file}: {getattr(exc, 'strerror', None) or exc}") from None
        if not token:
            raise ConfigError(f"the token file {token_file} is empty")
        return token
    return os.environ.get("MGCP_TOKEN", "").strip() or None


def hook_log_path() -> Path:
    return data_dir() / "hook.log"


class RemConfig:
    """Schedules and thresholds per operation, with per-project overrides."""

    def __init__(self, operations: dict[str, dict], projects: dict[str, dict] | None = None,
                 source: str | None = None, similarity: dict | None = None, quality: dict | None = None,
                 reinforcement: dict | None = None):
        self.operations = operations
        self.projects = projects or {}
        self.source = source
        # {"backend": "lexical" | "semantic", "model": None, an absolute folder or a model name}
        self.similarity = similarity or dict(SIMILARITY_DEFAULTS)
        # Which (operation, key) pairs the file set under `rem:` (None) and under each project.
        self.set_keys: dict[str | None, set[tuple[str, str]]] = {None: set()}
        self.similarity_keys: set[str] = set()
        self.section_keys: dict[str, set[str]] = {}  # the keys the file set in ranking, recall, ...
        quality = quality or {}
        self.ranking: dict = quality.get("ranking") or dict(RANKING_DEFAULTS)
        self.recall: dict = quality.get("recall") or copy.deepcopy(RECALL_DEFAULTS)
        self.outcomes: dict = quality.get("outcomes") or dict(OUTCOME_DEFAULTS)
        # {"boost": bool, "weight": float, "max_boost": float}: the ranking boost of reinforced lessons
        self.reinforcement = reinforcement or dict(REINFORCEMENT_DEFAULTS)

    def for_project(self, project_path: str | None) -> dict[str, dict]:
        """Each operation's settings for one project (defaults, file, then the project's override)."""
        merged = copy.deepcopy(self.operations)
        for op, override in self.projects.get(project_path or "", {}).items():
            merged[op].update(override)
        return merged

    def explain(self, project_path: str | None) -> list[dict]:
        """Every effective setting for a project with where it came from: the project's override
        in the file, the file's `rem:` section, or the built-in default."""
        rows = []
        for op, settings in self.for_project(project_path).items():
            for key, value in settings.items():
                if project_path is not None and (op, key) in self.set_keys.get(project_path, set()):
                    origin = f"{self.source}: projects.{project_path}"
                elif (op, key) in self.set_keys[None]:
                    origin = f"{self.source}: rem"
                else:
                    origin = "built-in default"
                rows.append({"key": f"rem.{op}.{key}", "value": value, "source": origin})
        for key, value in self.similarity.items():
            rows.append({"key": f"similarity.{key}", "value": value,
                         "source": f"{self.source}: similarity" if key in self.similarity_keys else "built-in default"})
        shares = self.recall.get("shares", {})
        sections = {"ranking": self.ranking, "outcomes": self.outcomes,
                    "recall": {k: v for k, v in self.recall.items() if k != "shares"},
                    "recall.shares": shares, "reinforcement": self.reinforcement}
        for section, values in sections.items():
            for key, value in values.items():
                given = key in self.section_keys.get(section, set())
                rows.append({"key": f"{section}.{key}", "value": value,
                             "source": f"{self.source}: {section}" if given else "built-in default"})
                if section == "recall.shares":
                    rows[-1]["note"] = _share_note(value, sum(shares.values()))
        return rows

    def operation(self, name: str, project_path: str | None = None) -> dict:
        return self.for_project(project_path)[name]


def _share_note(share: float, total: float) -> str:
    """What a recall share means: mgcp.recall divides each present subsection's share by the sum of
    theirs, so shares are weights and need not add up to 1."""
    if total <= 0:
        return "all shares are 0: the subsections fill the budget in order"
    return (f"{share / total:.0%} of the budget when all subsections have content: "
            f"shares are divided by their sum, {yaml_text(round(total, 6))}")


def load_config(explicit: str | os.PathLike | None = None) -> RemConfig:
    path = config_path(explicit)
    if path is None:
        return RemConfig(copy.deepcopy(DEFAULTS))
    import yaml

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start + 1} is 0x{data[exc.start]:02x})") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a rem-config") from None
    except ValueError:  # a number of thousands of digits
        raise ConfigError(f"{path}: holds a number too large to be a setting") from None
    return parse_config(raw, str(path))


def parse_config(raw: object, source: str) -> RemConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of any of the keys "
                          + ", ".join(f"'{key}'" for key in TOP_LEVEL_KEYS))
    unknown = [key for key in raw if key not in TOP_LEVEL_KEYS]
    if unknown:
        hint = f" (an operation's settings go under rem: 'rem.{unknown[0]}')" if unknown[0] in OPERATIONS else ""
        raise ConfigError(f"{source}: unknown key '{_key(unknown[0])}'; allowed: {', '.join(TOP_LEVEL_KEYS)}{hint}")
    operations = copy.deepcopy(DEFAULTS)
    _merge_operations(operations, raw.get("rem") or {}, source, "rem")
    set_keys: dict[str | None, set[tuple[str, str]]] = {None: _keys_set(raw.get("rem"))}
    _check_agreements(operations, source, [("rem", set_keys[None])])
    projects: dict[str, dict] = {}
    named: dict[str, str] = {}  # the project a path names -> the key that named it first
    if not isinstance(raw.get("projects") or {}, dict):
        raise ConfigError(f"{source}: 'projects' must map project paths to operation settings")
    for project, ops in (raw.get("projects") or {}).items():
        if not (isinstance(project, str) and project.strip()):
            raise ConfigError(f"{source}: 'projects' must map project paths to operation settings; "
                              f"{yaml_text(project)} is not a path")
        first = named.setdefault(normalize_path(project), project)
        if first != project:  # one would silently win over the other
            raise ConfigError(f"{source}: 'projects' names one project twice: {yaml_text(first)} and "
                              f"{yaml_text(project)}; merge their settings under one of them")
        merged = copy.deepcopy(operations)
        _merge_operations(merged, ops or {}, source, f"projects.{project}")
        _check_agreements(merged, source, [(f"projects.{project}", _keys_set(ops)), ("rem", set_keys[None])])
        projects[normalize_path(project)] = {op: merged[op] for op in (ops or {})}
        set_keys[normalize_path(project)] = _keys_set(ops)
    config = RemConfig(operations, projects, source, _similarity(raw.get("similarity"), source),
                       _quality(raw, source), _reinforcement(raw.get("reinforcement"), source))
    config.set_keys = set_keys
    config.similarity_keys = set(raw.get("similarity") or {})
    recall = raw.get("recall") if isinstance(raw.get("recall"), dict) else {}
    config.section_keys = {"ranking": set(raw.get("ranking") or {}), "outcomes": set(raw.get("outcomes") or {}),
                           "recall": set(recall) - {"shares"}, "recall.shares": set(recall.get("shares") or {}),
                           "reinforcement": set(raw.get("reinforcement") or {})}
    return config


def _keys_set(section: object) -> set[tuple[str, str]]:
    return {(op, key) for op, settings in (section or {}).items() if isinstance(settings, dict) for key in settings}


def _check_agreements(operations: dict[str, dict], source: str, layers: list[tuple[str, set]]) -> None:
    """Raise ConfigError when merged settings break one of AGREEMENTS. `layers`: (prefix, the
    (operation, key) pairs the file set there), the one that wins first: each key is named where it
    was set, or under `rem` as the default."""
    def named(op: str, key: str) -> str:
        where = next((prefix for prefix, given in layers if (op, key) in given), None)
        value = yaml_text(operations[op][key])
        return f"'{where or 'rem'}.{op}.{key}' is {value}" + ("" if where else " (the default)")

    for op, key, relation, other, why in AGREEMENTS:
        value, bound = operations[op][key], operations[op][other]
        if value > bound if relation == "at most" else value < bound:
            raise ConfigError(f"{source}: {named(op, key)} but {named(op, other)}; "
                              f"{key} must be {relation} {other} ({why})")


def _quality(raw: dict, source: str) -> dict:
    """The `ranking`, `recall` and `outcomes` sections, checked, over their defaults."""
    ranking = _section("ranking", raw.get("ranking"), RANKING_DEFAULTS, source)
    for key, value in ranking.items():
        if not (_is_number(value) and value >= 0):
            raise ConfigError(f"{source}: invalid value {_shown(value)} for 'ranking.{key}'; "
                              "allowed: a number from 0 to 1000000000")
    recall = _section("recall", raw.get("recall"), RECALL_DEFAULTS, source)
    if not (_is_int(recall["budget"]) and recall["budget"] >= MIN_RECALL_BUDGET):
        raise ConfigError(f"{source}: invalid value {_shown(recall['budget'])} for 'recall.budget'; "
                          f"allowed: a whole number from {MIN_RECALL_BUDGET} to 1000000000")
    if not (_is_int(recall["hook_budget"]) and (recall["hook_budget"] == 0 or recall["hook_budget"] >= MIN_RECALL_BUDGET)):
        raise ConfigError(f"{source}: invalid value {_shown(recall['hook_budget'])} for 'recall.hook_budget'; "
                          f"allowed: 0 (off) or a whole number from {MIN_RECALL_BUDGET} to 1000000000")
    recall["shares"] = _section("recall.shares", raw.get("recall", {}).get("shares") if isinstance(raw.get("recall"), dict) else None,
                                RECALL_DEFAULTS["shares"], source)
    for key, value in recall["shares"].items():
        if not (_is_number(value) and value >= 0):
            raise ConfigError(f"{source}: invalid value {_shown(value)} for 'recall.shares.{key}'; "
                              "allowed: a number from 0 to 1000000000")
    outcomes = _section("outcomes", raw.get("outcomes"), OUTCOME_DEFAULTS, source)
    if not (_is_int(outcomes["failure_threshold"]) and outcomes["failure_threshold"] >= 1):
        raise ConfigError(f"{source}: invalid value {_shown(outcomes['failure_threshold'])} "
                          "for 'outcomes.failure_threshold'; allowed: a whole number from 1 to 1000000000")
    return {"ranking": ranking, "recall": recall, "outcomes": outcomes}


def _section(name: str, given: object, defaults: dict, source: str) -> dict:
    """A mapping section of the file over its defaults: a mapping, and no key the defaults lack."""
    if given is None:
        return copy.deepcopy(defaults)
    if not isinstance(given, dict):
        raise ConfigError(f"{source}: '{name}' must be a mapping with keys {', '.join(defaults)}")
    for key in given:
        if key not in defaults:
            raise ConfigError(f"{source}: unknown key '{name}.{_key(key)}'; allowed: {', '.join(defaults)}")
    return {**copy.deepcopy(defaults), **given}


def _reinforcement(given: object, source: str) -> dict:
    """The `reinforcement` setting (the ranking boost of reinforced lessons), checked."""
    settings = _section("reinforcement", given, REINFORCEMENT_DEFAULTS, source)
    for key, value in (given or {}).items():
        if key == "boost":
            wrong = not isinstance(value, bool) and "true, false"
        else:
            wrong = not (_is_number(value) and 0 <= value <= 1) and "a number between 0 and 1"
        if wrong:
            raise ConfigError(f"{source}: invalid value {_shown(value)} for 'reinforcement.{key}'; allowed: {wrong}")
    return settings


def _similarity(given: object, source: str) -> dict:
    """The `similarity` setting, checked; a local model path made absolute."""
    settings = _section("similarity", given, SIMILARITY_DEFAULTS, source)
    if given is None:
        return settings
    if settings["backend"] not in SIMILARITY_BACKENDS:
        raise ConfigError(f"{source}: invalid value {_shown(settings['backend'])} for 'similarity.backend'; "
                          f"allowed: {', '.join(SIMILARITY_BACKENDS)}")
    model = settings["model"]
    if model is not None and not (isinstance(model, str) and model.strip()):
        raise ConfigError(f"{source}: invalid value {_shown(model)} for 'similarity.model'; allowed: {MODEL_VALUES}")
    if settings["backend"] == "semantic" and model is None:
        raise ConfigError(f"{source}: 'similarity.model' is required when 'similarity.backend' is 'semantic'; "
                          f"allowed: {MODEL_VALUES}")
    if model is not None:
        settings["model"] = _model_location(model.strip(), source)
    return settings


def _model_location(model: str, source: str) -> str:
    """A Hugging Face name as written: "owner/name" with no folder of that name beside the config
    file. Anything else is a local folder, made absolute (relative to the config file's folder), so
    a path that starts with "/", "~" or "." is never sent to the hub, even when it is mistyped."""
    local = os.path.join(os.path.dirname(source), os.path.expanduser(model))
    parts = model.split("/")
    is_name = (len(parts) == 2 and all(p and p[0] not in ".-" and all(c.isalnum() or c in "-_." for c in p)
                                       for p in parts))
    return model if is_name and not os.path.isdir(local) else plain_path(local)


def _merge_operations(target: dict, given: object, source: str, prefix: str) -> None:
    if not isinstance(given, dict):
        raise ConfigError(f"{source}: '{prefix}' must be a mapping of operation names")
    for op, settings in given.items():
        if op not in DEFAULTS:
            raise ConfigError(f"{source}: unknown operation '{prefix}.{_key(op)}'; allowed: {', '.join(OPERATIONS)}")
        if not isinstance(settings, dict):
            raise ConfigError(f"{source}: '{prefix}.{op}' must be a mapping of settings")
        current = target[op]
        if "strategy" in settings and settings["strategy"] != current["strategy"]:
            # A new strategy brings its own parameters; drop the old strategy's.
            for key in SCHEDULE_KEYS - {"strategy"}:
                current.pop(key, None)
        for key, value in settings.items():
            _check_value(source, f"{prefix}.{op}.{_key(key)}", key, value, DEFAULTS[op])
            current[key] = value
        strategy = current["strategy"]
        for key, allowed in STRATEGY_KEYS[strategy].items():
            if key not in current:
                raise ConfigError(f"{source}: '{prefix}.{op}.{key}' is required for strategy '{strategy}'; allowed: {allowed}")
        for key in SCHEDULE_KEYS - {"strategy"} - set(STRATEGY_KEYS[strategy]):
            if key in settings:
                raise ConfigError(
                    f"{source}: '{prefix}.{op}.{key}' does not apply to strategy '{strategy}'; "
                    f"allowed: {', '.join(STRATEGY_KEYS[strategy])}"
                )


LOUVAIN = ("auto", "python-louvain", "igraph")  # community_detection.louvain
MAX_SETTING = 1_000_000_000  # larger numbers are typos; they would also overflow SQLite's integers


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value <= MAX_SETTING


def _is_number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value <= MAX_SETTING)


def _check_value(source: str, where: str, key: object, value: object, defaults: dict) -> None:
    """Raise ConfigError unless `value` is allowed for `key`: each check returns the allowed values
    as words when the value is wrong."""
    # An operation's settings are its defaults' keys, a schedule's, and `enabled` (every operation's).
    if not (isinstance(key, str) and (key in defaults or key in SCHEDULE_KEYS or key == "enabled")):
        allowed = sorted(set(defaults) | SCHEDULE_KEYS | {"enabled"})
        raise ConfigError(f"{source}: unknown key '{where}'; allowed: {', '.join(allowed)}")
    if key == "strategy":
        wrong = value not in STRATEGIES and ", ".join(STRATEGIES)
    elif key == "interval":
        wrong = not (_is_int(value) and value >= 1) and STRATEGY_KEYS["linear"]["interval"]
    elif key == "intervals":
        ok = (isinstance(value, list) and value and all(_is_int(v) and v >= 1 for v in value)
              and all(a < b for a, b in zip(value, value[1:])))
        wrong = not ok and STRATEGY_KEYS["fibonacci"]["intervals"]
    elif key in ("base_interval", "scale"):
        wrong = not (_is_number(value) and value > 0) and STRATEGY_KEYS["logarithmic"][key]
    elif key == "louvain":
        wrong = value not in LOUVAIN and ", ".join(LOUVAIN)
    elif key == "min_count":
        low, high = MIN_COUNT_RANGE
        wrong = not (_is_int(value) and low <= value <= high) and f"a whole number from {low} to {high}"
    elif key == "enabled":
        wrong = not isinstance(value, bool) and "true, false"
    elif key == "categories":
        ok = isinstance(value, list) and all(v in PATTERN_CATEGORIES for v in value)
        wrong = not ok and f"a list of any of: {', '.join(PATTERN_CATEGORIES)}"
    elif key.endswith("threshold") or key in ("trigger_weight", "trigger_support", "containment_factor",
                                               "speculative_confidence"):
        wrong = not (_is_number(value) and 0 <= value <= 1) and "a number between 0 and 1"
    elif isinstance(defaults[key], float):
        wrong = not (_is_number(value) and value >= 0) and "a number from 0 to 1000000000"
    else:  # a count
        wrong = not (_is_int(value) and value >= 0) and "a whole number from 0 to 1000000000"
    if wrong:
        raise ConfigError(f"{source}: invalid value {_shown(value)} for '{where}'; allowed: {wrong}")


def yaml_text(value: object, plain: bool = False) -> str:
    """`value` on one line as YAML writes it (true, null, .inf, [1, 2], dates as ISO), not as Python
    does: for messages and `mgcp config show`. Strings are quoted ('5' is not 5); with `plain`, only
    those YAML would read as something else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return (".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf") if math.isinf(value)
                else repr(value))
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # thousands of digits
            return "a number too large to show"
    if isinstance(value, str):
        if plain and _reads_as_itself(value):
            return value
        if value.isprintable():
            return "'" + value.replace("'", "''") + "'"
        import json  # a double-quoted YAML string with escapes (\n, \t, ...) is JSON's

        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_text(v, plain) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{yaml_text(k, plain)}: {yaml_text(v, plain)}" for k, v in value.items()) + "}"
    if hasattr(value, "isoformat"):  # a YAML date or timestamp
        return value.isoformat()
    return str(value)


def _reads_as_itself(text: str) -> bool:
    """Whether `text`, written unquoted in a flow list or mapping, reads back as the same string."""
    import yaml

    if not text.isprintable() or any(c in text for c in ",[]{}"):
        return False
    try:
        return yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False


def _shown(value: object) -> str:
    """A value for a message: as YAML writes it, shortened."""
    text = yaml_text(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _key(key: object) -> str:
    """A key for a message: as written (`true`, `1` and `null` are keys YAML reads as others)."""
    return key if isinstance(key, str) else yaml_text(key)
