"""Did ops fail? The errors check's reading of a run's manifest: its counts (errors and
timeouts, over its measured ops; a miss is an answer) and the first message of each kind
of failure its clients met (`harness.results.failures`).

A run whose failed ops exceed `ERROR_SHARE_BAR` (0.1%) of its measured ops fails the
check: its latencies include how long the failures took and its throughput counts them,
and a pooler in the wrong mode or a server refusing writes shows first as such a share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.results import ERROR_SHARE_BAR, ERROR_STATUSES, Manifest
from harness.results.failures import failure_kinds

#: The check's description, its threshold and its caveat (`registry.Check`).
WORDS = ("ops failed (errors and timeouts) beyond a trace",
         f"counts.error + counts.timeout > {ERROR_SHARE_BAR:.1%} of counts.measured",
         "ops failed in {k} of {n} {side} runs")


def failing(runs: Sequence[tuple[str, Manifest]]) -> tuple[list[str], int, float, str] | None:
    """(the runs over the bar, the runs judged (with measured ops), the worst share, the
    first message of the commonest kind of failure in words), or None where none is."""
    over, judged, worst = [], 0, 0.0
    kinds: dict[str, list[Any]] = {}
    for run_id, manifest in runs:
        counts = manifest.typed_counts
        if counts.measured <= 0:
            continue
        judged += 1
        share = sum(counts.by_status.get(s, 0) for s in ERROR_STATUSES) / counts.measured
        if share > ERROR_SHARE_BAR:
            over.append(run_id)
            worst = max(worst, share)
            for kind, n, first in failure_kinds(manifest):
                entry = kinds.setdefault(kind, [0, first])
                entry[0] += n or 0
    if not over:
        return None
    ranked = sorted(kinds.values(), key=lambda e: -e[0])
    said = ""
    if ranked:
        n, first = ranked[0]
        said = f"; first of the commonest kind: {first}" + (f" ({n:,} times)" if n else "")
        if len(ranked) > 1:
            said += f"; {len(ranked) - 1} other kind(s)"
    return over, judged, worst, said


def detail(worst: float, of: str, said: str) -> str:
    """The finding's sentence (`of`: "2 of 3 runs")."""
    return (f"up to {worst:.1%} of the measured ops failed (errors and timeouts) in {of} "
            f"(bar: {ERROR_SHARE_BAR:.1%}){said}: the latencies include how long the "
            "failures took and the throughput counts them; fix the cause (the server's, a "
            "pooler's or a proxy's log) before reading these numbers, or set "
            "run.fail_if_error_rate_above to fail such runs")
