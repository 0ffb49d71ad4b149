"""The binding of the native core (`_native.c`): which engine measures, and the run.

`ENGINE` is "native" when the extension is built and the environment does not ask for
the Python paths (`KVBENCH_ENGINE=python`); the manifest records it (`loadgen.engine`).
A workload takes the native path when its client offers `native_ops` (the get/set
mixes, the kvstore study's course protocol); any other runs on the Python paths.

The core runs one process's connections in a thread without the GIL (`Engine.run`) and
writes every record straight into the Recorder's columns; it comes back here only for
the slow path, handled as `ClientRun` does for the Python paths: a failed connection
(back off, drop it, reconnect; a failed reconnect is an error record of the next op),
full columns (grow them, or seal them as a chunk to spill), the open-loop schedule's
next chunk, the end; and, for a protocol spread over servers (`NativeOps.router`), the
ops it hands back (a refusal, a lost server), which are done the awaited way and
recorded through the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.errors import HarnessError, WorkloadError
from harness.loadgen.shared import NEVER
from harness.results import ERROR, OUTCOME_BYTES_SHIFT, OUTCOME_WARMUP, REDIRECT, TIMEOUT, outcome
from harness.results import MISS as _MISS
from harness.results import OK as _OK
from harness.workloads.base import NativeOps

if TYPE_CHECKING:
    from harness.loadgen.shared import LoopRun

try:
    from harness.loadgen import _native
except ImportError:  # not built (no compiler at install time): the Python paths measure
    _native = None  # type: ignore[assignment]

#: Environment variable that forces an engine: "python" (or "native", which then must
#: be built).
ENV = "KVBENCH_ENGINE"
ENGINES = ("native", "python")
PROTOCOLS = {"memcache": 0, "resp": 1, "kvtext": 2, "resp_hash": 3}
#: Ops per open-loop schedule chunk handed to the core (~8 MB of intended starts).
TICKET_CHUNK = 1 << 20


class EngineError(HarnessError):
    """KVBENCH_ENGINE names an engine that is unknown or not built."""


def engine() -> str:
    """The engine this process measures with: "native" or "python"."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted and wanted not in ENGINES:
        raise EngineError(f"{ENV}={wanted!r}: expected one of {', '.join(ENGINES)}")
    if wanted == "python":
        return "python"
    if _native is None:
        if wanted == "native":
            raise EngineError(f"{ENV}=native but the native core is not built; reinstall "
                              "with a C compiler (pip install -e .) or unset it")
        return "python"
    return "native"


def engine_of_workers(workers: list[dict[str, Any]]) -> str | None:
    """The manifest's `loadgen.engine`: what measured a run's client processes
    ("native", "python", "mixed"), from their status files; None if none says."""
    seen = {w["engine"] for w in workers if w.get("engine")}
    if not seen:
        return None
    return seen.pop() if len(seen) == 1 else "mixed"


def built() -> bool:
    """Was the native core compiled at install time?"""
    return _native is not None


def describe() -> str:
    """One line for `make setup`: which path will measure."""
    if _native is None:
        return ("load generator: native core not built (no C compiler?); "
                "the pure-Python path is used")
    return f"load generator: native core built ({engine()} path in use; {ENV}=python forces Python)"


_UNSET = object()  # not yet made (None: no native ops)


def _ops_of(client: Any) -> NativeOps | None:
    """`client.native_ops()`, made once per client (`prebuild_native`: in the agent)."""
    cached = getattr(client, "_native_ops_made", _UNSET)
    if cached is _UNSET:
        cached = client.native_ops()
        with contextlib.suppress(AttributeError):  # (__slots__: not cached)
            client._native_ops_made = cached
    return cached


def prebuild_native(client: Any) -> None:
    """The client's native tables, made now (in the agent, before it forks a worker)."""
    if engine() == "native":
        _ops_of(client)


