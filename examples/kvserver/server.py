"""The reference KV server: the course protocol over TCP, one line per request.

    put <key> <value>  -> put_success <key> | put_update <key> | put_error <key>
    get <key>          -> get_success <key> <value> | get_error <key>
    delete <key>       -> delete_success <key> | delete_error <key>
    keyrange           -> keyrange_success <from>,<to>,<host>:<port>;...
A request for a key outside this server's range is answered `server_not_responsible`
(the client asks `keyrange` and retries at the responsible server); a PUT or DELETE of
a key whose range is being handed over is answered `server_write_lock` (retry later).

The ECS (ecs.py) drives membership with admin lines on the same port:
    ecs_metadata <ranges>          adopt a new ring
    ecs_lock <from> <to>           refuse writes to that range (hand-over in progress)
    ecs_unlock                     accept writes again
    ecs_transfer <from> <to> <host:port>   copy that range's pairs to another server
    ecs_put <key> <value>          store a handed-over pair, responsible or not
    ecs_drop <from> <to>           delete a range's pairs once another server owns them
    ecs_stats                      cache hits, misses, keys
An example, kept small: no authentication, one event loop, blocking file I/O.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os

from .ring import Ring, in_range, position
from .store import Store

MAX_LINE = 16 * 1024 * 1024


class KVServer:
    def __init__(self, host: str, port: int, store: Store) -> None:
        self.me = f"{host}:{port}"
        self.host, self.port = host, port
        self.store = store
        self.ring = Ring([self.me])  # alone until the ECS says otherwise
        self.locked: list[tuple[int, int]] = []

    def responsible(self, key: bytes) -> bool:
        return self.ring.owner(key) == self.me

    def write_locked(self, key: bytes) -> bool:
        pos = position(key)
        return any(in_range(pos, a, b) for a, b in self.locked)

    async def dispatch(self, line: bytes) -> bytes:
        cmd, _, rest = line.partition(b" ")
        if cmd in (b"put", b"get", b"delete"):
            key, _, value = rest.partition(b" ")
            if not key:
                return b"error missing key"
            if not self.responsible(key):
                return b"server_not_responsible"
            if cmd == b"get":
                found = self.store.get(key)
                return b"get_error " + key if found is None else \
                    b"get_success " + key + b" " + found
            if self.write_locked(key):
                return b"server_write_lock"
            if cmd == b"delete" or value == b"null":  # the course's `put <key> null`
                ok = self.store.delete(key)
                return (b"delete_success " if ok else b"delete_error ") + key
            if not value:
                return b"put_error " + key
            updated = self.store.put(key, value)
            return (b"put_update " if updated else b"put_success ") + key
        if cmd == b"keyrange":
            return b"keyrange_success " + self.ring.metadata().encode()
        return await self.admin(cmd, rest)

    async def admin(self, cmd: bytes, rest: bytes) -> bytes:
        args = rest.split()
        if cmd == b"ecs_put":
            key, _, value = rest.partition(b" ")
            self.store.put(key, value)
            return b"ecs_ok"
        if cmd == b"ecs_metadata":
            self.ring = Ring.from_metadata(rest.decode())
            return b"ecs_ok"
        if cmd == b"ecs_lock":
            self.locked.append((int(args[0], 16), int(args[1], 16)))
            return b"ecs_ok"
        if cmd == b"ecs_unlock":
            self.locked.clear()
            return b"ecs_ok"
        if cmd == b"ecs_transfer":
            n = await self.transfer(int(args[0], 16), int(args[1], 16), args[2].decode())
            return b"ecs_ok %d" % n
        if cmd == b"ecs_drop":
            n = 0
            for key, _ in list(self.store.items_in(int(args[0], 16), int(args[1], 16))):
                n += self.store.delete(key)
            return b"ecs_ok %d" % n
        if cmd == b"ecs_stats":
            s = self.store
            return b"ecs_ok hits=%d misses=%d cached=%d" % (s.hits, s.misses, len(s.cache))
        return b"error unknown command"

    async def transfer(self, first: int, last: int, target: str) -> int:
        """Send the range's pairs to `target` as pipelined `ecs_put`s; wait for all acks."""
        host, _, port = target.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port), limit=MAX_LINE)
        sent = 0
        try:
            for key, value in self.store.items_in(first, last):
                writer.write(b"ecs_put " + key + b" " + value + b"\r\n")
                sent += 1
                if sent % 64 == 0:
                    await writer.drain()  # and let clients' requests in meanwhile
            await writer.drain()
            for _ in range(sent):
                if (await reader.readline()).strip() != b"ecs_ok":
                    raise ConnectionError(f"{target} refused a handed-over pair")
        finally:
            writer.close()
        return sent

    async def serve_client(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(await self.dispatch(line.rstrip(b"\r\n")) + b"\r\n")
                await writer.drain()  # returns at once unless the client reads slowly
        except (ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            with contextlib.suppress(ConnectionError):
                writer.close()


async def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m examples.kvserver", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("-p", "--port", type=int, required=True)
    p.add_argument("-c", "--cache-size", type=int, default=1000, help="cached entries")
    p.add_argument("-s", "--strategy", default="FIFO", help="FIFO, LRU or LFU")
    p.add_argument("-d", "--data-dir", required=True, help="where the files go")
    p.add_argument("--fsync", action="store_true", help="fsync every stored file")
    a = p.parse_args(argv)
    server = KVServer(a.host, a.port, Store(a.data_dir, a.cache_size, a.strategy, a.fsync))
    tcp = await asyncio.start_server(server.serve_client, a.host, a.port, limit=MAX_LINE)
    print(f"kvserver {server.me} pid {os.getpid()}: cache {a.cache_size} {a.strategy}, "
          f"data in {a.data_dir}", flush=True)
    async with tcp:
        await tcp.serve_forever()
