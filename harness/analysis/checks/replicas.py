"""Did a replica fall behind its primary during the run? The replica_lag check's reading
of a run's `telemetry.replication` (`harness.run.telemetry`: the primary's replication
offset and each replica's, link and lag, at the run's two edges; a Redis Cluster's
masters each with their replicas).

A replica fell behind when, at the run's end (every client gone, the primary read just
before it), its link to the primary was not up; or it had applied less than the
primary's offset by more than `BEHIND_S` seconds of the run's replication stream (the
bytes the primary's offset grew by over the run, per second of its window) and more
than `BEHIND_FLOOR_BYTES`; or its lag (seconds since its last acknowledgement, which a
replica sends every second, as the primary lists it) had grown by `LAG_GROWTH_S` or
more since the start. Reads from such a replica may have returned stale values, and a
replica that cannot keep up is a different deployment from one that can. A replica's
address that answered from two servers at the two edges (another `run_id`: it was
restarted, or it is a proxy spreading connections over several replicas) is named too:
its offsets and counters are then not one replica's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Behind by more than this many seconds of the run's replication stream ...
BEHIND_S = 1.0
#: ... and by more than this many bytes: Redis writes the stream in 16 KiB blocks, so
#: up to one may be in flight between the two readings of a replica that keeps up.
BEHIND_FLOOR_BYTES = 16 * 1024
#: Lag grown by this much: a replica acknowledges every second, so 2 s is a missed one
#: beyond the jitter of the readings (0 or 1 s).
LAG_GROWTH_S = 2
#: The bar in words; what a finding says after the replicas it names; the registry's
#: description, threshold and caveat (`registry.Check`).
BAR = (f"its link up, at most {BEHIND_S:g} s of the run's writes (or "
       f"{BEHIND_FLOOR_BYTES // 1024} KiB) behind the primary, its lag not grown by "
       f"{LAG_GROWTH_S} s")
ADVICE = (f" (bar: {BAR}): reads from it may have been stale; see telemetry.replication, "
          "and give the replicas CPUs of their own or write less")
ANSWERED_FROM_TWO = "it answered from two servers"
TWO_SERVERS = (": list the replicas' own addresses to judge each (a proxy's spreads the "
               "kit's readings over them)")
WORDS = ("a replica fell behind its primary during the run (or answered from two servers)",
         f"telemetry.replication at the run's end: {BAR} "
         "(harness.analysis.checks.replicas)",
         "a replica was behind, or not one server, in {k} of {n} {side} runs")


@dataclass(frozen=True)
class Behind:
    """One replica that fell behind in one run: `name` (service and address) and why."""

    name: str
    why: str
    #: Seconds of the run's replication stream it was behind (inf: its link was down,
    #: or nothing was replicated; 0: it answered from two servers); for the worst.
    behind_s: float


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _why(replica: Mapping[str, Any], before: Mapping[str, Any] | None,
         replicated: int | None, window_s: float | None) -> tuple[str, float] | None:
    link = replica.get("link")
    if link != "up":
        return f"its link was {link or 'unknown'} at the run's end", math.inf
    ids = [r.get("run_id") for r in (before or {}, replica)]
    if all(ids) and ids[0] != ids[1]:
        return (f"{ANSWERED_FROM_TWO} at the run's two edges (another run_id: restarted, "
                "or a proxy spreading connections over several), so its offsets and "
                "counters are not one replica's"), 0.0
    behind = _int(replica.get("behind_bytes"))
    if behind is not None and behind > BEHIND_FLOOR_BYTES:
        rate = replicated / window_s if replicated and window_s else 0.0
        secs = behind / rate if rate > 0 else math.inf
        if secs > BEHIND_S:
            said = f"{secs:.2g} s of the run's writes" if math.isfinite(secs) else (
                "while nothing was written")
            return f"it was {behind:,} bytes behind the primary at the run's end ({said})", secs
    lag0 = _int((before or {}).get("lag_s"))
    lag1 = _int(replica.get("lag_s"))
    if lag0 is not None and lag1 is not None and lag1 - lag0 >= LAG_GROWTH_S:
        return f"its lag grew from {lag0} s to {lag1} s", float(lag1 - lag0)
    return None


def _edges(repl: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(service, start, end) of each primary read at both edges; a Redis Cluster's
    `shards` (one per master, `redis_cluster_replicas.state`) each as its own primary."""
    out = []
    for service, edges in repl.items():
        start, end = (edges.get(k) if isinstance(edges, Mapping) else None
                      for k in ("start", "end"))
        if not isinstance(start, Mapping) or not isinstance(end, Mapping):
            continue
        if "shards" not in end:
            out.append((service, start, end))
            continue
        before = {s.get("primary"): s for s in start.get("shards") or ()
                  if isinstance(s, Mapping)}
        out += [(service, before[s.get("primary")], s) for s in end.get("shards") or ()
                if isinstance(s, Mapping) and s.get("primary") in before]
    return out


