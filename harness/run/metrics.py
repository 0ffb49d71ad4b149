"""The live /metrics endpoint of `harness run --metrics ADDR:PORT` (or a spec's `export:
{prometheus: ADDR:PORT}`): Prometheus text exposition, through `prometheus_client`, for as
long as the grid runs.

What it serves is what the client processes already send the control machine once a
second (`harness.loadgen.live` intervals, fetched by `harness.run.livestatus`): per
configuration, op and client host, ops by status and their payload bytes as counters, and
a latency histogram in ONE fixed layout, `BUCKETS_PER_OCTAVE` log-spaced buckets per
doubling from `LOW_NS` to `HIGH_NS` (each at most 9.1 % wide): every second bucket of the
processes' own histograms, so processes and hosts merge by adding buckets, here and in
PromQL (`sum by (le)`). Nothing is an average of percentiles. The servers' counters that
the kit reads at each run's edges are gauges; so are the offered and achieved rates and
the repetition in progress.

The endpoint stays up after the grid until one scrape that began after the last values
were in has been served (or `linger_s` passed; at once if nothing ever scraped it), so
that the final counts reach the scraper.
"""

from __future__ import annotations

import math
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

from harness.loadgen import live
from harness.loadgen.live import Interval
from harness.results import STATUSES
from harness.spec import RunPlan

#: The exported layout: buckets per doubling, and the first and last finite bounds.
BUCKETS_PER_OCTAVE = 8
LOW_NS, HIGH_NS = 2.0 ** 10, 2.0 ** 36  # ~1 us .. ~69 s
_J0 = int(math.log2(LOW_NS)) * BUCKETS_PER_OCTAVE
#: Finite bounds; one more bucket holds the rest (+Inf).
_NB = int(math.log2(HIGH_NS / LOW_NS)) * BUCKETS_PER_OCTAVE + 1
_FOLD = live.BUCKETS_PER_OCTAVE // BUCKETS_PER_OCTAVE
#: The finite upper bounds, in seconds, as the `le` label shows them.
BOUNDS_S: tuple[float, ...] = tuple(2.0 ** ((_J0 + i) / BUCKETS_PER_OCTAVE) / 1e9
                                    for i in range(_NB))
#: How long the endpoint waits after the grid for a scrape of the final values.
LINGER_S = 30.0

_RUN = ["experiment", "configuration", "config_id"]
_OP = [*_RUN, "op", "host"]


def bucket_of(live_bucket: int) -> int:
    """The exported bucket (index into `BOUNDS_S`, or `len(BOUNDS_S)` for +Inf) holding a
    `harness.loadgen.live` bucket: it covers [2^(b/16), 2^((b+1)/16)) ns, wholly inside
    one exported bucket (2^((j-1)/8), 2^(j/8)]."""
    j = live_bucket // _FOLD + 1
    return min(max(j - _J0, 0), _NB)


def grid_point_text(plan: RunPlan) -> str:
    return " ".join(f"{k}={v}" for k, v in plan.grid_point.items()) or "default"


@dataclass
class _Series:
    """One configuration x op x client host."""

    ops: dict[str, int] = field(default_factory=dict)  # status -> records
    nbytes: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (_NB + 1))
    sum_ns: int = 0


@dataclass
class _Config:
    plan: RunPlan
    series: dict[tuple[str, str], _Series] = field(default_factory=dict)  # (op, host)
    target_ops_s: float | None = None
    #: live file -> (host, ops/s of its last interval); 0 once the run ended.
    rates: dict[str, tuple[str, float]] = field(default_factory=dict)
    run_id: str = ""
    servers: dict[tuple[str, str], float] = field(default_factory=dict)


