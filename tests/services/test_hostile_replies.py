"""Servers at an address that answer what the kit asks before, between and after runs
with far too much, for ever, nested, not finite or not the protocol (issue 48 #3).

Each hostile server is a real TCP server (`tests.fixtures.hostile`): in front of a real
redis-server or memcached started by hand, passing the workload's traffic through and
answering INFO, CONFIG GET or `stats` itself; or with nothing behind it, answering every
request with what the test hands it. What must hold: the reply is read to its bounds
(`harness.drivers.replies`) and no further, counted in bytes and entries kept; the run's
manifest is strict JSON of bounded size that says what was cut; and whatever the server
says, the kit answers with one of its named errors, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.cli import main as cli_main
from harness.drivers.redis import ClusterClient, RespError
from harness.drivers.replies import MAX_ENTRIES, MAX_REPLY_BYTES, MAX_VERSION_CHARS
from harness.drivers.respscan import MAX_DEPTH, ReplyScan
from harness.errors import ServiceError
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest
from harness.services import SERVICES
from harness.services._util import NotReady
from harness.services.command import PROBE_BYTES
from harness.services.command import probe as command_probe
from harness.services.external import http_get
from harness.services.memcached import memcached_stats, memcached_version
from harness.services.redis import RespProblem, redis_identity, redis_read
from harness.services.redis_cluster import slot_owners
from tests.fixtures.byhand import ByHand, start_memcached, start_redis
from tests.fixtures.hostile import (
    HostileFront,
    array,
    bulk,
    endless,
    hostile_config,
    hostile_info,
    hostile_stats,
    memcached_answers,
    redis_answers,
    scripted,
)
from tests.fixtures.servers import require_service


def strict(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def _spec(tmp_path: Path, workload: str, kind: str, address: str) -> Path:
    path = tmp_path / "hostile.yaml"
    path.write_text(f"name: hostile\nworkload: {workload}\nhosts: {{client: localhost}}\n"
                    f"services:\n  kv: {{kind: {kind}, address: '{address}'}}\n"
                    "clients: {hosts: [client], processes: 1, connections: 1}\n"
                    "params: {key_space: 50}\nrepetitions: 1\n"
                    "run: {ops: 100, warmup_ops: 0}\n")
    return path


def _run(tmp_path: Path, workload: str, kind: str, address: str) -> tuple[dict[str, Any], int]:
    raw = tmp_path / "raw"
    spec = _spec(tmp_path, workload, kind, address)
    assert cli_main(["run", str(spec), "--out", str(raw), "--no-progress", "-q"]) == 0
    (run_dir,) = iter_run_dirs(raw)
    text = (run_dir / "manifest.json").read_text()
    man = read_manifest(run_dir)
    assert man.status == "complete" and man.counts["measured"] == 100
    return strict(text), len(text.encode())


# --- runs against hostile servers at an address ----------------------------------------

@pytest.mark.integration
def test_a_redis_answering_200000_info_lines_and_400000_config_entries(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand]) -> None:
    """The review's case: INFO of 200,000 lines with a counter `nan`, CONFIG GET * of
    400,000 entries. Before: 2 min 53 s, 484 MB, a 20 MB manifest holding `NaN`."""
    require_service("redis", LocalHost())
    real = by_hand(start_redis(tmp_path, ""))
    info, config = hostile_info(200_000), hostile_config(400_000)
    assert len(info) > 16 * MAX_REPLY_BYTES and len(config) > 7 * MAX_REPLY_BYTES
    with HostileFront(("127.0.0.1", real.port), redis_answers(info, config)) as front:
        data, size = _run(tmp_path, "redis_mix", "redis", front.address)
    assert size < 1 << 20, f"a manifest of {size:,} bytes"
    kv = data["services"]["kv"]
    assert kv["version"] == "7.0.15"
    # CONFIG GET *: the entries that came whole before the bound, and why no more.
    assert len(kv["config"]) <= MAX_ENTRIES // 2 + 1
    assert kv["config"]["setting-0"] == "value 0"
    assert "CONFIG GET * larger than" in kv["config"]["truncated"]
    # INFO: the counters read to the bound; the ones that are no numbers named, not NaN.
    tele = data["telemetry"]
    delta = tele["counters"]["kv"]["delta"]
    assert 0 < len(delta) <= MAX_ENTRIES
    assert "keyspace_misses" not in delta and "keyspace_hits" not in delta
    notes = " ".join(tele["notes"])
    assert "INFO larger than 1,048,576 bytes" in notes
    assert "keyspace_misses='nan'" in notes and "keyspace_hits='inf'" in notes


@pytest.mark.integration
def test_a_memcached_answering_100000_stats(
        tmp_path: Path, by_hand: Callable[[ByHand], ByHand]) -> None:
    require_service("memcached", LocalHost())
    real = by_hand(start_memcached())
    stats = hostile_stats(100_000)
    with HostileFront(("127.0.0.1", real.port), memcached_answers(stats, stats),
                      protocol="text") as front:
        data, size = _run(tmp_path, "memcache_mix", "memcached", front.address)
    assert size < 1 << 20, f"a manifest of {size:,} bytes"
    config = data["services"]["kv"]["config"]
    assert len(config) <= MAX_ENTRIES + 1 and config["get_misses"] == "nan"
    assert "stats settings: larger than 1,048,576 bytes" in config["truncated"]
    tele = data["telemetry"]
    assert "get_misses" not in tele["counters"]["kv"]["delta"]
    assert "get_misses='nan'" in " ".join(tele["notes"])


# --- replies read to their bounds and no further ------------------------------------------

def _address(front: HostileFront) -> tuple[str, int]:
    return "127.0.0.1", front.port


def test_an_endless_reply_is_read_to_its_bound_and_no_further() -> None:
    """A server that never stops: each read ends at its bound, in bytes or entries."""
    def redis(reply: Callable[[], Iterator[bytes]]) -> HostileFront:
        return scripted(lambda words: reply())

    with redis(lambda: endless(b"$999999999\r\n", b"x")) as front:
        text, cut = redis_read(*_address(front), "INFO")
    assert cut and len(text) == MAX_REPLY_BYTES - len(b"$999999999\r\n")
    with redis(lambda: endless(b"*999999999\r\n", bulk(b"x"))) as front:
        items, cut = redis_read(*_address(front), "CONFIG", "GET", "*")
    assert cut and len(items) == MAX_ENTRIES - 1  # the array itself is an item
    nested = b"*1\r\n" * MAX_DEPTH + bulk(b"x")  # each element one array too deep
    with (redis(lambda: endless(b"*999999999\r\n", nested)) as front,
          pytest.raises(RespProblem, match=f"deeper than {MAX_DEPTH}")):
        redis_read(*_address(front), "CLUSTER", "SLOTS")
    with scripted(lambda words: endless(b"", b"STAT a 1\r\n"), "text") as front:
        stats = memcached_stats(*_address(front))
    assert len(stats) == 1 and stats.cut[0].startswith("stats: larger than 1,048,576")

    def distinct(words: list[bytes]) -> Iterator[bytes]:
        for i in range(0, 1 << 40, 1000):
            yield b"".join(b"STAT s%d 1\r\n" % j for j in range(i, i + 1000))

    with scripted(distinct, "text") as front:
        stats = memcached_stats(*_address(front))
    assert len(stats) == MAX_ENTRIES and "more than 4,096 entries" in stats.cut[1]
    with (scripted(lambda words: endless(b"VERSION ", b"9"), "text") as front,
          pytest.raises(NotReady, match="more than 256 bytes")):
        memcached_version(*_address(front))
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"
    with scripted(lambda w: endless(http, b"y") if w[:1] == [b"GET"] else None,
                  "text") as front:
        status, _, body = http_get(*_address(front), "/stats")
    assert status == 200 and len(body) == MAX_REPLY_BYTES + 1  # one more: "it was longer"
    with (scripted(lambda words: endless(b"", b"z"), "text") as front,
          pytest.raises(NotReady, match="without a line end") as err):
        command_probe(*_address(front), "line", "PING")
    read = int(str(err.value).split(" answered ")[1].split(" bytes")[0].replace(",", ""))
    assert PROBE_BYTES < read <= PROBE_BYTES + 4096


class _Counted(bytearray):
    """A reply buffer that counts the bytes its line-end searches look at."""

    looked = 0

    def find(self, sub: Any, start: Any = 0, *args: Any) -> int:
        at = super().find(sub, start, *args)
        self.looked += (at if at >= 0 else len(self)) - start
        return at


@pytest.mark.parametrize(("entries", "chunk"), [(2000, 1), (20_000, 7),
                                               (400_000, 1 << 10), (400_000, 1 << 16)])
def test_a_reply_is_scanned_once_whatever_its_chunks(entries: int, chunk: int) -> None:
    """A CONFIG GET of `entries` arriving in chunks of `chunk` bytes: each byte looked at
    about once (parsing the whole buffer after each chunk, as before, looked at it
    n / chunk times: 7.8 MB in 64 KiB chunks, 119 times)."""
    reply = hostile_config(entries)
    buf, scan = _Counted(), ReplyScan(max_items=10**6)
    done = False
    for at in range(0, len(reply), chunk):
        buf += reply[at:at + chunk]
        done = scan.feed(buf)
    assert done and not scan.cut and scan.items == entries + 1
    assert buf.looked <= 2 * len(reply), f"{buf.looked:,} bytes looked at"
    value, cut = scan.value(buf)
    assert len(value) == entries and not cut


def test_a_long_line_is_searched_for_its_end_once() -> None:
    """A 2 MB status line in 1 KiB chunks: each search for its end starts where the
    last one stopped (from its start each time: 1,000 times the line)."""
    reply = b"+" + b"a" * (2 << 20) + b"\r\n"
    buf, scan = _Counted(), ReplyScan()
    for at in range(0, len(reply), 1 << 10):
        buf += reply[at:at + (1 << 10)]
        done = scan.feed(buf)
    assert done and buf.looked <= 2 * len(reply), f"{buf.looked:,} bytes looked at"


# --- whatever a server says: one named error, or a bounded record --------------------

def _identity(front: HostileFront) -> tuple[str, dict[str, Any]]:
    spec = SimpleNamespace(name="kv", address=front.address, auth=None, settings={})
    return redis_identity(spec, *_address(front), None)


@pytest.mark.parametrize(("name", "info", "config", "says"), [
    ("an INFO of nested arrays", b"*1\r\n" * 20 + b":1\r\n", None, "deeper than"),
    ("a length that is no number", b"$12x\r\nhello\r\n", None, "not a RESP number"),
    ("a negative length", b"$-7\r\n", None, "a RESP length of -7"),
    ("no RESP", b"HTTP/1.1 200 OK\r\n", None, "not a RESP reply"),
    ("a bulk string not ended", b"$3\r\nabcdef\r\n", None, "not ended by CRLF"),
    ("an integer for INFO", b":12\r\n", None, "answered int, not text"),
    ("an integer for CONFIG GET", None, b":12\r\n", "answered int, not a list"),
])
def test_a_redis_saying_anything_is_one_named_error_or_a_bounded_record(
        name: str, info: bytes | None, config: bytes | None, says: str) -> None:
    base = bulk(b"redis_version:7.0.15\r\n")

    def answer(words: list[bytes]) -> bytes:
        if words[0].upper() == b"PING":
            return b"+PONG\r\n"
        if words[0].upper() == b"INFO":
            return info if info is not None else base
        return config if config is not None else array([b"maxmemory", b"0"])

    with scripted(answer) as front:
        if config is None:
            with pytest.raises(ServiceError, match=says) as err:
                _identity(front)
            assert str(err.value).startswith(f"services.kv at {front.address}: ")
        else:
            version, recorded = _identity(front)
            assert version == "7.0.15" and says in recorded["truncated"]
            strict(json.dumps(recorded))


def test_a_long_version_and_long_settings_are_cut_and_said_so() -> None:
    long_value = b"v" * 5000

    def answer(words: list[bytes]) -> bytes:
        if words[0].upper() == b"PING":
            return b"+PONG\r\n"
        if words[0].upper() == b"INFO":
            return bulk(b"redis_version:" + b"7" * 500 + b"\r\n")
        return array([b"dir", long_value, b"requirepass", b"secret!!", b"k" * 2000, b"x"])

    with scripted(answer) as front:
        version, config = _identity(front)
    assert version.startswith("7" * MAX_VERSION_CHARS + " (truncated at 100 characters)")
    assert len(config["dir"]) == 1024 and "requirepass" not in config
    assert "setting dir longer than 1,024 characters" in config["truncated"]


@pytest.mark.parametrize(("reply", "says"), [
    (array([b"x"]), "CLUSTER SLOTS entry 0 is not"),
    (b"*1\r\n*3\r\n:0\r\n:1000000000000\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n",
     "CLUSTER SLOTS entry 0"),
    (b"*1\r\n*3\r\n:5\r\n:2\r\n*2\r\n$0\r\n\r\n:7000\r\n", "CLUSTER SLOTS entry 0"),
    (b"*1\r\n*3\r\n:0\r\n:2\r\n*2\r\n$0\r\n\r\n:99999\r\n", "CLUSTER SLOTS entry 0"),
    (b"*2000\r\n" + b"".join(b"*3\r\n:%d\r\n:%d\r\n*2\r\n$0\r\n\r\n:%d\r\n" % (i, i, 1 + i)
                             for i in range(2000)), "more than 1000 masters"),
    (b":7\r\n", "not a slot map"),
])
def test_a_slot_map_that_is_not_one_is_refused(reply: bytes, says: str) -> None:
    """CLUSTER SLOTS as the kit asks it (attach) and as its cluster client does (every
    client, while it runs): refused in words, the client's slot map untouched."""
    def answer(words: list[bytes]) -> bytes:
        return {b"PING": b"+PONG\r\n", b"INFO": bulk(b"redis_version:7.0.15\r\n"),
                b"CONFIG": array([])}.get(words[0].upper(), reply)

    with scripted(answer) as front:
        with pytest.raises(RespProblem, match=says):
            slot_owners(*_address(front))
        spec = SimpleNamespace(name="kv", address=front.address, auth=None, settings={},
                               observed=False)
        with pytest.raises(ServiceError, match=f"no cluster slot map .*{says}"):
            SERVICES.get("redis_cluster").attach(LocalHost(), spec, None)
        client = ClusterClient([_address(front)])

        async def refresh() -> None:
            try:
                await client.refresh()
            finally:
                client.close()

        with pytest.raises(ConnectionError, match=says):
            asyncio.run(refresh())
        assert client.slots == [None] * len(client.slots)