def behind(telemetry: Mapping[str, Any]) -> list[Behind] | None:
    """The replicas of a run that fell behind (see the module); None where the run has
    no replication read at both edges to judge."""
    repl = telemetry.get("replication")
    if not isinstance(repl, Mapping) or not repl:
        return None
    window = telemetry.get("window_s")
    window_s = float(window) if isinstance(window, int | float) and window > 0 else None
    judged, out = False, []
    for service, start, end in _edges(repl):
        judged = True
        o0, o1 = _int(start.get("offset")), _int(end.get("offset"))
        replicated = o1 - o0 if o0 is not None and o1 is not None else None
        before = {r.get("address"): r for r in start.get("replicas", ())
                  if isinstance(r, Mapping)}
        for replica in end.get("replicas", ()):
            if not isinstance(replica, Mapping):
                continue
            found = _why(replica, before.get(replica.get("address")), replicated, window_s)
            if found is not None:
                out.append(Behind(f"{service} replica {replica.get('address')}", *found))
    return out if judged else None


def worst(found: list[Behind], runs: str) -> tuple[str, list[str]]:
    """The finding's words for the replicas that fell behind in `runs` ("2 of 5 runs"):
    the worst one first with why, the others, the bar and what to do; and their names."""
    names = sorted({b.name for b in found})
    top = max(found, key=lambda b: b.behind_s)
    others = [n for n in names if n != top.name]
    return (f"{top.name} in {runs}: {top.why}"
            + (f"; also {', '.join(others)}" if others else "")
            + (TWO_SERVERS if top.why.startswith(ANSWERED_FROM_TWO) else ADVICE)), names


def run_figures(telemetry: Mapping[str, Any]) -> dict[str, float] | None:
    """One run's replication, to show beside its latency: the primary's replication
    stream over the run (bytes per second of its window), and at the run's end the most
    bytes any replica was behind, the largest lag, and how many of its replicas had
    their link up; None where the run has no replication read at both edges."""
    repl = telemetry.get("replication")
    window = telemetry.get("window_s")
    if not isinstance(repl, Mapping) or not isinstance(window, int | float) or window <= 0:
        return None
    out = {"stream_bytes_s": 0.0, "behind_bytes": 0.0, "lag_s": 0.0, "up": 0.0,
           "replicas": 0.0}
    found = False
    for _, start, end in _edges(repl):
        found = True
        o0, o1 = _int(start.get("offset")), _int(end.get("offset"))
        if o0 is not None and o1 is not None:
            out["stream_bytes_s"] += (o1 - o0) / float(window)
        for r in end.get("replicas", ()):
            if isinstance(r, Mapping):
                out["replicas"] += 1
                out["up"] += r.get("link") == "up"
                out["behind_bytes"] = max(out["behind_bytes"], _int(r.get("behind_bytes")) or 0)
                out["lag_s"] = max(out["lag_s"], _int(r.get("lag_s")) or 0)
    return out if found else None
