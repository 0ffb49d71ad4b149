"""memcached: one server process, text protocol probes over TCP from the harness side;
its counters (`stats`) for a run's telemetry."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.drivers.memcache import parse_stats, stats_done, stats_request
from harness.drivers.replies import (
    MAX_REPLY_BYTES,
    Reading,
    cut_note,
    numbers_only,
    version_text,
)
from harness.drivers.tls import handshake_problem
from harness.hosts import Host
from harness.hosts.endpoint import TLSConfig, split_hostport
from harness.services._util import (
    Launch,
    NotReady,
    ProbeError,
    host_is_root,
    tcp_request,
)
from harness.services.attached import attached, not_answering
from harness.services.base import Endpoint, RunningService, Setting
from harness.services.ownbuild import BINARY_SETTING, binary_problems
from harness.services.packages import MEMCACHED
from harness.services.single import SingleServer
from harness.services.tlsconf import TLS_SETTING, address_tls

#: memcached's -I: a size in bytes, k or m; from its slab chunk (512 KiB, of which it must
#: be a multiple) to 1 GiB, and at most half of -m (memcached 1.6 refuses anything else).
_ITEM_SIZE = re.compile(r"^([0-9]{1,10})([kKmM]?)$")
_CHUNK = 512 << 10
#: Linux's default fs.nr_open: the most file descriptors (connections) a process may have.
MAX_FDS = 1 << 20
#: `stats settings` keys recorded in the manifest: what we set plus what shapes caching.
CONFIG_KEYS = (
    "maxbytes",
    "maxconns",
    "num_threads",
    "item_size_max",
    "tcpport",
    "udpport",
    "evictions",
    "growth_factor",
    "chunk_size",
)

#: `stats` counters a run's telemetry reports as deltas over the run (events)...
COUNTERS = (
    "cmd_get", "cmd_set", "cmd_flush", "cmd_touch", "get_hits", "get_misses",
    "get_expired", "get_flushed", "delete_hits", "delete_misses", "incr_hits",
    "incr_misses", "decr_hits", "decr_misses", "cas_hits", "cas_misses", "cas_badval",
    "touch_hits", "touch_misses", "evictions", "expired_unfetched", "evicted_unfetched",
    "reclaimed", "total_connections", "rejected_connections", "listen_disabled_num",
    "conn_yields", "bytes_read", "bytes_written", "total_items", "rusage_user",
    "rusage_system",
)
#: ... and levels, reported as their value at the run's end.
GAUGES = ("curr_connections", "curr_items", "bytes", "limit_maxbytes", "threads")


def _line_done(reply: bytearray) -> bool:
    return reply.endswith(b"\r\n")


#: Bytes of the reply to `version` read: "VERSION 1.6.18\r\n" is 16.
MAX_VERSION_BYTES = 256


def memcached_version(address: str, port: int, tls: TLSConfig | None = None) -> str:
    """The server's version via `version`; NotReady if the reply is not a version (or
    not one line of at most `MAX_VERSION_BYTES`)."""
    got = tcp_request(address, port, b"version\r\n", _line_done, tls=tls,
                      max_bytes=MAX_VERSION_BYTES)
    reply = got.data.decode(errors="replace")
    if got.cut or not reply.startswith("VERSION "):
        raise NotReady(f"unexpected reply to version: {reply.strip()[:80]!r}"
                       + (f" (more than {MAX_VERSION_BYTES} bytes)" if got.cut else ""))
    return version_text(reply[len("VERSION "):].strip())


def memcached_stats(address: str, port: int, group: str = "",
                    tls: TLSConfig | None = None) -> Reading:
    """`stats` (or `stats <group>`) as a mapping, read by the driver's parser within the
    bounds of `harness.drivers.replies` (a reply cut is said in its `cut`)."""
    got = tcp_request(address, port, stats_request(group), stats_done, tls=tls)
    stats = parse_stats(got.data)
    if got.cut:
        stats.cut.insert(0, f"{f'stats {group}'.strip()}: larger than {MAX_REPLY_BYTES:,} "
                            "bytes: read to there")
    return stats


def memcached_stats_settings(address: str, port: int, tls: TLSConfig | None = None
                             ) -> dict[str, Any]:
    """`stats settings` as the manifest records it: numbers converted, everything else
    kept as text, and `truncated` saying what was cut."""
    stats = memcached_stats(address, port, "settings", tls)
    config: dict[str, Any] = dict(stats)
    if (note := cut_note(stats.cut)) is not None:
        config["truncated"] = note
    return config


class Memcached(SingleServer):
    kind = "memcached"
    binaries = ("memcached",)
    packages = (MEMCACHED,)
    gauges = GAUGES
    settings: Mapping[str, Setting] = {
        # memcached takes -m -1 as 18446744073708503040 bytes: bounds matter.
        "memory_mb": Setting((int,), 64, "Item memory in MiB (-m).", low=1, high=1 << 20,
                             why="1 TiB"),
        "threads": Setting((int,), 1, "Worker threads (-t).", low=1, high=256,
                           why="far more than any machine's cores; memcached warns above 64"),
        "max_connections": Setting((int,), 1024, "Simultaneous connections (-c).", low=1,
                                   high=MAX_FDS, why="the file descriptors a process may have"),
        "item_size_max": Setting(
            (str, type(None)), None, "Largest item, e.g. '1m' (-I); None keeps the default."
        ),
        "tls": TLS_SETTING,
        "binary": BINARY_SETTING,
    }

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        """What memcached would refuse at start: an item size it cannot use."""
        s = self.resolve(settings)
        problems = binary_problems(s["binary"])
        if problems:
            return problems
        text = s["item_size_max"]
        if not isinstance(text, str):
            return []  # None: memcached's default
        match = _ITEM_SIZE.match(text)
        if not match:
            return [f"item_size_max {text!r} is not a size such as '512k' or '2m'"]
        size = int(match[1]) << {"": 0, "k": 10, "m": 20}[match[2].lower()]
        if not _CHUNK <= size <= 1 << 30:
            return [f"item_size_max {text!r} must be from 512k to 1024m"]
        if size % _CHUNK:
            return [f"item_size_max {text!r} must be a multiple of 512k (memcached's slab "
                    "chunk)"]
        memory = s["memory_mb"]
        if isinstance(memory, int) and size > (memory << 20) // 2:
            return [f"item_size_max {text!r} may be at most half of memory_mb ({memory} MiB)"]
        return []

    def argv(self, host: Host, launch: Launch, endpoint: Endpoint, s: Mapping[str, Any]
             ) -> list[str]:
        argv = [
            "memcached",
            "-l", host.address,
            "-p", str(endpoint.port),
            "-U", "0",  # no UDP listener: nothing here speaks it
            "-m", str(s["memory_mb"]),
            "-t", str(s["threads"]),
            "-c", str(s["max_connections"]),
        ]
        if s["item_size_max"] is not None:
            argv += ["-I", s["item_size_max"]]
        if endpoint.tls is not None:  # memcached -Z: TLS on every listener
            cert, key = self.tls_paths(launch)
            argv += ["-Z", "-o", f"ssl_chain_cert={cert},ssl_key={key}"]
        if host_is_root(host):
            argv += ["-u", "nobody"]  # memcached refuses to run as root without -u
        return argv

    attachable = True
    address_settings = ("tls",)

    def attach(self, host: Host, spec: Any, creds: Any) -> RunningService:
        address, port = split_hostport(spec.address)
        tls = address_tls(spec)
        try:
            version = memcached_version(address, port, tls)
            config = memcached_stats_settings(address, port, tls)
        except (OSError, ProbeError) as exc:
            raise not_answering(spec, "no memcached answer", exc, handshake_problem(exc) or (
                "check the address, and that memcached listens there" + (
                    "" if tls else " in plain text (with -Z it needs tls:)"))) from None
        return attached(host, spec, self.kind, self.kind, version, config, creds, tls=tls)

    def probe(self, endpoint: Endpoint) -> None:
        memcached_version(endpoint.host, endpoint.port, endpoint.tls)

    def describe(self, endpoint: Endpoint, s: Mapping[str, Any]
                 ) -> tuple[str, dict[str, Any]]:
        stats = memcached_stats_settings(endpoint.host, endpoint.port, endpoint.tls)
        config = {k: stats[k] for k in (*CONFIG_KEYS, "truncated") if k in stats}
        if endpoint.tls is not None:
            config["tls"] = endpoint.tls.describe()
        return memcached_version(endpoint.host, endpoint.port, endpoint.tls), config

    def counters(self, svc: RunningService) -> dict[str, float]:
        """`stats` counters and gauges (`COUNTERS`, `GAUGES`). The asking connection is
        one of `curr_connections` and, at the end, of `total_connections`; `stats`
        itself counts in none of the others. A reply cut, or a counter that is not a
        finite number, is said in the reading's `cut`."""
        stats = memcached_stats(svc.endpoint.host, svc.endpoint.port, tls=svc.endpoint.tls)
        return numbers_only(stats.keep((*COUNTERS, *GAUGES)), "stats")
