"""Write-time quality of lessons: kinds and confidence, the write gate, the importance heuristic,
and the text identity behind write-time dedup. Stdlib only (the SessionStart hook imports it).

The gate refuses trivial content: a trigger or an action with no letters or digits (emoji or
punctuation only), an action under 10 characters (a wide letter, Chinese, Japanese or Korean,
counts as two), and a trigger or action that is only a greeting or
an acknowledgement ("hi", "thanks", "ok", "got it", ...).

Importance (0 to 1) is a local heuristic over the lesson's words, no model involved. It starts at
0.3 and adds or takes away, then is clamped to [0, 1]:

- +0.2 a directive: always, never, must, do not / don't, avoid, ensure, required, only;
- +0.15 a concrete detail: code in backticks, an identifier (snake_case, dotted.name, call()),
  a file path, a flag (--name) or a number;
- +0.15 a rationale of 20 characters or more (it says why);
- +0.1 an action of 40 to 600 characters; -0.1 one under 20;
- +0.05 tags; +0.05 words of failure (error, fails, bug, crash, exception, broken, timeout);
- -0.15 hedging: maybe, might, perhaps, probably, I think, not sure, possibly.

Two lessons are the same text when their triggers and their actions are equal once `normalized`:
case folded, punctuation and underscores dropped, whitespace collapsed.
"""

from __future__ import annotations

import re

KINDS = ("constraint", "preference", "architecture", "pattern", "error_solution", "project_fact",
         "style", "decision")
DEFAULT_KIND = "pattern"
DEFAULT_CONFIDENCE = 0.8
SPECULATIVE_BELOW = 0.5  # a confidence under this marks a lesson as speculative
MIN_ACTION = 10

_WORDS = re.compile(r"[^\W_]+")
ACKNOWLEDGEMENTS = frozenset("""
hi hello hey hiya yo thanks thank thx ty cheers ok okay k kk yes yep yeah yup no nope nah sure fine
cool great nice good awesome perfect done noted ack lol bye goodbye welcome agreed right alright
""".split()) | frozenset({
    "thank you", "thanks a lot", "many thanks", "got it", "sounds good", "looks good", "good morning",
    "good night", "good evening", "see you", "will do", "all good", "no problem", "ok thanks",
    "okay thanks", "thanks ok", "lgtm", "you re welcome", "hello there", "hi there",
})

# The heuristic reads the lowercased words once; phrases are looked up as substrings. (One pass
# over the words is several times faster than a case-insensitive regex per feature, and the
# SessionStart hook ranks lessons with it on every session start.)
_LOWER_WORD = re.compile(r"[a-z']+")
DIRECTIVES = frozenset("always never must avoid ensure required only don't dont".split())
FAILURES = frozenset("error errors fail fails failed failure bug crash crashes exception broken timeout".split())
HEDGES = frozenset("maybe might perhaps probably possibly".split())
# Fixed-width pieces only: code, snake_case, dotted.name, a/path, call(), --flag, a digit.
_CONCRETE = re.compile(r"\w[_./]\w|\w\(\)|--\w|\d|`[^`\n]+`")


def normalized(text: str | None) -> str:
    """Case folded words only, single spaces: "Use WAL-mode!" and "use wal mode" are equal."""
    text = text or ""
    if not text.isascii():  # NFKC leaves ASCII as it is: unicodedata stays off the hook's usual path
        import unicodedata

        text = unicodedata.normalize("NFKC", text)
    return " ".join(_WORDS.findall(text.casefold()))


def trivial_reason(field: str, text: str | None) -> str | None:
    """Why `text` is too trivial to store as a lesson's `field` (trigger or action), or None."""
    words = normalized(text)
    if not words:
        return f"the {field} has no words (only emoji or punctuation)"
    if field == "action" and _width((text or "").strip()) < MIN_ACTION:
        return f"the action is under {MIN_ACTION} characters (a Chinese, Japanese or Korean one counts as two)"
    if words in ACKNOWLEDGEMENTS:
        return f"the {field} is only a greeting or an acknowledgement ({words!r})"
    return None


def _width(text: str) -> int:
    """The text's length, a wide letter (Chinese, Japanese, Korean: a word in a character or two)
    counted as two; an emoji, wide too, is no letter and counts as one."""
    if text.isascii():
        return len(text)
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" and unicodedata.category(c)[0] == "L" else 1
               for c in text)


def importance(trigger: str, action: str, rationale: str | None = None, tags: list | None = None) -> float:
    """The importance heuristic of the module docstring, rounded to two decimals."""
    text = f"{trigger}\n{action}"
    low = text.lower()
    words = set(_LOWER_WORD.findall(low))
    score = 0.3
    if words & DIRECTIVES or "do not" in low:
        score += 0.2
    if _CONCRETE.search(text):
        score += 0.15
    if rationale and len(rationale.strip()) >= 20:
        score += 0.15
    length = len(action or "")
    if 40 <= length <= 600:
        score += 0.1
    elif length < 20:
        score -= 0.1
    if tags:
        score += 0.05
    if words & FAILURES:
        score += 0.05
    if words & HEDGES or "i think" in low or "not sure" in low:
        score -= 0.15
    return round(min(1.0, max(0.0, score)), 2)
