"""The `filestore` launcher (uvicorn + the app, with its memcached peer) and `external`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ServiceError
from harness.hosts import LocalHost, free_port
from harness.services import SERVICES
from harness.services.external import http_get
from tests.fixtures.filestore import app_started_by_hand, filestore_stack
from tests.fixtures.servers import processes_in, tcp_listeners

pytestmark = pytest.mark.integration


def test_starts_uvicorn_on_the_host_address_with_its_memcached(tmp_path: Path) -> None:
    with LocalHost() as host, filestore_stack(host, workers=2) as (mc, app):
        assert mc is not None
        ep = app.endpoint
        assert ep.kind == "filestore" and ep.extra["url"] == f"http://127.0.0.1:{ep.port}/"
        assert tcp_listeners(ep.port) == {"127.0.0.1"}
        assert app.version.startswith("uvicorn ") and app.version[8].isdigit()
        cfg = app.info()["config"]
        assert cfg["memcached"] == f"127.0.0.1:{mc.endpoint.port}"
        assert cfg["app_config"]["memcached"] == cfg["memcached"]
        assert cfg["workers"] == 2 and cfg["server"]["loop"] in ("uvloop", "asyncio")
        assert cfg["storage_dir"].startswith(app.workdir)
        status, _, body = http_get(ep.host, ep.port, "/stats")
        assert status == 200 and json.loads(body)["config"]["memcache_default"] is True
        # A supervisor and two workers, all in the service's workdir.
        assert len(processes_in(app.workdir)) >= 3
        workdir = app.workdir
    assert processes_in(workdir) == []
    assert not Path(workdir).exists()


def test_memcache_on_without_a_memcached_peer_is_refused() -> None:
    with LocalHost() as host, pytest.raises(ServiceError) as info:
        SERVICES.get("filestore").start(host, "lonely", {}, peers={})
    assert "no memcached service is started before it" in str(info.value)


def test_without_memcached_requests_say_none(tmp_path: Path) -> None:
    storage = tmp_path / "st"
    with LocalHost() as host, filestore_stack(host, memcached=False,
                                              storage_dir=str(storage)) as (_, app):
        conn_args = (app.endpoint.host, app.endpoint.port)
        status, headers, _ = http_get(*conn_args, "/files/nothing")
        assert status == 404 and headers["x-cache"] == "bypass"
        assert app.config["memcached"] is None
    # A storage_dir given in the settings is the user's: it outlives the service.
    assert (storage / "files").is_dir()


def test_bad_settings_are_refused_before_anything_starts() -> None:
    with LocalHost() as host:
        with pytest.raises(ServiceError, match="unknown setting"):
            SERVICES.get("filestore").start(host, "x", {"wrokers": 2}, peers={})
        with pytest.raises(ServiceError, match="must be int"):
            SERVICES.get("filestore").start(host, "x", {"workers": "2", "memcache": False})


def test_app_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    with LocalHost() as host, pytest.raises(ServiceError) as info:
        SERVICES.get("filestore").start(
            host, "broken", {"memcache": False, "storage_dir": str(blocker)})
    message = str(info.value)
    assert "exited before it became ready" in message
    assert "file-not-dir" in message  # uvicorn's log: the app's startup error


def test_external_stands_in_for_an_app_started_by_hand(tmp_path: Path) -> None:
    external = SERVICES.get("external")
    assert external.provides({"provides": "filestore", "url": "x"}) == "filestore"
    (tmp_path / "st").mkdir()
    with app_started_by_hand(tmp_path / "st") as url, LocalHost() as host:
        svc = external.start(host, "mine", {"provides": "filestore", "url": url})
        assert svc.endpoint.kind == "filestore" and svc.endpoint.extra["url"] == url
        assert svc.endpoint.host == "127.0.0.1" and svc.version == "uvicorn"
        assert svc.processes == [] and svc.alive()
        svc.stop()  # does nothing: the app is the user's
        assert http_get(svc.endpoint.host, svc.endpoint.port, "/health")[0] == 200


def test_external_refuses_a_url_nothing_answers_or_it_cannot_use() -> None:
    external = SERVICES.get("external")
    with LocalHost() as host:
        url = f"http://127.0.0.1:{free_port()}/"
        with pytest.raises(ServiceError, match="does not answer HTTP"):
            external.start(host, "gone", {"provides": "filestore", "url": url})
        with pytest.raises(ServiceError, match="only http:// and https://"):
            external.start(host, "ftp", {"provides": "filestore", "url": "ftp://x/"})
        with pytest.raises(ServiceError, match="set both"):
            external.start(host, "half", {"url": url})
    # The spec checks the same before anything starts.
    assert external.validate({"provides": "filestore", "url": "http://h:0/"}) == [
        "'http://h:0/': bad port (0 is not a TCP port)"]
    assert external.validate({"url": "http://h/"}) == [
        "set both `provides` (the service kind it stands in for) and `url`"]
