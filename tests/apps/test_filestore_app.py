"""The file-store app's HTTP contract, served by real uvicorn with a real memcached.

Requests go through the standard library's http.client, not the kit's own HTTP driver,
so the contract is checked by an independent client.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.apps.filestore import Cache
from harness.hosts import LocalHost
from harness.services import RunningService
from tests.fixtures.filestore import filestore_stack, memcached_get

pytestmark = pytest.mark.integration

THRESHOLD = 102400
MAX_BODY = 512 * 1024


class App:
    def __init__(self, svc: RunningService, mc: RunningService | None, storage: Path) -> None:
        self.svc, self.mc, self.storage = svc, mc, storage

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection(self.svc.endpoint.host, self.svc.endpoint.port,
                                          timeout=10)
        conn.request(method, path, body=body, headers=dict(headers or {}))
        resp = conn.getresponse()
        resp.data = resp.read()  # type: ignore[attr-defined]
        conn.close()
        return resp

    def file(self, name: str, method: str = "GET", body: bytes | None = None,
             memcache: str | None = None) -> http.client.HTTPResponse:
        headers = {"X-Memcache": memcache} if memcache else {}
        return self.request(method, "/files/" + quote(name, safe=""), body, headers)

    def cached(self, name: str) -> bytes | None:
        assert self.mc is not None
        return memcached_get(self.mc, Cache.key(name))

    def stats(self) -> dict:
        return json.loads(self.request("GET", "/stats").data)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    storage = tmp_path_factory.mktemp("filestore") / "storage"
    with LocalHost() as host, filestore_stack(
            host, storage_dir=str(storage), threshold_bytes=THRESHOLD,
            max_body_bytes=MAX_BODY) as (mc, svc):
        yield App(svc, mc, storage)


def data(resp: http.client.HTTPResponse) -> bytes:
    return resp.data  # type: ignore[attr-defined]


def test_create_overwrite_get_delete_and_not_found(app: App) -> None:
    assert app.file("crud.txt").status == 404
    created = app.file("crud.txt", "PUT", b"first")
    assert created.status == 201 and data(created) == b""
    assert app.file("crud.txt", "PUT", b"second version").status == 204
    got = app.file("crud.txt")
    assert got.status == 200 and data(got) == b"second version"
    assert got.getheader("Content-Type") == "application/octet-stream"
    assert (app.storage / "files" / "crud.txt").read_bytes() == b"second version"
    assert app.file("crud.txt", "DELETE").status == 204
    assert app.file("crud.txt").status == 404
    assert app.file("crud.txt", "DELETE").status == 404
    assert app.cached("crud.txt") is None


def test_empty_file(app: App) -> None:
    assert app.file("empty", "PUT", b"").status == 201
    got = app.file("empty")
    assert got.status == 200 and data(got) == b"" and got.getheader("X-Cache") == "hit"
    assert app.cached("empty") == b""


def test_small_files_are_cached_and_large_ones_are_not(app: App) -> None:
    small, large = b"s" * (THRESHOLD - 1), bytes(range(256)) * (2 * THRESHOLD // 256)
    assert app.file("small", "PUT", small).getheader("X-Cache") == "stored"
    assert app.cached("small") == small
    assert app.file("large", "PUT", large).getheader("X-Cache") == "skipped"
    assert app.cached("large") is None
    got = app.file("large")
    assert data(got) == large and got.getheader("X-Cache") == "miss"
    assert app.file("small").getheader("X-Cache") == "hit"
    # Growing a cached file past the threshold drops the old cached copy.
    app.file("small", "PUT", large)
    assert app.cached("small") is None and data(app.file("small")) == large
    # Exactly the threshold is "not smaller than": not cached.
    assert app.file("edge", "PUT", b"e" * THRESHOLD).getheader("X-Cache") == "skipped"


def test_memcache_switch_per_request(app: App) -> None:
    assert app.file("sw", "PUT", b"v1", memcache="off").getheader("X-Cache") == "bypass"
    assert app.cached("sw") is None
    assert app.file("sw", memcache="on").getheader("X-Cache") == "miss"
    assert app.file("sw", "PUT", b"v2", memcache="on").getheader("X-Cache") == "stored"
    assert app.file("sw", memcache="off").getheader("X-Cache") == "bypass"
    by_query = app.request("GET", "/files/sw?memcache=0")
    assert by_query.getheader("X-Cache") == "bypass" and data(by_query) == b"v2"
    assert app.request("GET", "/files/sw?memcache=1").getheader("X-Cache") == "hit"
    assert app.file("sw", memcache="maybe").status == 400
    # The default (no header) is the service's `memcache` setting: on.
    assert app.file("sw").getheader("X-Cache") == "hit"
    deleted = app.file("sw", "DELETE", memcache="on")
    assert deleted.status == 204 and deleted.getheader("X-Cache") == "deleted"
    assert app.cached("sw") is None


@pytest.mark.parametrize("name", ["with space", "ünïcødé ✓", "100%", "what?", "a#b",
                                  "semi;colon&amp=1", "plus+sign", ".hidden", "..."])
def test_names_needing_quoting_round_trip(app: App, name: str) -> None:
    body = name.encode() * 3
    assert app.file(name, "PUT", body).status == 201
    assert data(app.file(name)) == body
    assert data(app.file(name, memcache="off")) == body
    assert (app.storage / "files" / name).read_bytes() == body
    assert app.file(name, "DELETE").status == 204


@pytest.mark.parametrize("path", [
    "/files/..%2F..%2Fetc%2Fpasswd", "/files/../x", "/files/..", "/files/%2e%2e",
    "/files/.", "/files/", "/files/a%2Fb", "/files/a%00b", "/files/%ff", "/files/" + "n" * 256,
    "/files/../../outside",
])
def test_unsafe_names_are_rejected_and_nothing_is_written_outside(
        app: App, path: str) -> None:
    before = sorted(p for p in app.storage.parent.rglob("*") if "files" not in p.parts)
    for method in ("PUT", "GET", "DELETE"):
        resp = app.request(method, path, b"evil" if method == "PUT" else None)
        assert resp.status == 400, (method, path, data(resp))
    after = sorted(p for p in app.storage.parent.rglob("*") if "files" not in p.parts)
    assert after == before
    assert not Path("/etc/passwd.tmp").exists()


def test_name_of_255_bytes_is_accepted(app: App) -> None:
    name = "é" * 127 + "x"  # 255 UTF-8 bytes
    assert app.file(name, "PUT", b"x").status == 201
    assert app.file(name, "DELETE").status == 204


def test_oversized_body_gets_413_and_the_limit_itself_is_fine(app: App) -> None:
    # The app answers from the declared length, before the body is sent: send none (a
    # client still sending would meet the closed connection, as intended).
    with socket.create_connection((app.svc.endpoint.host, app.svc.endpoint.port), 5) as s:
        s.sendall(b"PUT /files/big HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1))
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert app.file("big").status == 404
    assert app.file("big", "PUT", b"b" * MAX_BODY).status == 201


def test_health_stats_and_other_routes(app: App) -> None:
    health = app.request("GET", "/health")
    assert health.status == 200 and data(health) == b"ok\n"
    stats = app.stats()
    assert stats["config"]["threshold_bytes"] == THRESHOLD
    assert stats["config"]["memcached"] == f"127.0.0.1:{app.mc.endpoint.port}"  # type: ignore[union-attr]
    assert stats["requests"] >= 1 and stats["memcache_errors"] == 0
    assert app.request("GET", "/nothing").status == 404
    assert app.request("GET", "/files").status == 404
    post = app.request("POST", "/files/x", b"x")
    assert post.status == 405 and post.getheader("Allow") == "GET, PUT, DELETE"


def test_a_reader_never_sees_half_a_file(app: App) -> None:
    a, b = b"a" * (3 * THRESHOLD), b"b" * (2 * THRESHOLD)
    app.file("atomic", "PUT", a)
    stop = time.monotonic() + 1.0
    errors: list[str] = []

    def writer() -> None:
        while time.monotonic() < stop:
            for body in (b, a):
                if app.file("atomic", "PUT", body).status not in (201, 204):
                    errors.append("PUT failed")

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    while time.monotonic() < stop:
        got = data(app.file("atomic", memcache="off"))
        reads += 1
        if got not in (a, b):
            errors.append(f"torn read: {len(got)} bytes")
    thread.join()
    assert not errors and reads > 5
    assert list((app.storage / "tmp").iterdir()) == []


def test_memcached_failure_degrades_to_storage(tmp_path: Path) -> None:
    with LocalHost() as host, filestore_stack(host, storage_dir=str(tmp_path / "st")) as (
            mc, svc):
        app = App(svc, mc, tmp_path / "st")
        assert app.file("k", "PUT", b"cached").getheader("X-Cache") == "stored"
        assert mc is not None
        mc.stop()
        put = app.file("k2", "PUT", b"stored anyway")
        assert put.status == 201 and put.getheader("X-Cache") == "error"
        got = app.file("k2")
        assert got.status == 200 and data(got) == b"stored anyway"
        assert got.getheader("X-Cache") == "error"
        assert app.file("k", "DELETE").status == 204
        assert app.stats()["memcache_errors"] >= 3
