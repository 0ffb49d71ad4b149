"""`<experiment>/decided.json`: what a `harness run` with `until: decided` leaves beside
the runs (the rule, the family, and each comparison's looks; written by
`harness.run.decide.Decider.write`). Part of the raw-results tree, so the readers below
the run package (the report's experiment sections) find it here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DECIDED_FILE = "decided.json"
DECIDED_VERSION = 1


def read_decided(exp_dir: Path) -> dict[str, Any] | None:
    """The decided.json of an experiment directory, or None (none, unreadable, or of a
    version this kit does not know)."""
    try:
        data = json.loads((Path(exp_dir) / DECIDED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != DECIDED_VERSION:
        return None
    return data
