"""The asyncio HTTP/1.1 client: framing cases from a TCP server replaying canned bytes
(sent in small pieces, to exercise incremental parsing), and a real uvicorn."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from harness.drivers import http
from harness.hosts import free_port


async def _canned(replies: list[bytes], piece: int = 7) -> tuple[asyncio.Server, int]:
    """A server answering each request head with the next canned reply, then closing
    after the last one."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for reply in replies:
            head = await reader.readuntil(b"\r\n\r\n")
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    await reader.readexactly(int(line.split(b":")[1]))
            for i in range(0, len(reply), piece):
                writer.write(reply[i:i + piece])
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def run(replies: list[bytes], requests: list[tuple[str, str, bytes]]) -> list[object]:
    async def main() -> list[object]:
        server, port = await _canned(replies)
        out: list[object] = []
        async with server:
            conn = await http.connect("127.0.0.1", port)
            for method, target, body in requests:
                try:
                    out.append(await asyncio.wait_for(conn.request(method, target, body), 5))
                except (OSError, http.HTTPError) as exc:
                    out.append(exc)
            conn.close()
        return out

    return asyncio.run(main())


def test_content_length_bodies_on_one_kept_alive_connection() -> None:
    r1 = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello"
    r2 = b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n"
    a, b = run([r1, r2], [("GET", "/a", b""), ("PUT", "/b", b"x" * 40000)])
    assert isinstance(a, http.Response) and (a.status, a.body) == (200, b"hello")
    assert a.headers["x-a"] == "1" and a.reason == "OK"
    assert isinstance(b, http.Response) and (b.status, b.body) == (201, b"")


def test_chunked_body_with_extensions_and_trailers() -> None:
    r = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n")
    r2 = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    a, b = run([r, r2], [("GET", "/", b""), ("GET", "/", b"")])
    assert isinstance(a, http.Response) and a.body == b"hello 0123456789"
    assert isinstance(b, http.Response) and b.body == b""


def test_no_body_statuses_interim_responses_and_close_delimited_bodies() -> None:
    replies = [
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno",
        b"HTTP/1.0 200 OK\r\n\r\nuntil the end",
    ]
    a, b, c = run(replies, [("DELETE", "/x", b""), ("GET", "/y", b""), ("GET", "/z", b"")])
    assert isinstance(a, http.Response) and (a.status, a.body) == (204, b"")
    assert isinstance(b, http.Response) and (b.status, b.body) == (404, b"no")
    assert isinstance(c, http.Response) and c.body == b"until the end"


def test_connection_close_is_honoured_and_bad_responses_are_errors() -> None:
    r = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    a, b = run([r], [("GET", "/", b""), ("GET", "/", b"")])
    assert isinstance(a, http.Response) and a.body == b"ok"
    assert isinstance(b, ConnectionResetError)
    [bad] = run([b"SSH-2.0-OpenSSH\r\n\r\n"], [("GET", "/", b"")])
    assert isinstance(bad, http.HTTPError) and "bad status line" in str(bad)
    [cut] = run([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"],
                [("GET", "/", b"")])
    assert isinstance(cut, ConnectionResetError)


def test_parse_url() -> None:
    assert http.parse_url("http://127.0.0.1:8080") == http.URL("127.0.0.1", 8080, "/")
    assert http.parse_url("http://h/app") == http.URL("h", 80, "/app/")
    assert http.parse_url("http://[::1]:9/x/").host == "::1"
    # Port 0 was silently port 80.
    assert http.parse_url("https://h/app") == http.URL("h", 443, "/app/", True)
    for bad in ("ftp://h", "http://:80/", "http://h:port/", "http://h:0/",
                "http://h:65536/"):
        with pytest.raises(http.HTTPError):
            http.parse_url(bad)


async def _streaming_app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    """Answers with a chunked body (no Content-Length): uvicorn chunk-encodes it."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for _ in range(3):
        await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def uvicorn_port() -> Iterator[int]:
    uvicorn = pytest.importorskip("uvicorn")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(_streaming_app, host="127.0.0.1", port=port,
                                           lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    yield port
    server.should_exit = True
    thread.join(10)


def test_against_uvicorn_chunked_and_large_bodies(uvicorn_port: int) -> None:
    async def main() -> list[http.Response]:
        conn = await http.connect("127.0.0.1", uvicorn_port)
        out = [await conn.request("PUT", "/", b"abc"),
               await conn.request("PUT", "/", memoryview(b"z" * 300_000))]
        conn.close()
        return out

    small, large = asyncio.run(main())
    assert small.headers.get("transfer-encoding") == "chunked"
    assert small.body == b"abc" * 3
    assert large.body == b"z" * 900_000
