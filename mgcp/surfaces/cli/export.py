"""`mgcp export dpo`: training data from lesson history."""

from typing import Annotated, Optional

import typer

from mgcp.surfaces.cli.app import Db, noun, note, with_store

export_app = noun("export", "Export training data from lesson history.")


@export_app.command("dpo")
def dpo(out: Annotated[Optional[str], typer.Option("--out", help="Output file (default: stdout).")] = None,
        db: Db = None):
    """Write one JSONL record per pair of consecutive real lesson versions (for DPO training).

    Example: mgcp export dpo --out lessons-dpo.jsonl
    """
    import json
    import sys

    from mgcp.export import dpo_records

    records = dpo_records(with_store(db, lambda s: s.lessons.real_version_pairs(), create=False))
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(lines)
        note(f"wrote {len(records)} record(s) to {out}")
    else:
        sys.stdout.write(lines)
