"""The reference file-store app of seed 000: files in storage and, if small, in memcached.

An App Engine style app reduced to what the study measures. Plain ASGI (no framework:
four routes do not need one, and every line that runs per request is in this file).
Serve it with a production ASGI server: ``uvicorn harness.apps.filestore:app``.

HTTP contract (docs/studies.md has the same table)::

    PUT    /files/{name}  body = content  201 Created (new) | 204 No Content (replaced)
    GET    /files/{name}                  200 + content | 404 Not Found
    DELETE /files/{name}                  204 No Content | 404 Not Found
    GET    /health                        200 "ok": the no-op request of the RTT probe
    GET    /stats                         200 JSON: this worker's counters and settings
    bad {name} -> 400, PUT body over the limit -> 413, other paths -> 404, methods -> 405

`{name}` is URL-quoted by the client and unquoted once here; after that it must be one
path component (not empty, `.` or `..`; no `/` or NUL; at most 255 UTF-8 bytes), so no
name reaches outside the storage directory. Memcache use per request: header
``X-Memcache: on|off`` or query ``?memcache=1|0``; the default is a setting. With
memcache on, PUT stores files smaller than the threshold in memcached too (and drops a
cached copy of a larger one), GET tries memcached first, DELETE removes both; with it
off, a request does not touch memcached at all (so mixing modes on one name can leave a
stale cached copy, as in the seed's app). Responses to /files say what memcached did in
``X-Cache``: hit, miss, stored, skipped (too large), deleted, bypass (off), none (no
memcached configured) or error (memcached failed; storage answered: failures degrade).

Settings, from the environment when the app starts (not on import):
FILESTORE_STORAGE_DIR (required), FILESTORE_MEMCACHED (host:port; unset = no cache),
FILESTORE_MEMCACHE (on|off, default on), FILESTORE_THRESHOLD_BYTES (102400),
FILESTORE_MAX_BODY_BYTES (33554432), FILESTORE_FSYNC (0|1, default 0).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from harness.drivers import memcache

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_NAME_BYTES = 255  # NAME_MAX of common file systems
MEMCACHE_TIMEOUT_S = 1.0
RECONNECT_EVERY_S = 1.0  # while memcached is down, requests do not each pay a connect
ON, OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")
log = logging.getLogger(__name__)


class Problem(Exception):
    """An error answer: HTTP status and a one-line message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass(frozen=True)
class Config:
    storage_dir: str
    memcached: str | None
    memcache_default: bool
    threshold_bytes: int
    max_body_bytes: int
    fsync: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        if not env.get("FILESTORE_STORAGE_DIR"):
            raise RuntimeError("FILESTORE_STORAGE_DIR is not set: the directory for files")
        return cls(
            storage_dir=env["FILESTORE_STORAGE_DIR"],
            memcached=env.get("FILESTORE_MEMCACHED") or None,
            memcache_default=switch(env.get("FILESTORE_MEMCACHE", "on")),
            threshold_bytes=int(env.get("FILESTORE_THRESHOLD_BYTES", 102400)),
            max_body_bytes=int(env.get("FILESTORE_MAX_BODY_BYTES", 32 * 1024 * 1024)),
            fsync=switch(env.get("FILESTORE_FSYNC", "0")),
        )


def switch(value: str) -> bool:
    v = value.strip().lower()
    if v in ON or v in OFF:
        return v in ON
    raise ValueError(f"{value!r} is not on/off (or 1/0)")


def parse_name(quoted: bytes) -> str:
    """The file name in a raw path segment, unquoted once; Problem(400) if unsafe."""
    try:
        name = unquote_to_bytes(quoted).decode("utf-8")
    except UnicodeDecodeError:
        raise Problem(400, "file name is not valid UTF-8") from None
    if name in ("", ".", ".."):
        raise Problem(400, f"file name {name!r} is not allowed")
    if "/" in name or "\x00" in name:
        raise Problem(400, "file name must not contain '/' or NUL")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise Problem(400, f"file name longer than {MAX_NAME_BYTES} bytes")
    return name