def _native_or_why(client: Any) -> tuple[NativeOps | None, str]:
    """The client's native ops if its run goes through the core, else None and why."""
    if engine() != "native":
        return None, (f"{ENV}=python" if os.environ.get(ENV, "").strip().lower() == "python"
                      else "the native core is not built")
    endpoint = getattr(client, "endpoint", None)
    if getattr(endpoint, "tls", None) is not None and not _native.TLS:
        return None, "TLS, and the native core was built without OpenSSL (libssl-dev)"
    ops = _ops_of(client)
    if ops is None:
        return None, "its workload, with these settings, has no native ops"
    if ops.protocol not in PROTOCOLS:
        return None, f"the core does not speak {ops.protocol!r}"
    if getattr(endpoint, "tls", None) is not None and ops.router is not None:
        return None, "TLS to servers the core routes between (it makes one session a socket)"
    return ops, ""


def uses_native(run: LoopRun) -> NativeOps | None:
    """The client's native ops if this run goes through the core, else None."""
    return _native_or_why(run.client)[0]


def why_python(client: Any) -> str:
    """Why a run goes through the Python engine (`uses_native` said no), for a message."""
    return _native_or_why(client)[1]


def _socket_fd(conn: Any) -> int:
    """The socket of a driver connection, its asyncio reading paused: the core reads it;
    -1 for None (no connection to that server)."""
    if conn is None:
        return -1
    transport = conn.transport
    transport.pause_reading()
    return transport.get_extra_info("socket").fileno()


def _failure(kind: int, message: str) -> BaseException:
    """The exception the Python paths would have for this failure (for `last_error`)."""
    if kind == _native.F_TIMEOUT:
        return TimeoutError(message)
    if kind == _native.F_LOST:
        return ConnectionResetError(message)
    return WorkloadError(message)


def _backoff_s(consecutive: int) -> float:
    """`ClientRun._on_error`'s back-off, so a dead server is not a busy loop of errors."""
    return min(0.001 * 2 ** min(consecutive, 10), 0.5)


