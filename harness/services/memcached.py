"""memcached: one server process, text protocol probes over TCP from the harness side."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.hosts import Host
from harness.services._util import (
    Launch,
    NotReady,
    host_is_root,
    tcp_request,
)
from harness.services.base import Setting
from harness.services.packages import MEMCACHED
from harness.services.single import SingleServer

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


def _line_done(reply: bytes) -> bool:
    return reply.endswith(b"\r\n")


def _stats_done(reply: bytes) -> bool:
    return reply.endswith((b"END\r\n", b"ERROR\r\n"))


def memcached_version(address: str, port: int) -> str:
    """The server's version via `version`; NotReady if the reply is not a version."""
    reply = tcp_request(address, port, b"version\r\n", _line_done).decode(errors="replace")
    if not reply.startswith("VERSION "):
        raise NotReady(f"unexpected reply to version: {reply.strip()!r}")
    return reply[len("VERSION "):].strip()


def memcached_stats_settings(address: str, port: int) -> dict[str, Any]:
    """`stats settings` as a dict; numbers converted, everything else kept as text."""
    reply = tcp_request(address, port, b"stats settings\r\n", _stats_done).decode(errors="replace")
    out: dict[str, Any] = {}
    for line in reply.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            out[parts[1]] = _number(parts[2])
    return out


def _number(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


class Memcached(SingleServer):
    kind = "memcached"
    binaries = ("memcached",)
    packages = (MEMCACHED,)
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
    }

    def validate(self, settings: Mapping[str, Any]) -> list[str]:
        """What memcached would refuse at start: an item size it cannot use."""
        s = self.resolve(settings)
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

    def argv(self, host: Host, launch: Launch, port: int, s: Mapping[str, Any]) -> list[str]:
        argv = [
            "memcached",
            "-l", host.address,
            "-p", str(port),
            "-U", "0",  # no UDP listener: nothing here speaks it
            "-m", str(s["memory_mb"]),
            "-t", str(s["threads"]),
            "-c", str(s["max_connections"]),
        ]
        if s["item_size_max"] is not None:
            argv += ["-I", s["item_size_max"]]
        if host_is_root(host):
            argv += ["-u", "nobody"]  # memcached refuses to run as root without -u
        return argv

    def probe(self, address: str, port: int) -> None:
        memcached_version(address, port)

    def describe(self, address: str, port: int, s: Mapping[str, Any]
                 ) -> tuple[str, dict[str, Any]]:
        stats = memcached_stats_settings(address, port)
        config = {k: stats[k] for k in CONFIG_KEYS if k in stats}
        return memcached_version(address, port), config
