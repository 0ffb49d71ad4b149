"""A server that is one process on one port (memcached, standalone Redis): launching it,
waiting until it answers and recording its version and effective config are the same
for every such kind; a subclass says only how to run it and how to ask it."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any

from harness.hosts import Host
from harness.services._util import DEFAULT_READY_TIMEOUT_S, Launch, resolve_checked
from harness.services.base import Endpoint, RunningService, Service


class SingleServer(Service):
    def __init__(self, ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S) -> None:
        self.ready_timeout_s = ready_timeout_s

    @abc.abstractmethod
    def argv(self, host: Host, launch: Launch, port: int, s: Mapping[str, Any]) -> list[str]:
        """The server's command line for resolved settings `s`, listening on host:port."""

    @abc.abstractmethod
    def probe(self, address: str, port: int) -> None:
        """Return once the server answers; raise NotReady (or OSError) until then."""

    @abc.abstractmethod
    def describe(self, address: str, port: int, s: Mapping[str, Any]
                 ) -> tuple[str, dict[str, Any]]:
        """The running server's version and effective config (as it reports them, for
        the settings `s` it was started with), for the manifest."""

    def start(self, host: Host, name: str, settings: Mapping[str, Any]) -> RunningService:
        s = resolve_checked(self, settings)
        with Launch(host, self.kind, name) as launch:
            port = host.free_port()
            proc = launch.start(self.argv(host, launch, port, s))
            launch.wait_until_ready(proc, lambda: self.probe(host.address, port),
                                    timeout_s=self.ready_timeout_s)
            version, config = self.describe(host.address, port, s)
            endpoint = Endpoint(kind=self.kind, host=host.address, port=port)
            return launch.running(endpoint, version, config)
