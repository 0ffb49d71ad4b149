"""The contract every workload fulfils.

A workload names its parameters, its ops and the service kinds it needs. The harness
calls `prepare` once before each run (in the harness process), then each client process
builds a `WorkloadClient` and the load generator times `execute` calls on it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.services.base import Endpoint
from harness.settings import Setting

#: The fast path's send function: (connection, seq) -> the op's code.
Issue = Callable[[Any, int], int]


class WorkloadClient(abc.ABC):
    """Per-process client side of a workload. `execute` must not record timings itself,
    except attempts that did not serve an op (a redirected request, retried within the
    same `execute`): a client that sets `records_attempts` gets `record_attempt(op, seq,
    start_ns, end_ns, status)` from the load generator (clock: time.perf_counter_ns), and
    each call becomes one more record. The op's own record still spans the whole op."""

    records_attempts: bool = False
    record_attempt: Callable[[int, int, int, int, int], None] | None = None

    @abc.abstractmethod
    async def connect(self) -> Any:
        """Open one connection (state handed back to `execute` and `close`)."""

    @abc.abstractmethod
    def next_op(self, seq: int) -> int:
        """Op code (index into Workload.ops) of this process's `seq`-th op."""

    @abc.abstractmethod
    async def execute(self, conn: Any, op: int, seq: int) -> tuple[int, int]:
        """Perform one op; return (status code from harness.results, payload bytes)."""

    async def close(self, conn: Any) -> None:  # noqa: B027 - optional hook
        """Close one connection."""

    def issuer(self, done: Callable[[int], None],
               fail: Callable[[BaseException], None]) -> Issue | None:
        """Optional fast path: a function `issue(conn, seq)` that sends op `seq` (the op
        `next_op(seq)` names) and returns that op's code at once, arranging for its reply
        to call `done(results.outcome(status, nbytes))`, or `fail(exc)` if the op failed
        (an exception raised by `issue` itself counts as failed). The load generator asks once per
        in-flight slot (so the reply handlers are made once, not per op) and then runs
        the slot from the driver's reply callbacks, with no task switch per op. None (the
        default): every op awaits `execute`. A client offering both must make them
        behave alike."""
        return None

    def pipeline(self) -> Pipeline | None:
        """Optional batched fast path for pipelined closed-loop runs (see `Pipeline`);
        it must behave like `issuer` and `execute`."""
        return None

    def log_keys(self) -> None:  # noqa: B027 - optional hook
        """`run.record_keys` is on: a client whose keys are not a function of the seq
        alone starts noting them here, before the first op."""

    def keynums(self, seqs: np.ndarray) -> np.ndarray | None:
        """The key number (int64) each op `seqs[i]` touched, for `run.record_keys`; None:
        this client cannot say (its workload has `records_keys` False)."""
        return None

    def native_ops(self) -> NativeOps | None:
        """Optional: the ops as tables for the native core, whose connections are the
        ones `connect` returns (asyncio transports; the core reads and writes their
        sockets). It must behave like `execute`. None: the Python paths run."""
        return None


@dataclass(frozen=True)
class NativeOps:
    """A client's ops as tables for the native core (`harness.loadgen.native`): op `seq`
    is `pattern[seq % len(pattern)]`; its request is entry `seq % keys` of `gets` (the
    op `get_op`, whose reply is a value or a miss) or of `sets` followed by `set_tail`
    (every other op, whose reply must be the protocol's stored/OK). Entry k of a table
    is `table[offsets[k]:offsets[k + 1]]` (offsets: native-endian uint32)."""

    protocol: str  # "memcache" | "resp" | "resp_hash" (gets are HGETALLs) | "kvtext"
    pattern: bytes
    get_op: int
    gets: bytes
    get_offsets: bytes
    sets: bytes
    set_offsets: bytes
    set_tail: bytes
    #: The outcome of a successful set (`results.outcome(OK, size)`), without the op.
    set_ok_outcome: int
    #: Sets of different sizes: a native-endian uint32 value size per entry of `sets`,
    #: added to `set_ok_outcome` (then `outcome(OK, 0)`); b"": every set is that.
    set_sizes: bytes = b""
    #: With `set_sizes`, values of several sizes: -1 sends the whole `set_tail` after
    #: every set; n >= 0 sends its last (entry's size + n) bytes, so `set_tail` is the
    #: largest value followed by n bytes of framing (b"\r\n": 2).
    set_tail_framing_bytes: int = -1
    #: A protocol spread over several servers: where each key's requests go, and the
    #: slow path for what the core hands back (refusals, lost servers). None: one server.
    router: NativeRouter | None = None
    #: With a router: the server (its index in `router.servers`) every set goes to, the
    #: gets going where `routes` says (a primary and its replicas); -1: sets by routes.
    writes_to: int = -1


def request_table(requests: list[bytes]) -> tuple[bytes, bytes]:
    """Requests as a `NativeOps` table: their bytes joined, and the uint32 offsets of
    each entry (entry k is `table[offsets[k]:offsets[k + 1]]`)."""
    offsets = np.zeros(len(requests) + 1, np.uint32)
    offsets[1:] = np.cumsum(np.fromiter(map(len, requests), np.int64, len(requests)))
    return b"".join(requests), offsets.tobytes()


