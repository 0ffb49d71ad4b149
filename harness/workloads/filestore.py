"""Study of seed 000: an App Engine style file store, insert / find / remove, with and
without memcache, from 1 and 4 client threads (here: connections of one client).

Against any app that keeps the HTTP contract of harness.apps.filestore (PUT, GET,
DELETE /files/{name}; `X-Memcache: on|off`): the launched reference app, or one started
elsewhere (`external` service with a URL). Every run uses one op and one memcache mode.

Each client process rebuilds its own file set in memory from the parameters (names
`c{client}-{i}.txt`, sizes from harness.datasets.filegen, seeded), so nothing is shipped to
client hosts and runs repeat exactly. A client prepares its own files when it opens its
first connection, before the common start: for `insert` it deletes them (so every
measured PUT creates a file), for `find` and `remove` it stores them. Op `seq` uses file
`seq % files`, so with run.ops + warmup_ops <= files every file is touched once (a
second DELETE of a file would be a 404, recorded as `miss`). `bytes` is the file's size.

`baseline()` measures the round trip to the app before each run, from the harness
machine: TCP connect time, and a no-op `GET /health` on a kept-alive connection through
the same HTTP client the ops use (so "op latency - no-op latency" estimates the app's
service time).
"""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from harness.datasets.filegen import DISTRIBUTIONS, FileContents, check_params, file_specs
from harness.drivers import http
from harness.errors import WorkloadError
from harness.hosts.endpoint import TLSConfig
from harness.results import MISS, OK
from harness.services.base import Endpoint
from harness.settings import Setting
from harness.workloads.base import Workload, WorkloadClient

OPS = ("insert", "find", "remove")
INSERT, FIND, REMOVE = range(3)
SIZE_PARAMS = ("size_bytes", "min_bytes", "max_bytes", "median_bytes", "sigma")


