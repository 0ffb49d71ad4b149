"""A minimal asyncio HTTP/1.1 keep-alive client for the load generator.

One request in flight per connection (no pipelining: many servers handle it badly, and
the load generator gets concurrency from more connections). Responses are framed by
Content-Length, by chunked transfer encoding, or, when a server sends neither, by the
connection closing. Plain HTTP only: there is no TLS, because the targets are on
loopback or emulated hosts; an `https://` URL is refused with a clear error.

Parsing is deliberately small (status line, headers into a dict with lower-case names,
body) so that the cost per op stays well below the server's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from harness.drivers.tls import tls_kwargs
from harness.errors import HarnessError
from harness.hosts.endpoint import TLSConfig

_MAX_HEAD_BYTES = 64 * 1024
_NO_BODY_STATUSES = (204, 304)


class HTTPError(HarnessError):
    """A malformed response, or a URL this client cannot use."""


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    #: Header names in lower case; a repeated header keeps its last value.
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class URL:
    host: str
    port: int
    #: Path prefix ending in "/", e.g. "/" or "/myapp/".
    base_path: str
    #: https: the connection speaks TLS (the endpoint's `TLSConfig`).
    tls: bool = False

    @property
    def netloc(self) -> str:
        return f"{self.host}:{self.port}"


def parse_url(url: str) -> URL:
    """`http[s]://[user:pass@]host[:port][/prefix/]` -> URL; HTTPError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise HTTPError(f"{url!r}: only http:// and https:// URLs are supported")
    if not parts.hostname:
        raise HTTPError(f"{url!r}: no host name")
    try:
        port = parts.port
    except ValueError as exc:
        raise HTTPError(f"{url!r}: bad port ({exc})") from None
    if port == 0:  # not "no port": `or 80` would silently take it for one
        raise HTTPError(f"{url!r}: bad port (0 is not a TCP port)")
    tls = parts.scheme == "https"
    port = port or (443 if tls else 80)
    path = parts.path or "/"
    return URL(parts.hostname, port, path if path.endswith("/") else path + "/", tls)


class HTTPConnection(asyncio.Protocol):
    """One HTTP/1.1 connection; `request` returns a Future of the Response."""

    def __init__(self, host_header: str) -> None:
        self.host_header = host_header
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._fut: asyncio.Future[Response] | None = None
        self._head: tuple[int, str, dict[str, str]] | None = None
        self._chunks: list[bytes] = []
        self._no_body = False
        self._method = "GET"
        self._closed: Exception | None = None
        #: False once the server said `Connection: close` (or spoke HTTP/1.0).
        self.reusable = True

    # -- asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = exc or ConnectionResetError("the server closed the connection")
        self.reusable = False
        fut = self._fut
        if fut is None or fut.done():
            return
        if self._head is not None and self._until_close():
            self._finish(bytes(self._buf))  # the body was delimited by the close
        else:
            self._fut = None
            fut.set_exception(ConnectionResetError(f"connection lost mid-response: "
                                                   f"{self._closed}"))

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._fut is None:
            self.reusable = False  # bytes nobody asked for: the stream is out of step
            return
        try:
            self._parse()
        except (HTTPError, ValueError) as exc:
            fut, self._fut = self._fut, None
            self.reusable = False
            if fut is not None and not fut.done():
                fut.set_exception(HTTPError(f"malformed response: {exc}"))
            if self.transport is not None:
                self.transport.close()

    # -- parsing --------------------------------------------------------------------------
    def _parse(self) -> None:
        buf = self._buf
        while self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_HEAD_BYTES:
                    raise HTTPError("response head too long")
                return
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            version, _, rest = lines[0].partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or not code.isdigit():
                raise HTTPError(f"bad status line {lines[0]!r}")
            status = int(code)
            if 100 <= status < 200:
                continue  # interim response (100 Continue): the real one follows
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if not sep:
                    raise HTTPError(f"bad header line {line!r}")
                headers[name.strip().lower()] = value.strip()
            if headers.get("connection", "").lower() == "close" or version == "HTTP/1.0":
                self.reusable = False
            self._head = (status, reason, headers)
            self._no_body = status in _NO_BODY_STATUSES or self._method == "HEAD"
        headers = self._head[2]
        if self._no_body:
            self._finish(b"")
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._parse_chunks()
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if len(buf) >= length:
                body = bytes(buf[:length])
                del buf[:length]
                self._finish(body)
        # else: the body runs until the connection closes (connection_lost finishes it)

    def _until_close(self) -> bool:
        assert self._head is not None
        headers = self._head[2]
        return not (self._no_body or "content-length" in headers
                    or "chunked" in headers.get("transfer-encoding", "").lower())

    def _parse_chunks(self) -> None:
        buf = self._buf
        while True:
            eol = buf.find(b"\r\n")
            if eol < 0:
                return
            size = int(bytes(buf[:eol]).split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Last chunk, then optional trailers, then an empty line.
                end = buf.find(b"\r\n\r\n", eol)
                if end < 0:
                    return
                del buf[: end + 4]
                body, self._chunks = b"".join(self._chunks), []
                self._finish(body)
                return
            if len(buf) < eol + 2 + size + 2:
                return
            self._chunks.append(bytes(buf[eol + 2 : eol + 2 + size]))
            del buf[: eol + 2 + size + 2]

    def _finish(self, body: bytes) -> None:
        assert self._head is not None
        status, reason, headers = self._head
        fut, self._fut, self._head = self._fut, None, None
        if not self.reusable and self.transport is not None:
            self.transport.close()
        if fut is not None and not fut.done():
            fut.set_result(Response(status, reason, headers, body))

    # -- requests --------------------------------------------------------------------------
    def request(
        self,
        method: str,
        target: str,
        body: bytes | memoryview = b"",
        headers: Mapping[str, str] | None = None,
    ) -> asyncio.Future[Response]:
        """Send one request; `target` is the path (already URL-quoted) and query."""
        if self._closed is not None or self.transport is None or not self.reusable:
            raise ConnectionResetError("HTTP connection is closed")
        if self._fut is not None:
            # In flight, or abandoned (cancelled by a timeout) with its answer still due:
            # either way this connection's next bytes belong to that request.
            raise ConnectionResetError("a request is still unanswered on this connection")
        self._method = method
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._fut = fut
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}",
                 "Connection: keep-alive"]
        if body or method in ("PUT", "POST"):
            lines.append(f"Content-Length: {len(body)}")
        if headers:
            lines += [f"{k}: {v}" for k, v in headers.items()]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if len(body) <= 16384:
            self.transport.write(head + bytes(body))
        else:  # large bodies: no copy; the transport sends both buffers in order
            self.transport.write(head)
            self.transport.write(body)
        return fut

    @property
    def closed(self) -> bool:
        """True when no further request can be sent (closed, or the server asked to)."""
        return self._closed is not None or not self.reusable or self.transport is None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def connect(host: str, port: int, timeout_s: float = 10.0,
                  tls: TLSConfig | None = None) -> HTTPConnection:
    """Open a connection to host:port (TCP_NODELAY is asyncio's default), over TLS with
    `tls` (https)."""
    loop = asyncio.get_running_loop()
    host_header = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    _, proto = await asyncio.wait_for(
        loop.create_connection(lambda: HTTPConnection(host_header), host, port,
                               **tls_kwargs(tls, host)), timeout_s
    )
    return proto