class NativeRouter(abc.ABC):
    """For the native core, a client whose keys live on several servers (the course
    protocol's ring): the core keeps one socket per server in each connection and sends
    an op to its key's server; what it cannot settle (a refusal, a lost server, a server
    it has no socket for) comes back here, is done the awaited way on the router's own
    connections, and is recorded as the Python path records it."""

    #: The servers the core has sockets for, in socket order (at most 255).
    servers: list[Any]

    @abc.abstractmethod
    def adopt(self, conn: Any) -> None:
        """Learn what a freshly connected `conn` knows (the ring), if nothing newer."""

    @abc.abstractmethod
    def routes(self) -> bytes:
        """Per entry of the request tables, the index of its server in `servers`; 255:
        a server the core has no socket for (its ops take the slow path)."""

    @abc.abstractmethod
    async def sockets(self, conn: Any) -> list[Any | None]:
        """The driver connections of `conn` (from `connect`), one per server of
        `servers` (None: not connected), ready for the core to read."""

    @abc.abstractmethod
    async def learn(self, refusal: bytes | None) -> None:
        """A server refused an op (its reply line) or was lost (None): update the
        ring, or back off, as the client does before its retry."""

    @abc.abstractmethod
    async def execute(self, op: int, seq: int) -> tuple[int, int]:
        """Op `seq`, the awaited way (`WorkloadClient.execute`) on the router's own
        connections, its redirected attempts recorded by `record_attempt`."""

    def close(self) -> None:  # noqa: B027 - nothing to close unless connected
        """Close the router's own connections."""


class Pipeline(abc.ABC):
    """A client's batched fast path for pipelined closed-loop runs (`inflight` > 1): the
    load generator sends ops in batches on a connection in the driver's batch mode
    (`consume` / `send_batch`, see `harness.drivers.pipelined`) and hands back each
    batch of replies, so there is no call per op on either side."""

    @abc.abstractmethod
    def send(self, conn: Any, seqs: range) -> None:
        """Send ops `seqs` in one `conn.send_batch`."""

    @abc.abstractmethod
    def outcomes(self, replies: list[Any], seqs: list[int]) -> list[int | BaseException]:
        """Per reply (in order, to ops `seqs`): `results.outcome(status, nbytes) | op`,
        or the exception that failed that op."""


class Workload(abc.ABC):
    name: str
    description: str
    #: Parameters a spec may set under `params` or vary in `grid`.
    params: Mapping[str, Setting]
    #: Op names; records store the index.
    ops: tuple[str, ...]
    #: Service kinds this workload needs, exactly one each.
    requires: tuple[str, ...]
    #: Service kinds it can work against, whichever the spec has: exactly one service of
    #: any of these kinds in all (a workload with a data model per server kind).
    requires_one_of: tuple[str, ...] = ()
    #: Its clients name each op's key number (`WorkloadClient.keynums`), so a spec may
    #: set `run.record_keys`.
    records_keys: bool = False
    #: Service kinds whose whole data (or a table of a fixed name) its `prepare` wipes,
    #: each with what it does: never run against a server the kit did not start.
    clears: Mapping[str, str] = {}
    #: Its clients are plain data until they connect (requests encoded, picks drawn,
    #: nothing opened), so one built before a fork serves every run of the same
    #: configuration (`harness.run.worker.prebuild`).
    reusable_client: bool = False

    def validate(self, params: Mapping[str, Any], grid: Mapping[str, Any]) -> list[str]:
        """Cross-field problems beyond per-setting types (messages without a prefix)."""
        return []

    def check_plan(self, plan: Any) -> list[str]:
        """Problems of one planned run (`harness.spec.RunPlan`: params with its size and
        clients), checked for every run before anything starts."""
        return []

    async def prepare(self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]) -> None:  # noqa: B027
        """Bring servers into the state a run needs (tables, keys). Runs before each run."""

    def kept_data(self, params: Mapping[str, Any]) -> str | None:
        """What `prepare` leaves that this workload's runs keep as they found it (a text
        naming it), so servers holding it need no second prepare before the next run;
        None (the default): every run prepares (its runs change the data, such as YCSB's
        inserts or the file store's removes, or it cannot tell)."""
        return None

    async def data_intact(self, endpoints: Mapping[str, Endpoint],
                          params: Mapping[str, Any]) -> bool:
        """Whether the servers still hold what `kept_data` names (one cheap request:
        evictions or a flush since make it False, and the prepare runs)."""
        return False

    async def baseline(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """Optional measurement taken before each run (e.g. network round trip to the
        target); stored in the manifest under `extra.baseline`."""
        return None

    @abc.abstractmethod
    def client(
        self, endpoints: Mapping[str, Endpoint], params: Mapping[str, Any], client_id: int
    ) -> WorkloadClient:
        """The client for one process; `endpoints` is keyed by service kind."""
