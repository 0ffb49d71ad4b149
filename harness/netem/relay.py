"""Userspace link emulator: a TCP relay that delays and paces each direction's bytes.

    python -m harness.netem.relay --listen 10.231.7.1:40001 --target 127.0.0.1:5432 \\
        --delay-ms 1.5 --jitter-ms 0.5 --rate-mbit 100 --tag hkv-1a2b3c

Used where the kernel has no `netem` qdisc (some CI kernels). Each accepted connection
gets a connection to the target; bytes read from one side are released to the other
after `delay ± jitter` (uniform), one way, so a round trip pays twice the delay. With a
rate, a direction is a store-and-forward link: a piece leaves when the link is free and
its bytes are serialised at that rate, then propagates for the delay.

Order is kept: release times never decrease within a direction (a FIFO; jitter can
only hold bytes back, never let later bytes overtake), exactly like one TCP stream on
a real link. Packet loss cannot be emulated on a byte stream (TCP would hide it), so
the relay has no loss option; `harness.netem` records that.

Reading, accepting and connecting run on asyncio; releasing runs on one thread per
direction, because asyncio timers wake at millisecond granularity (epoll), ten times the
LAN delay, whereas a thread can sleep to within ~0.1 ms and spin the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import queue
import random
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

READY_LINE = "hkv-relay listening on"
#: Bytes read per recv; with a rate, pieces of at most PIECE bytes are paced one by one.
READ_SIZE = 65536
PIECE = 4096
#: A direction stops reading while this many bytes wait for release (TCP back-pressure).
MAX_QUEUED = 4 << 20
#: The last stretch before a release time is spun, not slept (sleep overshoots ~70 us).
SPIN_S = 0.00015


@dataclass(frozen=True)
class LinkShape:
    """One direction's behaviour: one-way delay, uniform jitter, rate (None: unlimited)."""

    delay_s: float = 0.0
    jitter_s: float = 0.0
    rate_bps: float | None = None


def sleep_until(t: float) -> None:
    """Sleep until perf_counter() >= t, to within a few microseconds."""
    left = t - time.perf_counter()
    if left > SPIN_S:
        time.sleep(left - SPIN_S)
    while time.perf_counter() < t:
        pass


def send_all(sock: socket.socket, data: bytes) -> None:
    """Send everything on a non-blocking socket from a thread (the loop owns the socket)."""
    view = memoryview(data)
    while view:
        try:
            n = sock.send(view)
        except BlockingIOError:
            select.select([], [sock], [], 1.0)
            continue
        view = view[n:]


