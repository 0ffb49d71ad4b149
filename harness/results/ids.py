"""Run identities in the raw-results format: the config id of a grid point names a
run's configuration in its manifest and directory name, so it belongs to the format
(`harness.spec` and the importers use it; it imports nothing of theirs)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any


def config_id(grid_point: Mapping[str, Any]) -> str:
    """A readable, stable id of a grid point: `op=store_read,threads=4-1a2b3c`."""
    canon = json.dumps(grid_point, sort_keys=True, default=str)
    digest = hashlib.sha256(canon.encode()).hexdigest()[:6]
    readable = ",".join(f"{k}={v}" for k, v in grid_point.items())
    readable = re.sub(r"[^A-Za-z0-9_.,=-]+", "_", readable)[:80]
    return f"{readable}-{digest}" if readable else digest