class LiveMetrics:
    """The grid's live figures, fed by the runner and `LiveStatus`, read by scrapes."""

    def __init__(self, experiment: str, op_names: Sequence[str]) -> None:
        self.experiment = experiment
        self.op_names = tuple(op_names)
        self.configs: dict[str, _Config] = {}
        self.current: str | None = None
        self.finished = False
        self._lock = threading.Lock()

    # -- fed by the runner ------------------------------------------------------------
    def plan_grid(self, plans: Iterable[RunPlan], hosts: Sequence[str]) -> None:
        """Every configuration's series at zero before any op: `increase()` over a run
        then counts its first second too."""
        with self._lock:
            for plan in plans:
                cfg = self.configs.setdefault(plan.config_id, _Config(plan))
                for op in self.op_names:
                    for host in hosts:
                        cfg.series.setdefault((op, host), _Series())

    def run_started(self, plan: RunPlan, run_id: str) -> None:
        with self._lock:
            cfg = self.configs.setdefault(plan.config_id, _Config(plan))
            cfg.plan, cfg.run_id = plan, run_id
            cfg.target_ops_s = plan.size.rate_ops_s
            self.current = plan.config_id

    def run_ended(self, plan: RunPlan) -> None:
        with self._lock:
            cfg = self.configs.get(plan.config_id)
            if cfg is not None:  # between runs: 0 ops/s, not no series
                cfg.rates = {path: (host, 0.0) for path, (host, _) in cfg.rates.items()}
            self.current = None

    def server_counters(self, plan: RunPlan, counters: Mapping[str, Mapping[str, float]]
                        ) -> None:
        """The servers' counters as read at a run's edge (`RunTelemetry`)."""
        with self._lock:
            cfg = self.configs.setdefault(plan.config_id, _Config(plan))
            for service, values in counters.items():
                for name, value in values.items():
                    if isinstance(value, (int, float)) and math.isfinite(value):
                        cfg.servers[(service, str(name))] = float(value)

    def finish(self) -> None:
        with self._lock:
            self.finished = True
            self.current = None

    # -- fed by `LiveStatus`, once per interval of each client process -----------------
    def take(self, plan: RunPlan, path: str, host: str, iv: Interval) -> None:
        with self._lock:
            cfg = self.configs.setdefault(plan.config_id, _Config(plan))
            for op, status, n, nbytes in iv.counts:
                s = cfg.series.setdefault((self._op(op), host), _Series())
                name = STATUSES[status] if 0 <= status < len(STATUSES) else str(status)
                s.ops[name] = s.ops.get(name, 0) + n
                s.nbytes += nbytes
            for op, b, c in iv.op_hist:
                cfg.series.setdefault((self._op(op), host), _Series()).buckets[
                    bucket_of(b)] += c
            for op, total in iv.op_sum_ns:
                cfg.series.setdefault((self._op(op), host), _Series()).sum_ns += total
            if iv.dt_ns > 0:
                cfg.rates[path] = (host, 0.0 if iv.final else iv.ops * 1e9 / iv.dt_ns)

    def _op(self, code: int) -> str:
        return self.op_names[code] if 0 <= code < len(self.op_names) else f"op{code}"

    # -- read by scrapes ---------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        ops = CounterMetricFamily("kvbench_ops", "Ops completed, by status", labels=[
            *_OP, "status"])
        nbytes = CounterMetricFamily("kvbench_payload_bytes", "Payload bytes of the ops",
                                     labels=_OP)
        lat = HistogramMetricFamily("kvbench_latency_seconds", "Op latency (open loop: "
                                    "from the intended start)", labels=_OP)
        target = GaugeMetricFamily("kvbench_target_ops_per_second", "Offered rate of the "
                                   "configuration (open loop only)", labels=_RUN)
        achieved = GaugeMetricFamily("kvbench_achieved_ops_per_second", "Ops/s of the "
                                     "last second, per client host; 0 between runs",
                                     labels=[*_RUN, "host"])
        info = InfoMetricFamily("kvbench_run", "The run in progress (none between runs)",
                                labels=[*_RUN, "run_id", "repetition"])
        rep = GaugeMetricFamily("kvbench_repetition", "Repetition of the configuration "
                                "last started", labels=_RUN)
        server = GaugeMetricFamily("kvbench_server_counter", "A server counter as read at "
                                   "the last run edge", labels=[*_RUN, "service", "counter"])
        done = GaugeMetricFamily("kvbench_grid_finished", "1 once every run of the grid "
                                 "ended: the values are final", labels=["experiment"])
        with self._lock:
            for cid, cfg in self.configs.items():
                run = [self.experiment, grid_point_text(cfg.plan), cid]
                for (op, host), s in cfg.series.items():
                    for status in (*STATUSES, *sorted(set(s.ops) - set(STATUSES))):
                        ops.add_metric([*run, op, host, status], s.ops.get(status, 0))
                    nbytes.add_metric([*run, op, host], s.nbytes)
                    cum, pairs = 0, []
                    for bound, c in zip(BOUNDS_S, s.buckets, strict=False):
                        cum += c
                        pairs.append((repr(bound), cum))
                    pairs.append(("+Inf", cum + s.buckets[-1]))
                    lat.add_metric([*run, op, host], pairs, s.sum_ns / 1e9)
                if cfg.target_ops_s is not None:
                    target.add_metric(run, cfg.target_ops_s)
                by_host: dict[str, float] = {}
                for host, rate in cfg.rates.values():
                    by_host[host] = by_host.get(host, 0.0) + rate
                for host, rate in sorted(by_host.items()):
                    achieved.add_metric([*run, host], rate)
                if cfg.run_id:
                    rep.add_metric(run, cfg.plan.repetition)
                if cid == self.current:
                    info.add_metric([*run, cfg.run_id, str(cfg.plan.repetition)], {})
                for (service, name), value in sorted(cfg.servers.items()):
                    server.add_metric([*run, service, name], value)
            done.add_metric([self.experiment], 1.0 if self.finished else 0.0)
        yield from (ops, nbytes, lat, target, achieved, info, rep, server, done)

    def describe(self) -> list[Metric]:
        return []  # collected at scrape time only: registering reads nothing


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape a second is no news for the terminal