def test_an_http_server_with_an_endless_body_and_a_long_server_header(
        tmp_path: Path) -> None:
    reply = (b"HTTP/1.1 200 OK\r\nServer: " + b"s" * 10_000 + b"\r\n"
             b"Content-Type: text/plain\r\n\r\n")
    with scripted(lambda w: endless(reply, b"y") if w[:1] == [b"GET"] else None,
                  "text") as front:
        svc = SERVICES.get("external").start(
            LocalHost(), "app", {"provides": "filestore",
                                 "url": f"http://{front.address}/"})
    assert svc.version == "s" * MAX_VERSION_CHARS + " (truncated at 100 characters)"
    strict(json.dumps(svc.info()))


def test_file_store_stats_that_are_not_its_config_are_said_so() -> None:
    from harness.services.filestore import app_config

    assert app_config(b'{"config": {"threshold_bytes": 5}}') == {"threshold_bytes": 5}
    assert app_config(b'{"config": {"x": NaN}}') == {"x": "NaN"}
    assert "more than 1,048,576 bytes" in app_config(b" " * (MAX_REPLY_BYTES + 1))["truncated"]
    assert "no JSON" in app_config(b"[" * 100_000)["truncated"]
    assert app_config(b'["config"]') == {"truncated": "/stats answered no config object"}


def test_a_nested_reply_of_any_depth_up_to_the_bound_reads() -> None:
    reply = b"*1\r\n" * MAX_DEPTH + b":5\r\n"
    scan = ReplyScan()
    assert scan.feed(reply)
    value, cut = scan.value(reply)
    for _ in range(MAX_DEPTH):
        value = value[0]
    assert value == 5 and not cut
    with pytest.raises(RespError, match="deeper"):
        ReplyScan().feed(b"*1\r\n" * (MAX_DEPTH + 1) + b":5\r\n")
