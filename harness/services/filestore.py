"""`filestore`: the reference file-store app (harness.apps.filestore) under uvicorn.

uvicorn is a production ASGI server (uvloop event loop, worker processes), so the study
measures an app the way it would be served, not a development server. The app's
memcached is the `memcached` service listed before it in the spec (`peers`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.drivers.replies import MAX_REPLY_BYTES, json_value
from harness.errors import ServiceError
from harness.hosts import Host
from harness.services._util import (
    DEFAULT_READY_TIMEOUT_S,
    Launch,
    NotReady,
    resolve_checked,
)
from harness.services.base import Endpoint, RunningService, Service, Setting
from harness.services.external import http_get

APP = "harness.apps.filestore:app"
#: Prints what serves the app: uvicorn picks httptools and uvloop when they are installed.
_PROBE = ("import json, importlib.util as u, uvicorn, harness.apps.filestore; "
          "print(json.dumps({'uvicorn': uvicorn.__version__, "
          "'http': 'httptools' if u.find_spec('httptools') else 'h11', "
          "'loop': 'uvloop' if u.find_spec('uvloop') else 'asyncio'}, allow_nan=False))")


def url_of(address: str, port: int) -> str:
    return f"http://[{address}]:{port}/" if ":" in address else f"http://{address}:{port}/"


def health(address: str, port: int) -> None:
    status, _, _ = http_get(address, port, "/health")
    if status != 200:
        raise NotReady(f"GET /health answered {status}")


def app_config(body: bytes) -> dict[str, Any]:
    """The `config` of the app's /stats reply (`http_get`'s body), as the manifest
    records it: `truncated` in its place where the reply is larger than the bound, not
    a JSON object, or holds numbers that are not finite (kept as text)."""
    if len(body) > MAX_REPLY_BYTES:
        return {"truncated": f"/stats answered more than {MAX_REPLY_BYTES:,} bytes: not read"}
    try:
        data = json_value(body)
    except (ValueError, RecursionError) as exc:
        return {"truncated": f"/stats answered no JSON: {str(exc)[:200]}"}
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        return {"truncated": "/stats answered no config object"}
    return config


class FileStore(Service):
    kind = "filestore"
    binaries = ()
    needs_peers = True
    settings: Mapping[str, Setting] = {
        "storage_dir": Setting((str, type(None)), None,
                               "directory standing in for cloud storage; None: one in the "
                               "service's temporary workdir (removed at stop)"),
        "memcache": Setting((bool,), True, "memcache use of requests that do not say"),
        "threshold_bytes": Setting((int,), 102400, "files smaller than this are cached",
                                   low=0, high=1 << 30, why="1 GiB"),
        "workers": Setting((int,), 1, "uvicorn worker processes", low=1, high=256,
                           why="far more than any machine's cores"),
        # The app holds a request body in memory.
        "max_body_bytes": Setting((int,), 32 * 1024 * 1024, "larger PUTs get 413", low=1,
                                  high=1 << 30, why="1 GiB, held in memory"),
        "fsync": Setting((bool,), False, "fsync each stored file before it is renamed"),
    }

    def __init__(self, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> None:
        self.ready_timeout_s = ready_timeout_s

    def missing_binaries(self, host: Host, settings: Mapping[str, Any] | None = None
                         ) -> list[str]:
        ok = host.run([host.python, "-c", _PROBE], check=False).ok
        return [] if ok else [f"uvicorn and the harness for {host.python}"]

    def start(self, host: Host, name: str, settings: Mapping[str, Any], *,
              peers: Mapping[str, Endpoint] | None = None) -> RunningService:
        s = resolve_checked(self, settings)
        if s["workers"] < 1:
            raise ServiceError(f"filestore {name!r}: workers must be at least 1")
        mc = (peers or {}).get("memcached")
        if s["memcache"] and mc is None:
            raise ServiceError(
                f"filestore {name!r}: memcache is on but no memcached service is started "
                "before it; list a `kind: memcached` service above it in the spec, or set "
                "memcache: false")
        with Launch(host, self.kind, name) as launch:
            probe = host.run([host.python, "-c", _PROBE], check=False)
            if not probe.ok:
                raise launch.fail(f"{host.python} cannot import uvicorn and the harness "
                                  f"(pip install 'uvicorn>=0.29' and the kit): "
                                  f"{probe.stderr.strip()[-300:]}")
            port = host.free_port()
            storage = s["storage_dir"] or f"{launch.workdir}/storage"
            env = {
                "FILESTORE_STORAGE_DIR": storage,
                "FILESTORE_MEMCACHE": "on" if s["memcache"] else "off",
                "FILESTORE_THRESHOLD_BYTES": str(s["threshold_bytes"]),
                "FILESTORE_MAX_BODY_BYTES": str(s["max_body_bytes"]),
                "FILESTORE_FSYNC": "1" if s["fsync"] else "0",
            }
            if mc is not None:
                mc_host = f"[{mc.host}]" if ":" in mc.host else mc.host
                env["FILESTORE_MEMCACHED"] = f"{mc_host}:{mc.port}"
            argv = [host.python, "-m", "uvicorn", APP, "--host", host.address,
                    "--port", str(port), "--workers", str(s["workers"]), "--no-access-log"]
            proc = launch.start(argv, env=env)
            launch.wait_until_ready(proc, lambda: health(host.address, port),
                                    timeout_s=self.ready_timeout_s)
            _, _, body = http_get(host.address, port, "/stats")
            server = json.loads(probe.stdout)
            config = {**s, "storage_dir": storage, "memcached": env.get("FILESTORE_MEMCACHED"),
                      "app": APP, "server": server, "app_config": app_config(body)}
            url = url_of(host.address, port)
            endpoint = Endpoint(kind=self.kind, host=host.address, port=port,
                                extra={"url": url})
            return launch.running(endpoint, f"uvicorn {server['uvicorn']}", config)
