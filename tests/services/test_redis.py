"""Redis launcher against a real redis-server."""

from __future__ import annotations

import pytest

from harness.errors import ServiceError
from harness.services import RunningService
from harness.services.redis import redis_command
from tests.fixtures.servers import (
    StartServer,
)

pytestmark = pytest.mark.integration


def _cmd(svc: RunningService, *args: str) -> object:
    return redis_command(svc.endpoint.host, svc.endpoint.port, *args, auth=svc.endpoint.auth)


def test_set_then_get(redis_server: RunningService) -> None:
    assert _cmd(redis_server, "SET", "k", "hello") == "OK"
    assert _cmd(redis_server, "GET", "k") == "hello"
    assert _cmd(redis_server, "GET", "missing") is None
    assert redis_server.endpoint.kind == "redis"


def test_version_is_recorded(redis_server: RunningService) -> None:
    info = str(_cmd(redis_server, "INFO", "server"))
    assert f"redis_version:{redis_server.version}\r\n" in info
    major, minor, *_ = redis_server.version.split(".")
    assert major.isdigit() and minor.isdigit()


def test_defaults_take_no_snapshots(redis_server: RunningService) -> None:
    assert redis_server.config["save"] == ""
    assert redis_server.config["appendonly"] == "no"
    assert redis_server.config["maxmemory"] == "0"
    assert redis_server.config["maxmemory-policy"] == "noeviction"


def test_settings_are_applied(start_server: StartServer) -> None:
    svc = start_server(
        "redis", maxmemory="64mb", maxmemory_policy="allkeys-lru", appendonly=True,
        save="3600 1", io_threads=2,
    )
    assert _cmd(svc, "CONFIG", "GET", "maxmemory-policy") == ["maxmemory-policy", "allkeys-lru"]
    assert _cmd(svc, "CONFIG", "GET", "maxmemory") == ["maxmemory", str(64 * 1024 * 1024)]
    assert _cmd(svc, "CONFIG", "GET", "appendonly") == ["appendonly", "yes"]
    assert _cmd(svc, "CONFIG", "GET", "save") == ["save", "3600 1"]
    assert _cmd(svc, "CONFIG", "GET", "io-threads") == ["io-threads", "2"]
    assert svc.config["maxmemory-policy"] == "allkeys-lru"
    # Redis writes its files into the workdir, which stop() removes.
    assert _cmd(svc, "CONFIG", "GET", "dir") == ["dir", svc.workdir]


def test_appendfsync_and_extra_directives_reach_redis_and_the_manifest(
        start_server: StartServer) -> None:
    svc = start_server("redis", appendonly=True, appendfsync="always",
                       extra={"hz": 50, "lazyfree-lazy-eviction": True,
                              "latency-tracking": "no"})
    assert _cmd(svc, "CONFIG", "GET", "appendfsync") == ["appendfsync", "always"]
    assert _cmd(svc, "CONFIG", "GET", "hz") == ["hz", "50"]
    # As the server reports them, for the manifest's services.<name>.config.
    assert {k: svc.config[k] for k in ("appendfsync", "hz", "lazyfree-lazy-eviction",
                                       "latency-tracking")} == {
        "appendfsync": "always", "hz": "50", "lazyfree-lazy-eviction": "yes",
        "latency-tracking": "no"}


def test_extra_directives_are_checked_before_anything_starts(tmp_path) -> None:
    from harness.errors import SpecError
    from harness.spec import load_spec

    def problems(settings: str) -> str:
        spec = tmp_path / "s.yaml"
        spec.write_text("name: x\nworkload: redis_mix\nservices:\n  kv: {kind: redis, "
                        f"settings: {settings}}}\nrun: {{ops: 10}}\n")
        with pytest.raises(SpecError) as err:
            load_spec(spec)
        return str(err.value)

    assert "services.kv.settings.appendfsync: 'sometimes' is not one of" in problems(
        "{appendfsync: sometimes}")
    text = problems("{extra: {port: 1, appendonly: 'yes', Hz: 3, hz: [1]}}")
    for why in ("'port' is set by the launcher", "set 'appendonly' as the setting",
                "'Hz' is not a redis.conf directive name", "hz=[1] must be one line"):
        assert why in text, text


def test_bad_choice_is_refused_before_starting(start_server: StartServer) -> None:
    with pytest.raises(ServiceError, match="maxmemory_policy='lru' must be one of"):
        start_server("redis", maxmemory_policy="lru")
    with pytest.raises(ServiceError, match="appendonly"):
        start_server("redis", appendonly="yes")


def test_two_instances_at_once(start_server: StartServer) -> None:
    a = start_server("redis", name="a")
    b = start_server("redis", name="b")
    assert a.endpoint.port != b.endpoint.port
    _cmd(a, "SET", "k", "a")
    _cmd(b, "SET", "k", "b")
    assert (_cmd(a, "GET", "k"), _cmd(b, "GET", "k")) == ("a", "b")


@pytest.mark.parametrize(("kind", "value", "ok"), [
    ("redis", "64mb", True), ("redis", "1GB", True), ("redis", 0, True),
    ("redis", "1.5gb", False), ("redis", "-1", False), ("redis", "lots", False),
    ("redis_cluster", "64M", True), ("redis_cluster", "64 mb", False),
])
def test_validate_says_which_maxmemory_redis_would_refuse(kind: str, value: object,
                                                          ok: bool) -> None:
    """Redis refuses these only when it starts ('argument must be a memory value')."""
    from harness.services import SERVICES

    problems = SERVICES.get(kind).validate({"maxmemory": value})
    assert problems == ([] if ok else [f"maxmemory {value!r} is not a memory value such as "
                                       "'64mb' or '1gb' (0: no limit)"])
