"""Was each measurement sound: the measurement checks.

- `registry`   the registered checks (`CHECKS`), their thresholds, and judging a group
- `runfacts`   what the checks read of each run (from the data's one pass)
- `replicas`   whether a replica fell behind its primary: the replica-lag check
- `tails`      Hill's tail index: the heavy-tail check
- `words`      the failed checks in words: a verdict's caveat, tables, warning lines
"""

from __future__ import annotations

from harness.analysis import forward_to

#: The names of `registry`, which this package grew from (`harness.analysis.MOVED`).
__getattr__ = forward_to(__name__, "registry")
