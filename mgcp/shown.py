"""JSON text that is safe to show in a terminal, for every surface and file that prints JSON.

`json.dumps(..., ensure_ascii=False)` escapes the C0 controls but leaves DEL and the C1 controls
raw; a terminal may act on those (U+009B is a CSI). They only occur inside strings, where a \\u
escape reads back as the same text, so escaping them changes no value. Stdlib only.
"""

from __future__ import annotations

import re

# Found by a pattern's scan, not `str.translate`, which goes a character at a time through a dict
# once the text holds anything beyond ASCII (0.55 s over the 11 MB report of a run at 100k lessons).
_RAW_CONTROLS = re.compile("[\x7f-\x9f]")


def json_escaped(text: str) -> str:
    """JSON text (as `json.dumps` writes it with `ensure_ascii=False`) with DEL and the C1 controls
    escaped as \\u sequences."""
    return _RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