class Storage:
    """A directory standing in for cloud storage. Writes go to a temporary file that is
    renamed into place, so a reader sees the old file or the new one, never a part."""

    def __init__(self, root: str, fsync: bool) -> None:
        self.files = os.path.join(root, "files")
        self.tmp = os.path.join(root, "tmp")  # same file system: rename is atomic
        self.fsync = fsync
        os.makedirs(self.files, exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)

    def path(self, name: str) -> str:
        path = os.path.join(self.files, name)
        if os.path.dirname(path) != self.files:  # parse_name already ensures this
            raise Problem(400, "file name escapes the storage directory")
        return path

    def read(self, name: str) -> bytes | None:
        try:
            with open(self.path(name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> bool:
        """Store `data`; True if the name did not exist just before."""
        path = self.path(name)
        fd, tmp = tempfile.mkstemp(dir=self.tmp)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if self.fsync:
                    f.flush()
                    os.fsync(f.fileno())
            created = not os.path.exists(path)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return created

    def delete(self, name: str) -> bool:
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            return False
        return True


class _Down(ConnectionError):
    """memcached was unreachable less than RECONNECT_EVERY_S ago."""


class Cache:
    """memcached over one pipelined connection; failures are counted, never raised."""

    def __init__(self, address: str, stats: dict[str, Any]) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.stats = stats
        self.conn: memcache.MemcacheProtocol | None = None
        self.next_try = 0.0
        self.lock = asyncio.Lock()

    @staticmethod
    def key(name: str) -> bytes:
        # Hashed: memcached keys may not hold spaces or control characters.
        return b"filestore:" + hashlib.sha256(name.encode()).hexdigest().encode()

    async def _connection(self) -> memcache.MemcacheProtocol:
        conn = self.conn
        if conn is not None and conn.transport is not None and not conn.transport.is_closing():
            return conn
        async with self.lock:
            loop = asyncio.get_running_loop()
            if self.conn is conn and loop.time() >= self.next_try:
                self.next_try = loop.time() + RECONNECT_EVERY_S
                self.conn = await memcache.connect(self.host, self.port, MEMCACHE_TIMEOUT_S)
            if self.conn is None or self.conn is conn:
                raise _Down("memcached is unreachable (retrying every second)")
            return self.conn

    async def call(self, what: str, *args: Any) -> Any:
        """The result of memcache `what`(args), or an Exception instance on failure."""
        try:
            conn = await self._connection()
            async with asyncio.timeout(MEMCACHE_TIMEOUT_S):
                return await getattr(conn, what)(*args)
        except (OSError, TimeoutError, memcache.MemcacheError) as exc:
            self.stats["memcache_errors"] += 1
            if not isinstance(exc, _Down):  # one line per outage, not one per request
                log.warning("memcached %s failed: %s: %s", what, type(exc).__name__, exc)
            return exc

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class FileStoreApp:
    """The ASGI application. State is built at startup (lifespan, or the first request
    under a server without lifespan support)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = env
        self.config: Config | None = None
        self.storage: Storage | None = None
        self.cache: Cache | None = None
        self.stats: dict[str, Any] = {}

    async def startup(self) -> None:
        self.config = cfg = Config.from_env(os.environ if self.env is None else self.env)
        self.storage = Storage(cfg.storage_dir, cfg.fsync)
        self.stats = dict.fromkeys(("requests", "memcache_hits", "memcache_misses",
                                    "memcache_sets", "memcache_skipped", "memcache_errors"), 0)
        if cfg.memcached:
            self.cache = Cache(cfg.memcached, self.stats)
            await self.cache.call("version")  # connect now; a failure is counted, not fatal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if self.config is None:
            await self.startup()
        self.stats["requests"] += 1
        try:
            status, body, headers = await self.handle(scope, receive)
        except Problem as p:
            status, body, headers = p.status, (p.message + "\n").encode(), dict(p.headers)
        except ConnectionAbortedError:
            return  # the client went away while sending its body
        if "Content-Type" not in headers:
            is_file = status == 200 and scope["path"].startswith("/files/")
            headers["Content-Type"] = ("application/octet-stream" if is_file
                                       else "text/plain; charset=utf-8")
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in headers.items()),
        ]})
        await send({"type": "http.response.body", "body": body})

    async def handle(self, scope: Scope, receive: Receive) -> tuple[int, bytes, dict[str, str]]:
        assert self.config is not None and self.storage is not None
        raw = (scope.get("raw_path") or scope["path"].encode()).split(b"?", 1)[0]
        method = scope["method"]
        if raw in (b"/health", b"/stats"):
            if method != "GET":
                raise Problem(405, "only GET", {"Allow": "GET"})
            if raw == b"/health":
                return 200, b"ok\n", {}
            info = {**self.stats, "pid": os.getpid(), "config": asdict(self.config)}
            return (200, json.dumps(info, allow_nan=False).encode(),  # counts and settings
                    {"Content-Type": "application/json"})
        if not raw.startswith(b"/files/"):
            raise Problem(404, "no such route: use /files/{name}, /health or /stats")
        name = parse_name(raw[len(b"/files/"):])
        use = self._memcache_wanted(scope)
        cache = self.cache if use else None
        what = "none" if use and self.cache is None else "bypass"
        storage, stats = self.storage, self.stats
        if method == "GET":
            if cache is not None:
                got = await cache.call("get", Cache.key(name))
                if isinstance(got, bytes):
                    stats["memcache_hits"] += 1
                    return 200, got, {"X-Cache": "hit"}
                what = "error" if isinstance(got, Exception) else "miss"
                stats["memcache_misses"] += what == "miss"
            data = await asyncio.to_thread(storage.read, name)
            if data is None:
                raise Problem(404, "no such file", {"X-Cache": what})
            return 200, data, {"X-Cache": what}
        if method == "PUT":
            body = await read_body(scope, receive, self.config.max_body_bytes)
            created = await asyncio.to_thread(storage.write, name, body)
            if cache is not None:
                if len(body) < self.config.threshold_bytes:
                    ok = await cache.call("set", Cache.key(name), body) == b"STORED"
                    what = "stored" if ok else "error"
                    stats["memcache_sets"] += ok
                else:  # too large to cache; a smaller earlier version must not linger
                    gone = await cache.call("delete", Cache.key(name))
                    what = "error" if isinstance(gone, Exception) else "skipped"
                    stats["memcache_skipped"] += 1
            return (201 if created else 204), b"", {"X-Cache": what}
        if method == "DELETE":
            existed = await asyncio.to_thread(storage.delete, name)
            if cache is not None:
                gone = await cache.call("delete", Cache.key(name))
                what = "error" if isinstance(gone, Exception) else "deleted"
            if not existed:
                raise Problem(404, "no such file", {"X-Cache": what})
            return 204, b"", {"X-Cache": what}
        raise Problem(405, "use GET, PUT or DELETE", {"Allow": "GET, PUT, DELETE"})

    def _memcache_wanted(self, scope: Scope) -> bool:
        assert self.config is not None
        value: str | None = None
        for k, v in scope["headers"]:
            if k == b"x-memcache":
                value = v.decode("latin-1")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "memcache" in query:
            value = query["memcache"][-1]
        if value is None:
            return self.config.memcache_default
        try:
            return switch(value)
        except ValueError as exc:
            raise Problem(400, f"X-Memcache / ?memcache=: {exc}") from None

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except (RuntimeError, ValueError, OSError) as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.cache is not None:
                    self.cache.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request body; Problem(413) past `limit` (before reading it, if declared)."""
    for k, v in scope["headers"]:
        if k == b"content-length" and int(v) > limit:
            raise Problem(413, f"body larger than {limit} bytes", {"Connection": "close"})
    chunks, total = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionAbortedError
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise Problem(413, f"body larger than {limit} bytes", {"Connection": "close"})
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


#: What ASGI servers import: ``uvicorn harness.apps.filestore:app``.
app = FileStoreApp()
