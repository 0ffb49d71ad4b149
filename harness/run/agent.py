"""Client-machine side of the control channel: ``python -m harness.agent``.

One agent runs per client machine for a whole `harness run`, over one SSH exec channel
(or pipes, locally), and does every step of every run there: write configs, start
worker processes, wait until they are ready, write their go files, wait for them to
exit, read their statuses and checksums, remove files. Over SSH each separate command
costs a round trip plus a shell and a Python start-up (~0.2 s); over the open channel a
step costs a line each way.

The agent imports the worker's modules once and starts each worker by fork() (in a
session of its own, so it survives the agent and can be stopped as a group): a worker
is ready in milliseconds instead of a fresh interpreter's ~0.5 s of imports.

Protocol: one JSON object per line. Requests ``{"id": N, "op": NAME, ...}``; replies
``{"id": N, "ok": true, ...}`` or ``{"id": N, "ok": false, "error": "..."}``. `ready` and
`wait` reply when their condition holds (other requests are served meanwhile). The
agent exits when its input closes. Over SSH that may be a dropped link, so the workers
it started live on (the control machine reconnects and starts a new agent); a local
agent (`--local`) can only lose its input when the harness is gone, and stops them (they
save what they measured). Either way each worker's `alive` file, touched every
`ALIVE_EVERY_S` by whichever agent watches it, tells the worker when no harness is left
(`harness.run.worker` stops by itself then).

For the run's telemetry (`harness.run.telemetry`) it reads /proc at the run's edges
(`procsnap`, `harness.hosts.procstat`) and, between those, the machine's busy share once a
second (`SERIES_EVERY_S`): one read of /proc/stat, in the loop it runs anyway.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from harness.hosts import procstat
from harness.run.nocore import no_core_dumps
from harness.run.workerctl import alive, sha256_of
from harness.text import finite_data

#: How often pending `ready`/`wait` conditions are checked.
POLL_S = 0.005
#: How often the `alive` files of the workers this agent watches are touched.
ALIVE_EVERY_S = 1.0
#: How often the machine's busy share is read while a series is on.
SERIES_EVERY_S = 1.0


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _write_atomic(path: str, text: str) -> None:
    Path(path + ".tmp").write_text(text)
    os.replace(path + ".tmp", path)


#: The name a forked worker goes by in `ps -e`, `top` and /proc/PID/comm (its command
#: line stays the agent's: only a fresh interpreter has its own).
WORKER_COMM = b"kvbench-worker"


def _name_worker() -> None:
    with contextlib.suppress(Exception):  # a name only: never worth failing a run over
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(WORKER_COMM), 0, 0, 0)  # PR_SET_NAME


class Agent:
    def __init__(self, local: bool = False) -> None:
        #: Requests that reply later: (id, op, request, deadline).
        self.watches: list[tuple[int, str, dict[str, Any], float]] = []
        self.started: list[subprocess.Popen[bytes]] = []
        #: On the control machine itself: the input closes only when the harness is gone.
        self.local = local
        #: pid -> alive file of each worker this agent watches (spawned or waited on).
        self.alive: dict[int, str] = {}
        self._touched = 0.0
        #: (monotonic time, busy ticks, total ticks) of the series on; None: none on.
        self.series: list[tuple[float, int, int]] | None = None

    def reply(self, rid: int, ok: bool = True, **data: Any) -> None:
        # Strict JSON: a worker's status or a snapshot's float that is not finite is null.
        sys.stdout.write(json.dumps(finite_data({"id": rid, "ok": ok, **data}),
                                    allow_nan=False) + "\n")
        sys.stdout.flush()

    # -- requests -----------------------------------------------------------------
    def handle(self, req: dict[str, Any]) -> None:
        rid, op = req.get("id", -1), req.get("op")
        try:
            if op in ("ready", "wait"):
                self.watch(req.get("alive") or [])
                timeout = float(req.get("timeout_s") or 1e9)
                self.watches.append((rid, op, req, time.monotonic() + timeout))
                self.poll_watches()
                return
            handler = getattr(self, f"op_{op}", None)
            if handler is None:
                raise ValueError(f"unknown op {op!r}")
            self.reply(rid, **(handler(req) or {}))
        except Exception as exc:  # noqa: BLE001 - every failure goes back as a reply
            self.reply(rid, ok=False, error=f"{type(exc).__name__}: {exc}")

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"pid": os.getpid()}

    def op_clock(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"time_ns": time.time_ns()}

    def op_write(self, req: dict[str, Any]) -> None:
        Path(req["path"]).write_text(req["text"])

    def op_spawn(self, req: dict[str, Any]) -> dict[str, Any]:
        """Start `python -m harness.worker CONFIG`: forked from this process (`fork`),
        else as a fresh interpreter (argv as given), in a session of its own."""
        argv, log = list(req["argv"]), req["log"]
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        if req.get("alive"):  # fresh before the worker first looks at it
            Path(req["alive"]).touch()
        if not req.get("fork"):
            with open(log, "ab") as out:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            self.started.append(proc)  # reaped by `reap`; kept so none warns when freed
            self.watch([[proc.pid, req["alive"]]] if req.get("alive") else [])
            return {"pid": proc.pid}
        argv = argv[argv.index("harness.worker") + 1:]
        from harness.run import worker

        # The client built here once per configuration; each fork takes a copy.
        if req.get("prebuild", True):
            with contextlib.suppress(Exception):  # else the worker builds it (says why)
                worker.prebuild(worker.load_config(argv[0]))
        sys.stdout.flush()
        # Every object so far out of the collector's reach in the child: a collection
        # there would write to each one's header and copy the agent's pages (the clients
        # built here among them) one fault at a time while it measures.
        gc.freeze()
        pid = os.fork()
        if pid != 0:
            gc.unfreeze()  # the agent collects as before
        if pid == 0:  # the worker: its own session, output to its log, no stdin
            code = 1
            try:
                os.setsid()
                _name_worker()
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                from harness.run import worker

                code = worker.main(argv)
            except BaseException:  # noqa: BLE001 - into the log, then exit
                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        self.watch([[pid, req["alive"]]] if req.get("alive") else [])
        return {"pid": pid}

    def op_go(self, req: dict[str, Any]) -> None:
        for f in req["files"]:
            _write_atomic(f, str(req["start_at_ns"]))

    def op_info(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"status": {f: _read_json(f) for f in req["status"]},
                "digest": {f: sha256_of(f) for f in req["out"]}}

    def op_live(self, req: dict[str, Any]) -> dict[str, Any]:
        """The live intervals (`harness.loadgen.live`) each worker wrote after the one
        the control machine has: pairs of [live file, last interval number seen]."""
        out: dict[str, list[Any]] = {}
        for path, after in req["pairs"]:
            data = _read_json(path) or {}
            out[path] = [i for i in data.get("intervals", []) if i.get("k", 0) > after]
        return {"intervals": out}

    def op_procsnap(self, req: dict[str, Any]) -> dict[str, Any]:
        """This machine's /proc now (`procstat.snapshot`, with the peak RSS of the
        sessions of `detail`); `series`: "start" starts the busy series, "stop" ends it
        and returns it (`busy`: the share of all CPUs busy in each interval since the
        start, about a second each, the last one shorter)."""
        snap = procstat.snapshot(int(p) for p in req.get("detail") or [])
        if req.get("series") == "start":
            self.series = []
        if req.get("series") != "stop":
            self.sample_series(force=True)
            return {"snapshot": snap}
        self.sample_series(force=True)
        samples, self.series = self.series or [], None
        return {"snapshot": snap,
                "busy": [round((b1 - b0) / (t1 - t0), 4)
                         for (_, b0, t0), (_, b1, t1) in itertools.pairwise(samples)
                         if t1 > t0]}

    def sample_series(self, force: bool = False) -> None:
        if self.series is None:
            return
        now = time.monotonic()
        if force or not self.series or now - self.series[-1][0] >= SERIES_EVERY_S:
            with contextlib.suppress(OSError, ValueError):
                busy, _, total = procstat.cpu_times()
                self.series.append((now, busy, total))

    def op_rm(self, req: dict[str, Any]) -> None:
        for f in req["files"]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f)

    def op_stop(self, req: dict[str, Any]) -> dict[str, Any]:
        """TERM each worker (it saves what it measured), wait up to grace_s, then TERM,
        CONT and KILL what is left of their process groups."""
        pids = [int(p) for p in req["pids"]]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + float(req.get("grace_s", 15))
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.02)
        left = [p for p in pids if alive(p)]
        for sig in (signal.SIGTERM, signal.SIGCONT):
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, sig)
        deadline = time.monotonic() + 1.0
        while any(alive(p) for p in left) and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.02)
        for pid in pids:  # the whole group: children a worker left behind too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        return {"killed": [p for p in left if not alive(p)]}

    # -- watches and children ---------------------------------------------------------
    def watch(self, pairs: list[list[Any]]) -> None:
        for pid, path in pairs:
            self.alive[int(pid)] = str(path)

    def touch_alive(self, force: bool = False) -> None:
        """Touch the alive file of every watched worker still running (once a second)."""
        now = time.monotonic()
        if not force and now - self._touched < ALIVE_EVERY_S:
            return
        self._touched = now
        for pid, path in list(self.alive.items()):
            if not alive(pid):
                del self.alive[pid]
                continue
            with contextlib.suppress(OSError):
                os.utime(path)

    def orphaned(self) -> None:
        """The input closed. Locally the harness is gone: its workers stop (TERM: they
        save what they measured, which the next `harness run` or `harness cleanup`
        writes). Over SSH it may be a dropped link: they run on."""
        if not self.local:
            return
        for pid in list(self.alive):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)

    def poll_watches(self) -> None:
        now = time.monotonic()
        for w in list(self.watches):
            try:
                self._poll_one(w, now)
            except Exception as exc:  # noqa: BLE001 - a bad request must not end the agent
                self.watches.remove(w)
                self.reply(w[0], ok=False, error=f"{type(exc).__name__}: {exc}")

    def _poll_one(self, w: tuple[int, str, dict[str, Any], float], now: float) -> None:
        rid, op, req, deadline = w
        done: dict[str, Any] | None = None
        if op == "ready":
            waiting = [(int(p), f) for p, f in req["pairs"] if not os.path.exists(f)]
            dead = next((p for p, _ in waiting if not alive(p)), None)
            if not waiting:
                done = {}
            elif dead is not None:
                done = {"dead": dead}
            elif now > deadline:
                done = {"timeout": [p for p, _ in waiting]}
        elif not any(alive(int(p)) for p in req["pids"]):
            done = {}
        if done is not None:
            self.watches.remove(w)
            self.reply(rid, **done)

    def reap(self) -> None:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass

    def loop(self) -> int:
        buf = b""
        while True:
            ready, _, _ = select.select([0], [], [], POLL_S if self.watches else 0.5)
            if ready:
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    self.orphaned()
                    return 0
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self.handle(json.loads(line))
            self.reap()
            self.touch_alive()
            self.sample_series()
            if self.watches:
                self.poll_watches()


def main(argv: list[str] | None = None) -> int:
    # Imported once here, so forked workers start without importing anything.
    import harness.run.worker
    import harness.workloads  # noqa: F401

    with contextlib.suppress(ImportError):
        import uvloop  # noqa: F401
    argv = sys.argv[1:] if argv is None else argv
    no_core_dumps()  # over SSH nothing of the control machine's limits comes along
    return Agent(local="--local" in argv).loop()


if __name__ == "__main__":
    sys.exit(main())
