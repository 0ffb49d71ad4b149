"""`external`: a server the harness did not start (an app on App Engine, one started by
hand), standing in for the service kind it `provides`.

It starts and stops nothing. `start` checks that the URL answers HTTP (any status: the
app need not have a /health route) and returns an Endpoint of the provided kind, with
the URL in `extra["url"]`, so a workload cannot tell it from a launched service.
"""

from __future__ import annotations

import http.client
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from harness.drivers.http import HTTPError, parse_url
from harness.drivers.replies import MAX_REPLY_BYTES, version_text
from harness.drivers.tls import client_context, handshake_problem
from harness.errors import ServiceError
from harness.hosts import Host
from harness.hosts.endpoint import TLSConfig
from harness.services._util import NotReady
from harness.services.base import Endpoint, RunningService, Service, Setting
from harness.services.tlsconf import TLS_SETTING, address_tls, tls_problems

PROBE_TIMEOUT_S = 5.0


def http_get(address: str, port: int, path: str, timeout_s: float = PROBE_TIMEOUT_S,
             tls: TLSConfig | None = None, max_bytes: int = MAX_REPLY_BYTES
             ) -> tuple[int, dict[str, str], bytes]:
    """GET `path` from the harness machine: (status, lower-case headers, body).

    Of the body at most `max_bytes` + 1 bytes are read: one more than `max_bytes` says
    the server sent more, which is left unread (`harness.drivers.replies`); the headers
    are bounded by http.client (100 of them, 64 KiB a line).
    OSError when nothing answers (refused, reset, timeout); NotReady when something
    answers but not with HTTP, so readiness polling treats both as "not yet".
    """
    conn = (http.client.HTTPSConnection(address, port, timeout=timeout_s,
                                        context=client_context(tls))
            if tls is not None else http.client.HTTPConnection(address, port,
                                                               timeout=timeout_s))
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return (resp.status, {k.lower(): v for k, v in resp.getheaders()},
                resp.read(max_bytes + 1))
    except http.client.HTTPException as exc:
        raise NotReady(f"not an HTTP answer from {address}:{port}: {exc!r}") from exc
    finally:
        conn.close()


class External(Service):
    kind = "external"
    binaries = ()
    settings: Mapping[str, Setting] = {
        "provides": Setting((str, type(None)), None,
                            "the service kind it stands in for, e.g. filestore"),
        "url": Setting((str, type(None)), None, "base URL, e.g. http://127.0.0.1:8080/ "
                       "(https:// over TLS)"),
        "tls": TLS_SETTING,
    }

    def provides(self, settings: Mapping[str, Any]) -> str:
        return settings.get("provides") or self.kind

    def validate(self, settings: Mapping[str, Any], *, name: str = "",
                 behind: Sequence[str] = ()) -> list[str]:
        """Both settings, and a URL this kit can use (checked before anything starts)."""
        provides, url = settings.get("provides"), settings.get("url")
        if not provides or not url:
            return ["set both `provides` (the service kind it stands in for) and `url`"]
        try:
            parse_url(url)
        except HTTPError as exc:
            return [str(exc)]
        return tls_problems(settings.get("tls"), at_address=True)

    def start(self, host: Host, name: str, settings: Mapping[str, Any]) -> RunningService:
        problems = self.validate(settings)
        if problems:
            raise ServiceError(f"external {name!r}: {problems[0]}")
        provides, url = settings["provides"], settings["url"]
        target = parse_url(url)
        tls = (address_tls(SimpleNamespace(name=name, settings=settings)) or TLSConfig()
               if target.tls else None)
        try:
            status, headers, _ = http_get(target.host, target.port, target.base_path + "health",
                                          tls=tls)
        except (OSError, NotReady) as exc:
            raise ServiceError(f"external {name!r}: {url} does not answer HTTP: {exc}. "
                               + (handshake_problem(exc) or "Start the app first, or fix "
                                  "the URL.")) from None
        endpoint = Endpoint(kind=provides, host=target.host, port=target.port,
                            extra={"url": url}, tls=tls)
        return RunningService(
            name=name, kind=self.kind, host=host, endpoint=endpoint,
            version=version_text(headers.get("server", "unknown")),
            config={"provides": provides, "url": url, "health_status": status},
            processes=[],
        )
