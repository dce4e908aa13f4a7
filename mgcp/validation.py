"""Checks on text that users and agents store: empty, oversized, holding a NUL, secret-bearing,
malformed ids. Other control characters are stored as given (the CLI shows them escaped).

Pure functions; they raise InvalidInputError with a one-line message naming the field.
"""

from __future__ import annotations

import math
import re

from mgcp.errors import InvalidInputError

MAX_TEXT = 20_000       # one lesson field or one note
MAX_SHORT = 1_000       # a trigger, a tag, a todo, a decision
MAX_CATALOGUE = 1_000_000  # a project catalogue, as JSON
MAX_QUERY = 2_000       # a query or a recall's task
MAX_SESSION_ID = 200    # a session id (Claude Code's are 36-character UUIDs)
MAX_PATH = 4_096        # a project path (Linux's PATH_MAX)
MAX_DEPTH = 64          # nesting levels of a catalogue
MAX_TAGS = 50           # tags of a lesson
MAX_ITEMS = 200         # todos, decisions or active files in one context save
LESSON_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

# Patterns of credentials that must never be stored in shared knowledge. Each is specific enough
# that ordinary prose and code identifiers do not match.
SECRET_PATTERNS = [
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("an API key", re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{20,}")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("a Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("a Stripe key", re.compile(r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{20,}")),
    ("a JSON Web Token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")),
    # "password=hunter2", "secret: 8-or-more"; a colon also begins prose ("password: required"),
    # hence the longer value it needs
    ("a password or secret assignment",
     re.compile(r"(?i)\b(?:password|passwd|secret|api[_-]?key|access[_-]?token)"
                r"(?:\s*=\s*['\"]?[^\s'\"]{6,}|\s*:\s*['\"]?[^\s'\"]{8,})")),
    ("a bearer token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*")),
    # scheme://user:password@host, but not a placeholder ($VAR, <pw>, {pw}, ***, "password")
    ("a password in a URL",
     re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?![$<{*])(?!(?:password|secret)@)[^\s/@]{6,}@")),
]


def redacted(text: str) -> str:
    """The text with anything a credential pattern finds replaced by "[redacted]"."""
    for _kind, pattern in SECRET_PATTERNS:
        text = pattern.sub("[redacted]", text)
    return text


def find_secret(text: str) -> str | None:
    """The kind of credential found in `text`, or None."""
    for kind, pattern in SECRET_PATTERNS:
        if pattern.search(text):
            return kind
    return None


def check_text(field: str, value: str | None, *, required: bool = True, limit: int = MAX_TEXT) -> str | None:
    """Validate one stored text field and return it stripped (None stays None when optional)."""
    if value is None:
        if required:
            raise InvalidInputError(f"{field} is required")
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be text")
    check_no_nul(field, value)  # before stripping: the position it names is in the text as given
    value = value.strip()
    if required and not value:
        raise InvalidInputError(f"{field} must not be empty")
    _check_size_and_secrets(field, value, limit)
    return value


def check_session_id(value: str | None) -> str | None:
    """A session id as stored with a version, an outcome or a context save: None (not given), or
    non-empty text of at most MAX_SESSION_ID characters holding no secret, stripped."""
    return None if value is None else check_text("session id", value, limit=MAX_SESSION_ID)


def check_query(text: str) -> str:
    """A query as it is run and logged: text of at most MAX_QUERY characters, no NUL, valid
    Unicode. What looks like a credential is not refused here: the log keeps it as "[redacted]"."""
    if not isinstance(text, str):
        raise InvalidInputError("the query must be text")
    check_no_nul("the query", text)
    check_unicode("the query", text)
    if len(text) > MAX_QUERY:
        raise InvalidInputError(f"the query is too long ({len(text)} characters; the limit is {MAX_QUERY})")
    return text


def check_project_path(path: str) -> str:
    """A project path as a project is stored under: at most MAX_PATH characters, no NUL, valid text,
    no secret (a path is shown in every review and report)."""
    if not isinstance(path, str):
        raise InvalidInputError("the project path must be text")
    check_no_nul("the project path", path)
    _check_size_and_secrets("the project path", path, MAX_PATH)
    return path


def check_no_nul(what: str, text: str) -> str:
    """Text holds no NUL character: a command line cannot carry one, so the CLI never stores it, and
    SQLite's text functions stop at it; through MCP it is refused the same way."""
    if "\0" in text:
        raise InvalidInputError(f"{what} holds a NUL character (\\x00) at character "
                                f"{text.index(chr(0)) + 1}, which cannot be stored")
    return text


def check_unicode(what: str, text: str) -> str:
    """Text must be valid Unicode to be stored and read back byte-exact: no unpaired surrogates
    (what Python makes of invalid UTF-8 bytes in arguments, or a lone JSON escape such as \\ud800)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        found = (f"the byte 0x{code - 0xDC00:02x}, not UTF-8," if 0xDC80 <= code <= 0xDCFF  # as os.fsdecode keeps it
                 else f"an unpaired surrogate U+{code:04X}")
        raise InvalidInputError(f"{what} is not valid text: {found} at character {exc.start + 1}") from None
    return text


def _check_size_and_secrets(what: str, text: str, limit: int) -> None:
    check_unicode(what, text)
    if len(text) > limit:
        raise InvalidInputError(f"{what} is too long ({len(text)} characters; the limit is {limit})")
    kind = find_secret(text)
    if kind:
        raise InvalidInputError(f"{what} appears to contain {kind}; secrets are never stored")


def check_lesson_id(value: str, field: str = "lesson id") -> str:
    if not isinstance(value, str) or not LESSON_ID.match(value):
        raise InvalidInputError(
            f"invalid {field} {value!r}: use ASCII letters and digits, '.', '_', ':' or '-', starting with "
            "a letter or digit (at most 128)"
        )
    return value


def check_list(field: str, values: list[str] | None, limit: int = MAX_SHORT, count: int = MAX_ITEMS) -> list[str] | None:
    """Each value checked as text of at most `limit` characters, and at most `count` of them (every
    reply that shows them must stay small enough for an agent to take whole)."""
    if values is None:
        return None
    check_count(field, values, count)
    return [check_text(field, v, limit=limit) for v in values]


def numeral(text: str) -> bool:
    """Whether `text` is a whole number in ASCII digits: `int` takes it ("²" and "①" are digits
    `int` refuses)."""
    return text.isascii() and text.isdigit()


def check_count(field: str, values: list, count: int = MAX_ITEMS) -> None:
    if len(values) > count:
        raise InvalidInputError(f"too many values for {field}: {len(values):,} (limit {count:,})")


def check_catalogue(catalogue) -> dict:
    """A catalogue is stored as JSON and must read back exactly as given: a JSON object (see
    `check_json`) of at most MAX_CATALOGUE characters."""
    if not isinstance(catalogue, dict):
        raise InvalidInputError("the catalogue must be a JSON object")
    return check_json("the catalogue", catalogue, MAX_CATALOGUE)


def check_json(what: str, stored, limit: int):
    """A value stored as JSON, which must read back exactly as given: at most MAX_DEPTH levels
    deep, of text (valid Unicode), whole numbers that fit in 64 bits, finite decimals, booleans and
    nulls; at most `limit` characters, and no secrets. `what` names it in a refusal."""
    import json

    stack = [(stored, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH and isinstance(value, (dict, list)):
            raise InvalidInputError(f"{what} is nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidInputError(f"the keys of {what} must be text")
                check_unicode(f"a key of {what}", key)
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            check_unicode(f"a value of {what}", value)
        elif isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int):
            if not -2**63 <= value < 2**63:
                raise InvalidInputError(f"{what} holds a whole number too large to store (at most 64 bits)")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidInputError(f"{what} holds NaN or Infinity, which JSON cannot carry")
        else:
            raise InvalidInputError(f"{what} holds a {type(value).__name__}, which is not JSON")
    _check_size_and_secrets(what, json.dumps(stored, ensure_ascii=False), limit)
    return stored