class _Served:
    """A response body whose `close` (the WSGI server's, once it is sent) is noted."""

    def __init__(self, body: Iterable[bytes], sent: Any) -> None:
        self.body, self.sent = body, sent

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        self.sent()


class MetricsEndpoint:
    """`LiveMetrics` served over HTTP at `host`:`port` from a thread; a context manager
    whose exit waits for the final scrape (see the module)."""

    def __init__(self, metrics: LiveMetrics, host: str, port: int,
                 linger_s: float = LINGER_S) -> None:
        self.metrics = metrics
        self.host, self.port = host, port
        self.linger_s = linger_s
        self.scrapes = 0
        self.final_served = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> MetricsEndpoint:
        """Binds (OSError if the port is taken) and serves from a daemon thread."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.metrics)  # type: ignore[arg-type]
        inner = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: Any) -> _Served:
            final = self.metrics.finished  # read before the values are collected
            body = inner(environ, start_response)
            return _Served(body, lambda: self._sent(final))

        family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]
        server_class = type("_Bound", (_Server,), {"address_family": family})
        self._server = make_server(self.host, self.port, app, server_class=server_class,
                                   handler_class=_Quiet)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="metrics-endpoint", daemon=True)
        self._thread.start()
        return self

    def _sent(self, final: bool) -> None:
        self.scrapes += 1
        if final:
            self.final_served.set()

    def close(self) -> bool:
        """The grid ended: values final, wait for a scrape of them (if anything scrapes),
        then stop serving. True if the final values were scraped."""
        self.metrics.finish()
        if self.scrapes:
            self.final_served.wait(self.linger_s)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        return self.final_served.is_set()

    def __enter__(self) -> MetricsEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
