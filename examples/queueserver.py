"""A reference server whose capacity is known: one worker, a fixed service time, FIFO.

It speaks memcached's text protocol (`get`, `set`, `version`), and every request waits
its turn in ONE queue, in arrival order over all connections, and is then served by one
worker thread in exactly `--service-ms` (the reply is computed, then the worker waits
out the rest of the time: a short sleep, then a spin for the last 0.2 ms, so the
service time is deterministic to a few microseconds). Under Poisson arrivals at rate
lambda it is an M/D/1 queue: capacity 1/S, and the sojourn time's percentiles follow
from Lindley's recursion (`benchmarks/capacity_md1.py`), which is what the capacity
search (`harness run --search`) is checked against.

    python examples/queueserver.py --port 11311 --service-ms 2

Not part of the `harness` package; no authentication: bind it to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import queue
import sys
import threading
import time

SPIN_S = 0.0002  # the last part of each service time is spun, not slept (sleep overshoots)


class QueueServer:
    def __init__(self, service_s: float) -> None:
        self.service_s = service_s
        self.store: dict[bytes, tuple[bytes, bytes]] = {}
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.served = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    def work(self) -> None:
        """The one worker: FIFO over every connection, `service_s` per request."""
        while True:
            job = self.jobs.get()
            if job is None:
                return
            began = time.perf_counter()
            writer, reply = job[0], self.answer(*job[1:])
            deadline = began + self.service_s
            rest = deadline - time.perf_counter() - SPIN_S
            if rest > 0:
                time.sleep(rest)
            while time.perf_counter() < deadline:
                pass
            self.served += 1
            assert self.loop is not None
            self.loop.call_soon_threadsafe(_write, writer, reply)

    def answer(self, words: list[bytes], data: bytes | None) -> bytes:
        cmd = words[0] if words else b""
        if cmd == b"get" and len(words) >= 2:
            out = []
            for key in words[1:]:
                if key in self.store:
                    flags, value = self.store[key]
                    out.append(b"VALUE %s %s %d\r\n%s\r\n" % (key, flags, len(value), value))
            return b"".join(out) + b"END\r\n"
        if cmd == b"set" and data is not None:
            self.store[words[1]] = (words[2], data)
            return b"STORED\r\n"
        if cmd == b"version":
            return b"VERSION queueserver-1\r\n"
        return b"ERROR\r\n"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                words = line.split()
                data = None
                if words[:1] == [b"set"]:
                    if len(words) < 5:
                        writer.write(b"CLIENT_ERROR bad command line format\r\n")
                        continue
                    data = (await reader.readexactly(int(words[4]) + 2))[:-2]
                self.jobs.put((writer, words, data))  # arrival order = service order
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _write(writer: asyncio.StreamWriter, reply: bytes) -> None:
    if not writer.is_closing():
        writer.write(reply)


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--service-ms", type=float, required=True,
                    help="the fixed time each request takes, in milliseconds")
    args = ap.parse_args(argv)
    server = QueueServer(args.service_ms / 1e3)
    server.loop = asyncio.get_running_loop()
    threading.Thread(target=server.work, daemon=True).start()
    srv = await asyncio.start_server(server.serve, args.host, args.port)
    print(f"queueserver on {args.host}:{args.port}, service time {args.service_ms} ms",
          file=sys.stderr, flush=True)
    async with srv:
        await srv.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