class Direction:
    """src -> dst: asyncio reads and timestamps; a thread releases in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, src: socket.socket,
                 dst: socket.socket, shape: LinkShape, rng: random.Random) -> None:
        self.loop, self.src, self.dst, self.shape, self.rng = loop, src, dst, shape, rng
        self.q: queue.SimpleQueue[tuple[float, bytes] | None] = queue.SimpleQueue()
        self.queued = 0
        self.lock = threading.Lock()
        self.space = asyncio.Event()
        self.waiting = False
        self.link_free = 0.0
        self.last_release = 0.0
        self.done: asyncio.Future[None] = loop.create_future()
        self.thread = threading.Thread(target=self._release, daemon=True)

    def release_times(self, data: bytes, now: float) -> list[tuple[float, bytes]]:
        shape = self.shape
        pieces = [data] if shape.rate_bps is None else [
            data[i:i + PIECE] for i in range(0, len(data), PIECE)]
        out = []
        for piece in pieces:
            depart = now
            if shape.rate_bps is not None:
                depart = max(now, self.link_free) + len(piece) * 8 / shape.rate_bps
                self.link_free = depart
            delay = shape.delay_s
            if shape.jitter_s:
                delay = max(0.0, delay + self.rng.uniform(-shape.jitter_s, shape.jitter_s))
            release = max(depart + delay, self.last_release)  # FIFO: never reorder
            self.last_release = release
            out.append((release, piece))
        return out

    async def pump(self) -> None:
        self.thread.start()
        try:
            while True:
                try:
                    data = await self.loop.sock_recv(self.src, READ_SIZE)
                except OSError:
                    break
                if not data:
                    break
                for item in self.release_times(data, time.perf_counter()):
                    with self.lock:
                        self.queued += len(item[1])
                    self.q.put(item)
                while self.queued > MAX_QUEUED:
                    self.space.clear()
                    self.waiting = True
                    if self.queued > MAX_QUEUED:
                        await self.space.wait()
                    self.waiting = False
        finally:
            self.q.put(None)
            await self.done

    def _release(self) -> None:
        broken = False
        try:
            while True:
                item = self.q.get()
                if item is None:
                    break
                if broken:
                    continue  # drain so the reader is never left waiting for space
                release, data = item
                sleep_until(release)
                try:
                    send_all(self.dst, data)
                except OSError:
                    broken = True
                    # The far side is gone: make our reader see EOF too.
                    with contextlib.suppress(OSError):
                        self.src.shutdown(socket.SHUT_RDWR)
                with self.lock:
                    self.queued -= len(data)
                    wake = self.waiting and self.queued <= MAX_QUEUED // 2
                if wake:
                    self.loop.call_soon_threadsafe(self.space.set)
            if not broken:
                with contextlib.suppress(OSError):
                    self.dst.shutdown(socket.SHUT_WR)
        finally:
            self.loop.call_soon_threadsafe(self._finish)

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class Relay:
    def __init__(self, listen: tuple[str, int], target: tuple[str, int], shape: LinkShape,
                 seed: int | None = None) -> None:
        self.listen, self.target, self.shape = listen, target, shape
        self.rng = random.Random(seed)
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        lsock = socket.create_server(self.listen, reuse_port=False, backlog=128)
        lsock.setblocking(False)
        print(f"{READY_LINE} {self.listen[0]}:{lsock.getsockname()[1]}", flush=True)
        accept = asyncio.ensure_future(self._accept_loop(loop, lsock))
        await stop.wait()
        accept.cancel()
        for t in list(self.tasks):
            t.cancel()
        lsock.close()

    async def _accept_loop(self, loop: asyncio.AbstractEventLoop, lsock: socket.socket) -> None:
        while True:
            conn, _ = await loop.sock_accept(lsock)
            task = asyncio.ensure_future(self._handle(loop, conn))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _handle(self, loop: asyncio.AbstractEventLoop, a: socket.socket) -> None:
        b = socket.socket(socket.AF_INET6 if ":" in self.target[0] else socket.AF_INET)
        try:
            a.setblocking(False)
            b.setblocking(False)
            await loop.sock_connect(b, self.target)
            for s in (a, b):
                # Small writes (a commit's WAL, its acknowledgement) must not wait for
                # Nagle: the emulated delay is the only delay we want.
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ab = Direction(loop, a, b, self.shape, self.rng)
            ba = Direction(loop, b, a, self.shape, self.rng)
            await asyncio.gather(ab.pump(), ba.pump())
        except OSError as exc:
            print(f"connection to {self.target[0]}:{self.target[1]} failed: {exc}", flush=True)
        finally:
            a.close()
            b.close()


def parse_addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.netem.relay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", required=True, help="HOST:PORT to accept on (PORT 0: any)")
    p.add_argument("--target", required=True, help="HOST:PORT to relay to")
    p.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay, each direction")
    p.add_argument("--jitter-ms", type=float, default=0.0, help="uniform ± jitter on the delay")
    p.add_argument("--rate-mbit", type=float, default=None, help="link rate, each direction")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--tag", default="", help="cleanup finds relays by this (hkv-...) tag")
    args = p.parse_args(argv)
    if args.delay_ms < 0 or args.jitter_ms < 0 or (args.rate_mbit is not None
                                                    and args.rate_mbit <= 0):
        p.error("delay and jitter must be >= 0, rate > 0")
    shape = LinkShape(args.delay_ms / 1e3, args.jitter_ms / 1e3,
                      None if args.rate_mbit is None else args.rate_mbit * 1e6)
    # The release threads and the loop share the GIL: hand it over quickly.
    sys.setswitchinterval(0.0002)
    relay = Relay(parse_addr(args.listen), parse_addr(args.target), shape, args.seed)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await relay.serve(stop)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
