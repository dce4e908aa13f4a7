"""Kept states as bytes: a JSON header, then binary parts (arrays, joined digests, text).

`frame` writes the header with each part's size and a digest of the header and all the parts;
`unframe` gives the header and the parts back, or None when the bytes are not such a state or were
damaged: cut short, grown, a header that is not an object, or a changed byte anywhere in the header
or the parts (which would otherwise read as words or numbers that still fit, and give results no
run would give). What a part holds, and whether its counts agree with the header, is for the
reader to check. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence

_SIZE = struct.Struct("<I")


def frame(header: dict, parts: Sequence[bytes]) -> bytes:
    """`header` (JSON-able, without the keys "sizes" and "body") and `parts`, as one state."""
    fields = {**header, "sizes": [len(part) for part in parts]}
    head = json.dumps({**fields, "body": _digest(fields, parts)}).encode()
    return _SIZE.pack(len(head)) + head + b"".join(parts)


def unframe(state: bytes | None, parts: int) -> tuple[dict, list[bytes]] | None:
    """The header and the `parts` parts of a state `frame` made, or None (see the module docstring)."""
    if not isinstance(state, bytes) or len(state) < _SIZE.size:
        return None
    (size,) = _SIZE.unpack_from(state)
    try:
        header = json.loads(state[_SIZE.size:_SIZE.size + size])
    except ValueError:
        return None
    sizes = header.get("sizes") if isinstance(header, dict) else None
    if (not isinstance(sizes, list) or len(sizes) != parts
            or not all(isinstance(n, int) and n >= 0 for n in sizes)):
        return None
    out, at = [], _SIZE.size + size
    for n in sizes:
        out.append(state[at:at + n])
        at += n
    if at != len(state) or header.get("body") != _digest({k: v for k, v in header.items() if k != "body"}, out):
        return None
    return header, out


def _digest(fields: dict, parts: Sequence[bytes]) -> str:
    """A digest of the header's fields (as JSON with sorted keys, which reads back to the same
    fields) and of the parts."""
    h = hashlib.blake2b(json.dumps(fields, sort_keys=True).encode(), digest_size=16)
    for part in parts:
        h.update(part)
    return h.hexdigest()