def app_url(endpoint: Endpoint) -> http.URL:
    """Where the app is: its `url` (external apps may live under a path), else host:port."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return http.parse_url(endpoint.extra.get("url") or f"http://{host}:{endpoint.port}/")


def tls_of(endpoint: Endpoint, url: http.URL) -> TLSConfig | None:
    """TLS for an https app: the endpoint's (its CA), else the system's CAs."""
    return (endpoint.tls or TLSConfig()) if url.tls else None


def summarize_ms(samples_ns: list[int]) -> dict[str, float]:
    ms = [s / 1e6 for s in samples_ns]
    return {"min": min(ms), "avg": statistics.fmean(ms), "max": max(ms),
            "stddev": statistics.stdev(ms) if len(ms) > 1 else 0.0,
            "median": statistics.median(ms), "n": len(ms)}


class FileStore(Workload):
    name = "filestore"
    description = "HTTP file store (seed 000): insert/find/remove files, memcache on/off"
    ops = OPS
    requires = ("filestore",)
    params: Mapping[str, Setting] = {
        "op": Setting((str,), "insert", "the operation every op of the run performs",
                      choices=OPS),
        "memcache": Setting((bool,), True, "X-Memcache header of every request"),
        # Each client process holds its files' names and sizes and one block of the
        # largest file's size: a million files, 1 GiB files, are far past any study.
        "files": Setting((int,), 100, "files per client process (the seed: 100)", low=1,
                         high=1_000_000),
        "size_dist": Setting((str,), "lognormal", "file size distribution",
                             choices=DISTRIBUTIONS),
        # Their lower bounds depend on size_dist: filegen.check_params (`validate`).
        "size_bytes": Setting((int,), 10_000, "fixed: every file's size", high=1 << 30,
                              why="1 GiB, held in memory"),
        "min_bytes": Setting((int,), 0, "uniform: lower bound; lognormal: clip below",
                             high=1 << 30, why="1 GiB, held in memory"),
        "max_bytes": Setting((int,), 1_000_000, "uniform: upper bound; lognormal: clip",
                             high=1 << 30, why="1 GiB, held in memory"),
        "median_bytes": Setting((int,), 20_000, "lognormal: median file size", high=1 << 30,
                                why="1 GiB, held in memory"),
        "sigma": Setting((float,), 1.0, "lognormal: standard deviation of log(size)",
                         high=10, why="exp(10 sigma) already spans every size"),
        "seed": Setting((int,), 1, "seed of file sizes and contents"),
        "rtt_probes": Setting((int,), 20, "round-trip probes before each run; 0: none",
                              low=0, high=10_000),
    }

    def validate(self, params: Mapping[str, Any], grid: Mapping[str, Any]) -> list[str]:
        problems: list[str] = []
        variants = [dict(params)] + [{**params, k: v} for k, vs in grid.items()
                                     if k in self.params for v in vs]
        for p in variants:
            if not isinstance(p.get("size_dist"), str) or not all(
                    isinstance(p.get(k), int | float) for k in SIZE_PARAMS):
                continue  # a type problem, reported by the spec checker already
            problems += check_params(p["size_dist"], **{k: p[k] for k in SIZE_PARAMS})
        return sorted(set(problems))

    async def baseline(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        n = params["rtt_probes"]
        if n < 1:
            return None
        endpoint = endpoints["filestore"]
        url = app_url(endpoint)
        connects = []
        for _ in range(n):
            # Blocking on purpose: nothing else runs here, and no event loop in the way.
            t0 = time.perf_counter_ns()
            sock = socket.create_connection((url.host, url.port), timeout=10)
            connects.append(time.perf_counter_ns() - t0)
            sock.close()
        noops = []
        conn = await http.connect(url.host, url.port, tls=tls_of(endpoint, url))
        try:
            await conn.request("GET", url.base_path + "health")  # not timed: first use
            for _ in range(n):
                if conn.closed:
                    conn = await http.connect(url.host, url.port,
                                              tls=tls_of(endpoint, url))
                t0 = time.perf_counter_ns()
                await conn.request("GET", url.base_path + "health")
                noops.append(time.perf_counter_ns() - t0)
        finally:
            conn.close()
        return {"tcp_connect_ms": summarize_ms(connects), "http_noop_ms": summarize_ms(noops),
                "target": url.netloc, "noop": f"GET {url.base_path}health",
                "measured_from": socket.gethostname()}

    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> WorkloadClient:
        return _Client(endpoints["filestore"], params, client_id)


class _Conn:
    """A kept-alive connection that reopens itself when the server closed it (idle
    timeout, `Connection: close`); that op then includes a connect, as it would for any
    client."""

    __slots__ = ("http", "tls", "url")

    def __init__(self, url: http.URL, conn: http.HTTPConnection,
                 tls: TLSConfig | None = None) -> None:
        self.url, self.http, self.tls = url, conn, tls

    async def request(self, method: str, target: str, body: bytes | memoryview = b"",
                      headers: Mapping[str, str] | None = None) -> http.Response:
        if self.http.closed:
            self.http = await http.connect(self.url.host, self.url.port, tls=self.tls)
        return await self.http.request(method, target, body, headers)


class _Client(WorkloadClient):
    def __init__(self, endpoint: Endpoint, params: Mapping[str, Any], client_id: int) -> None:
        self.url = app_url(endpoint)
        self.tls = tls_of(endpoint, self.url)
        self.op = OPS.index(params["op"])
        specs = file_specs(params["files"], params["size_dist"], params["seed"],
                           prefix=f"c{client_id}-", **{k: params[k] for k in SIZE_PARAMS})
        self.sizes = [s.size_bytes for s in specs]
        self.contents = FileContents(specs, params["seed"] + client_id)
        self.targets = [f"{self.url.base_path}files/{quote(s.name, safe='')}" for s in specs]
        self.headers = {"X-Memcache": "on" if params["memcache"] else "off"}
        self.prepared = False

    async def connect(self) -> _Conn:
        conn = _Conn(self.url, await http.connect(self.url.host, self.url.port,
                                                  tls=self.tls), self.tls)
        if not self.prepared:
            await self._prepare(conn)
            self.prepared = True
        return conn

    async def close(self, conn: _Conn) -> None:
        conn.http.close()

    async def _prepare(self, conn: _Conn) -> None:
        for i, target in enumerate(self.targets):
            if self.op == INSERT:
                # memcache on: the delete clears a cached copy too, whatever this run's mode
                r = await conn.request("DELETE", target, headers={"X-Memcache": "on"})
                expected: tuple[int, ...] = (204, 404)
            else:
                r = await conn.request("PUT", target, self.contents.content(i), self.headers)
                expected = (201, 204)
            if r.status not in expected:
                raise WorkloadError(f"prepare: {target} answered {r.status} {r.reason}: "
                                    f"{r.body[:200]!r}")

    def next_op(self, seq: int) -> int:
        return self.op

    async def execute(self, conn: _Conn, op: int, seq: int) -> tuple[int, int]:
        i = seq % len(self.targets)
        size = self.sizes[i]
        if op == INSERT:
            r = await conn.request("PUT", self.targets[i], self.contents.content(i),
                                   self.headers)
            if r.status in (201, 204):
                return OK, size
        elif op == FIND:
            r = await conn.request("GET", self.targets[i], headers=self.headers)
            if r.status == 200:
                if len(r.body) != size:
                    raise WorkloadError(f"GET {self.targets[i]}: {len(r.body)} bytes, "
                                        f"expected {size}")
                return OK, size
            if r.status == 404:
                return MISS, 0
        else:
            r = await conn.request("DELETE", self.targets[i], headers=self.headers)
            if r.status == 204:
                return OK, size
            if r.status == 404:
                return MISS, 0
        raise WorkloadError(f"{OPS[op]} {self.targets[i]} answered {r.status} {r.reason}")
