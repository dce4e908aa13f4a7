"""Kept states as framed bytes: read back as written, and anything damaged read as nothing."""

import json
import struct

from mgcp.operations import framed


def test_a_framed_state_reads_back_as_written():
    parts = [b"", b"\x00\x01" * 50, "wörds\nhere".encode()]
    state = framed.frame({"rules": "r1", "n": 3}, parts)
    header, read = framed.unframe(state, 3)
    assert read == parts and header["rules"] == "r1" and header["n"] == 3


def test_a_damaged_state_reads_as_nothing():
    state = framed.frame({"n": 1}, [b"abcd", b"efgh"])
    size = struct.unpack_from("<I", state)[0]

    def reheaded(header) -> bytes:  # the same parts under another header
        text = json.dumps(header).encode()
        return struct.pack("<I", len(text)) + text + state[4 + size:]

    header = json.loads(state[4:4 + size])
    flipped = bytearray(state)
    flipped[-1] ^= 1  # sizes that still fit, a byte of a part changed
    for damaged in [None, b"", b"xy", state[:-1], state + b"!", bytes(flipped), state.decode("latin-1"),
                    reheaded([1]), reheaded({**header, "sizes": [12, -4]}), reheaded({**header, "sizes": "8"}),
                    reheaded({k: v for k, v in header.items() if k != "body"}), reheaded({**header, "n": 2}),
                    reheaded({**header, "words": ["a"]})]:
        assert framed.unframe(damaged, 2) is None
    assert framed.unframe(state, 3) is None  # another number of parts
    assert framed.unframe(state, 2) is not None


def test_a_changed_word_of_the_header_reads_as_nothing():
    """What a header holds besides the sizes (a vocabulary, a mark) is digested with the parts."""
    state = framed.frame({"words": ["database", "schema"], "mark": 7}, [b"\x01\x02"])
    assert framed.unframe(state, 1)[0]["words"] == ["database", "schema"]
    for old, new in [(b"database", b"databasf"), (b'"mark": 7', b'"mark": 8')]:
        assert framed.unframe(state.replace(old, new), 1) is None
