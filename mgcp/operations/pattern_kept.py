"""What pattern reinforcement keeps of a run for the next (`Kept`), so that a repeat run reads again
only what changed: each counted lesson's cluster key and normalized action (as digests), and for
each decision and note pattern its wording and the lesson holding it.

A lesson is known by `lesson_words.lesson_digest` (its id, creation time and texts), so a changed
lesson is a new one. A pattern's holder can change only when its wording changes, when the lesson
holding it changes or leaves, or when a lesson enters (added, changed, made active) that could hold
it by itself: its normalized action equals the pattern's, or it holds the share of the pattern's
keywords a holder must hold (other lessons' counts do not move, and a lesson below that share never
holds). Every other pattern keeps the holder the kept run found (`Kept.unsettled`). What the kept run decided was
written then: while the patterns table has not changed since (its change mark), a pattern whose
observations and holder are unchanged is exactly as stored.

A kept state made by other rules (other code of this module, of pattern reinforcement, of the word
index or of `mgcp.reinforcement`, other rules words are read by (`shared.WORDS`), or another
`min_count` or `categories`) is ignored, and so is a damaged one (`mgcp.operations.framed`: cut
short, grown, a byte changed anywhere in it). It is a cache: a run from nothing finds and
writes exactly what a run from it does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mgcp import reinforcement
from mgcp.operations import framed
from mgcp.operations.shared import WORDS

_CODE = hashlib.blake2b(WORDS + Path(reinforcement.__file__).read_bytes()
                        + b"".join(Path(__file__).with_name(name).read_bytes()
                                   for name in ("pattern_reinforcement.py", "pattern_kept.py", "lesson_words.py")),
                        digest_size=16).hexdigest()
EMPTY = bytes(16)  # the digest of a text that normalizes to nothing
ACTIVE, SUPERSEDED = 1, 2


def rules(needed: int, categories) -> str:
    """What a kept state is valid under."""
    return json.dumps([_CODE, needed, sorted(categories)])


def text_digest(said: str) -> bytes:
    return hashlib.blake2b(said.encode("utf-8", "surrogatepass"), digest_size=16).digest() if said else EMPTY


@dataclass
class Kept:
    """`digests`: the counted lessons' digests, with each one's cluster key's text digest (`keyed`),
    normalized action's digest (`whole`) and status (ACTIVE or SUPERSEDED), numpy arrays of 16-byte
    strings (equal as numpy compares them exactly when their bytes are) and of bytes."""

    rules: str
    mark: str  # the patterns table's change mark once the run had written
    digests: "np.ndarray"
    keyed: "np.ndarray"
    whole: "np.ndarray"
    status: "np.ndarray"
    # decision or note key -> (wording, holder id, holder digest hex, normalized wording, keywords)
    keys: dict[str, tuple] = field(default_factory=dict)

    def unsettled(self, key: str, surface: str, active: set[bytes], may_hold: Callable[[str, list], bool]) -> bool:
        """Whether the lesson holding `key` may differ from the kept one (see the module):
        `may_hold(normalized wording, keywords)` says whether a lesson that entered could hold it."""
        known = self.keys.get(key)
        if known is None or known[0] != surface:
            return True
        _, _, holder, normalized, words = known
        if holder is not None and bytes.fromhex(holder) not in active:
            return True
        return may_hold(normalized, words)

    def find(self, digests: "np.ndarray") -> tuple["np.ndarray", "np.ndarray"]:
        """For each of `digests`, whether it is kept and where (its kept number where it is)."""
        import numpy as np

        if not len(self.digests):
            return np.zeros(len(digests), dtype=bool), np.zeros(len(digests), dtype=np.int64)
        order = np.argsort(self.digests, kind="stable")
        place = order[np.minimum(np.searchsorted(self.digests[order], digests), len(order) - 1)]
        return self.digests[place] == digests, place

    def same(self, other: "Kept") -> bool:
        import numpy as np

        return self.keys == other.keys and all(np.array_equal(getattr(self, name), getattr(other, name))
                                               for name in ("digests", "keyed", "whole", "status"))

    def state(self) -> bytes:
        """The state as bytes (`framed`): the rules, mark and keys in the header, the four arrays as
        its parts."""
        return framed.frame({"rules": self.rules, "mark": self.mark, "keys": self.keys, "lessons": len(self.digests)},
                            [self.digests.tobytes(), self.keyed.tobytes(), self.whole.tobytes(), self.status.tobytes()])

    @classmethod
    def of(cls, state: bytes | None, rules_: str) -> "Kept | None":
        """The kept state, when made by these rules; None when it is missing, unreadable or damaged
        (`framed.unframe`: cut short, grown, a byte changed anywhere in it)."""
        import numpy as np

        read = framed.unframe(state, 4)
        if read is None:
            return None
        header, (digests, keyed, whole, status) = read
        try:
            if header.get("rules") != rules_:
                return None
            n = int(header["lessons"])
            if not (len(digests) == len(keyed) == len(whole) == 16 * n and len(status) == n):
                return None
            arrays = [np.frombuffer(part, dtype="S16") for part in (digests, keyed, whole)]
            status_ = np.frombuffer(status, dtype=np.uint8)
            if not np.all((status_ == ACTIVE) | (status_ == SUPERSEDED)):
                return None
            keys = {k: tuple(v) for k, v in header["keys"].items()}
            # each (wording, holder id, holder digest as hex or None, normalized wording, keywords)
            if any(len(v) != 5 or (v[2] is not None and len(bytes.fromhex(v[2])) != 16) for v in keys.values()):
                return None
            return cls(rules_, header["mark"], *arrays, status_, keys)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
