"""A server that is one process on one port (memcached, standalone Redis): launching it,
waiting until it answers and recording its version and effective config are the same
for every such kind; a subclass says only how to run it and how to ask it."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from harness.hosts import Host
from harness.hosts.endpoint import Credentials
from harness.services._util import DEFAULT_READY_TIMEOUT_S, Launch, resolve_checked
from harness.services.base import Endpoint, RunningService, Service
from harness.services.ownbuild import binary_for, binary_missing, binary_record
from harness.services.tlsconf import server_files


class SingleServer(Service):
    def __init__(self, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> None:
        self.ready_timeout_s = ready_timeout_s

    @abc.abstractmethod
    def argv(self, host: Host, launch: Launch, endpoint: Endpoint, s: Mapping[str, Any]
             ) -> list[str]:
        """The server's command line for resolved settings `s`, listening at `endpoint`
        and admitting its credentials (if any)."""

    @abc.abstractmethod
    def probe(self, endpoint: Endpoint) -> None:
        """Return once the server answers; raise NotReady (or OSError) until then."""

    @abc.abstractmethod
    def describe(self, endpoint: Endpoint, s: Mapping[str, Any]
                 ) -> tuple[str, dict[str, Any]]:
        """The running server's version and effective config (as it reports them, for
        the settings `s` it was started with), for the manifest."""

    @staticmethod
    def tls_paths(launch: Launch) -> tuple[str, str]:
        """Where `start` put the server's certificate and key (with `tls`)."""
        return f"{launch.workdir}/tls-cert.pem", f"{launch.workdir}/tls-key.pem"

    def credentials(self) -> Credentials | None:
        """What clients must authenticate with on a server this kit starts (a kind that
        can require a password draws one per start); None: the kind has none."""
        return None

    def start(self, host: Host, name: str, settings: Mapping[str, Any]) -> RunningService:
        s = resolve_checked(self, settings)
        with Launch(host, self.kind, name) as launch:
            # TLS only, with a certificate of a CA made for this start (`tlsconf`).
            tls = server_files(host, launch.workdir, [host.address])[0] if s.get(
                "tls") else None
            endpoint = Endpoint(kind=self.kind, host=host.address, port=host.free_port(),
                                auth=self.credentials(), tls=tls)
            argv = self.argv(host, launch, endpoint, s)
            argv[0] = binary_for(s, host, argv[0])  # your own build, where the spec names one
            proc = launch.start(argv)
            launch.wait_until_ready(proc, lambda: self.probe(endpoint),
                                    timeout_s=self.ready_timeout_s)
            version, config = self.describe(endpoint, s)
            config["binary"] = binary_record(host, argv[0])
            return launch.running(endpoint, version, config)

    def missing_binaries(self, host: Host, settings: Mapping[str, Any] | None = None
                         ) -> list[str]:
        """The server's executable (the `binary` setting's, or its name on PATH)."""
        path = binary_for(settings or {}, host, self.binaries[0])
        missing = binary_missing(host, path)
        return [missing] if missing else []