class _RawConn:
    """A plain TCP connection whose TLS the core makes itself (tls.c): Python never
    reads it; it only closes it."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport

    @property
    def closed(self) -> bool:
        return self.transport.is_closing()

    def close(self) -> None:
        self.transport.close()


def _greeting(endpoint: Any, protocol: str) -> bytes:
    """What each connection sends before its first op, over TLS in the core: Redis's
    AUTH where the endpoint has credentials."""
    if endpoint.auth is None or not protocol.startswith("resp"):
        return b""
    from harness.drivers.redis import encode

    auth = endpoint.auth
    return encode(["AUTH", *([auth.user] if auth.user else []), auth.password])


class NativeRun:
    """One `ClientRun` on the native core."""

    def __init__(self, run: LoopRun, ops: NativeOps) -> None:
        """The costly preparation (the tables, the first open-loop chunk) happens here,
        before the run's clock starts; `go` starts the core."""
        self.run = run
        self.ops = ops
        self.open_loop = run.schedule is not None
        self.next_ticket = 0
        self.offsets = self._chunk() if self.open_loop else None
        self.tasks: set[asyncio.Task] = set()
        self.finished = False
        self.engine: Any = None
        self.router = ops.router
        self._routes = b""
        #: Open loop: seqs the core took (sent, or dropped at the warm-up's end) and the
        #: warm-up ops it dropped (`ClientRun.unsent_counts`).
        self.taken = 0
        self.dropped = 0

    def _start_engine(self) -> None:
        run, cfg, ops = self.run, self.run.cfg, self.ops
        self.engine = _native.Engine(
            PROTOCOLS[ops.protocol], cfg.connections, cfg.inflight, ops.pattern, ops.get_op,
            ops.gets, ops.get_offsets, ops.sets, ops.set_offsets, ops.set_tail,
            (outcome(_OK, 0), outcome(_MISS, 0), ops.set_ok_outcome, outcome(ERROR, 0),
             outcome(TIMEOUT, 0), OUTCOME_WARMUP, OUTCOME_BYTES_SHIFT),
            (run.seq, run.total if run.total is not None else NEVER,
             run.send_until_ns if run.send_until_ns is not None else NEVER,
             cfg.warmup_ops,
             int(cfg.timeout_s * 1e9) if cfg.timeout_s is not None else 0,
             cfg.max_consecutive_errors, *self._warmup_end()),
            (run.failures, run._served_at_failure, run.consecutive_errors),
            self.open_loop, (len(self.router.servers), self._current_routes(), ops.set_sizes,
                             ops.set_tail_framing_bytes)
            if self.router is not None else (1, b"", ops.set_sizes, ops.set_tail_framing_bytes),
            ops.writes_to)
        if cfg.pause_us:
            self.engine.set_pause(round(cfg.pause_us * 1000))
        tls = self.tls
        if tls is not None:
            self.engine.set_tls(tls.ca_pem, tls.cert_pem, tls.key_pem,
                                tls.server_name or self.endpoint.host, tls.verify,
                                _greeting(self.endpoint, ops.protocol))

    @property
    def endpoint(self) -> Any:
        return getattr(self.run.client, "endpoint", None)

    @property
    def tls(self) -> Any:
        return getattr(self.endpoint, "tls", None)

    async def connect(self) -> Any:
        """A connection for the core: the client's own, or over TLS a plain TCP one on
        which the core makes the handshake and sends the greeting."""
        if self.tls is None:
            return await self.run.client.connect()
        ep = self.endpoint
        loop = asyncio.get_running_loop()
        transport, _ = await asyncio.wait_for(
            loop.create_connection(asyncio.Protocol, ep.host, ep.port), 10)
        return _RawConn(transport)

    def _warmup_end(self) -> tuple[int, int]:
        """Open loop: the first measured seq and when it is due (absolute): the core drops
        the warm-up ops still waiting then, as `pacing.pace` does; (0, never) else."""
        run = self.run
        first = run.first_measured
        if run.schedule is None or not first:
            return 0, NEVER
        return first, run.base_ns + run.schedule.at(first)

    async def _fds(self, conn: Any) -> list[int]:
        """The sockets of one connection of the run, in the core's order."""
        if self.router is None:
            return [_socket_fd(conn)]
        return [_socket_fd(c) for c in await self.router.sockets(conn)]

    def _current_routes(self) -> bytes:
        self._routes = self.router.routes()
        return self._routes

    # -- the open-loop schedule --------------------------------------------------------

    def _chunk(self) -> np.ndarray:
        """The next chunk of intended starts, ns from the run's start."""
        run = self.run
        assert run.schedule is not None
        first = self.next_ticket
        count = TICKET_CHUNK if run.total is None else min(TICKET_CHUNK, run.total - first)
        return run.schedule.offsets(first, count)

    def _feed(self) -> None:
        """Hand the core the next chunk of intended starts (absolute, perf_counter_ns)."""
        run = self.run
        offsets, self.offsets = (self.offsets if self.offsets is not None
                                 else self._chunk()), None
        first, count = self.next_ticket, len(offsets)
        intended = offsets + run.base_ns
        last = run.total is not None and first + count >= run.total
        if run.end_ns is not None:
            cut = int(np.searchsorted(intended, run.end_ns))
            if cut < count:
                intended, last = intended[:cut], True
        self.next_ticket = first + len(intended)
        self.engine.feed(np.ascontiguousarray(intended), first, last)

    # -- failures ----------------------------------------------------------------------

    def _sync(self) -> None:
        """Copy the core's counters to the run (the Python paths' bookkeeping)."""
        run, st = self.run, self.engine.state()
        run.rec.n = st["n"]
        run.failures, run._served_at_failure = st["failures"], st["served_at"]
        run.consecutive_errors = st["consec"]
        if not self.open_loop:
            run.seq = st["seq"]
        else:
            self.taken, self.dropped = st["seq"], st["dropped"]
        if st["aborted"]:
            run.aborted = run.stopping = True
            run.stopped_ns = run.stopped_ns or time.perf_counter_ns()

    async def _replace(self, i: int, exc: BaseException) -> None:
        """Connection `i` failed: back off, drop it, reconnect (each failed reconnect is
        an error record), and give the new one to the core."""
        run = self.run
        holder = run.conns[i]
        run.note_error(f"{type(exc).__name__}: {exc}")
        clock = time.perf_counter_ns
        while not self.finished and not run.stopping:
            await asyncio.sleep(_backoff_s(self.engine.state()["consec"]))
            await run._drop(holder, holder.generation)
            if self.finished or run.stopping:
                return
            t0 = clock()
            try:
                conn = await self.connect()
            except Exception as err:  # noqa: BLE001 - recorded as the next op's failure
                self.engine.connect_failed(i, t0, clock())
                run.note_error(f"{type(err).__name__}: {err}")
                continue
            holder.conn = conn
            self.engine.attach(i, await self._fds(conn))
            return

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- the slow path of a routed protocol ----------------------------------------------

    def _attempt(self, op: int, seq: int, start_ns: int, end_ns: int, status: int) -> None:
        """`record_attempt` while the core runs: the record goes through the core, which
        owns the columns (`ClientRun.record_attempt` writes them from this thread)."""
        self.engine.record(0, seq, start_ns, end_ns, outcome(status, 0) | op, start_ns,
                           False, False)

    async def _slow(self, group: int, seq: int, t0: int, t1: int, intended: int, why: int,
                    line: bytes) -> None:
        """An op the core handed back: follow the refusal (or the lost server) as the
        client would, record that attempt, then do the op the awaited way; its record
        spans it all, from its first send, and frees its slot in `group`."""
        run, eng, router = self.run, self.engine, self.router
        assert router is not None
        clock = time.perf_counter_ns
        op = run.client.next_op(seq)
        failure = False
        try:
            if why != _native.WHY_NO_SOCKET:
                refused = why == _native.WHY_REFUSED
                await router.learn(line if refused else None)
                eng.record(group, seq, t0, clock(),
                           outcome(REDIRECT if refused else ERROR, 0) | op, t0, False, False)
            call = router.execute(op, seq)
            timeout = run.cfg.timeout_s
            status, nbytes = await (call if timeout is None else asyncio.wait_for(call, timeout))
        except Exception as exc:  # noqa: BLE001 - every failure is a record, as on the Python path
            status, nbytes, failure = (TIMEOUT if isinstance(exc, TimeoutError) else ERROR), 0, True
            run.note_error(f"{type(exc).__name__}: {exc}")
        eng.record(group, seq, t0, clock(), outcome(status, nbytes) | op, intended, True, failure)
        if self._routes != router.routes():
            eng.set_routes(self._current_routes())

    def stop(self) -> None:
        """`ClientRun.stop` (SIGTERM): tell the core, which has no GIL. Called, not
        polled for: a poll on this thread every few ms would preempt the core, which
        shares its CPU, and show up as send lag in open loop."""
        if self.engine is not None:
            self.engine.stop()

    # -- the run -----------------------------------------------------------------------

    async def go(self) -> None:
        run = self.run
        if self.router is not None:
            for holder in run.conns:
                if holder.conn is not None:
                    self.router.adopt(holder.conn)
        self._start_engine()
        eng = self.engine
        if self.router is not None and run.client.records_attempts:
            run.client.record_attempt = self._attempt
        loop = asyncio.get_running_loop()
        for i, holder in enumerate(run.conns):
            if holder.conn is not None:
                eng.attach(i, await self._fds(holder.conn))
            else:
                self._spawn(self._replace(i, ConnectionResetError(
                    run.last_error or "not connected")))
        if self.open_loop:
            self._feed()
        if run.stopping:  # stopped before the core started
            eng.stop()
        rec = run.rec
        running: asyncio.Future | None = None
        try:
            while True:
                running = loop.run_in_executor(
                    None, eng.run, rec.start, rec.end, rec.outcome, rec.intended,
                    rec.seq if rec.keep_seq else None, rec.n, rec.base)
                events = await asyncio.shield(running)
                self._sync()
                if events & _native.EV_SLOW:
                    for item in eng.take_slow():
                        self._spawn(self._slow(*item))
                if events & _native.EV_FAILED:
                    for i, kind, message in eng.take_failed():
                        self._spawn(self._replace(i, _failure(kind, message)))
                if events & _native.EV_FULL:
                    if rec.chunk_records and rec.n:
                        # Sealed and handed to the spill thread; the core goes on at
                        # once in other columns. (Empty columns too small for the ops
                        # in flight grow instead, and so do later chunks.)
                        rec.seal(rec.n)
                        eng.rewind()
                    else:
                        rec.grow()
                if events & _native.EV_TICKETS:
                    self._feed()
                if events & _native.EV_DONE:
                    return
        finally:
            self.finished = True
            eng.stop()
            if running is not None and not running.done():
                # Cancelled while the core runs: it still writes into the columns.
                await asyncio.wait([running])
                with contextlib.suppress(Exception):
                    running.result()
                self._sync()
            for task in list(self.tasks):
                task.cancel()
            for task in list(self.tasks):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self.router is not None:
                self.router.close()
