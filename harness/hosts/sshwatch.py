"""Noticing a silent SSH link: a machine whose packets stop (cable out, interface down, a
firewall dropping everything) sends no FIN or RST, so TCP would wait ~15 minutes before
the connection fails and every command over it would hang until then.

`LinkWatch` asks the server for a reply (an OpenSSH `keepalive@openssh.com` global
request, answered by any SSH server) every `PING_INTERVAL_S`; when one has had no answer
for `SILENT_AFTER_S` the link is declared silent and its transport closed, which ends
every blocked command and channel on it at once. A silent link is therefore noticed
within `NOTICE_BOUND_S` (= PING_INTERVAL_S + SILENT_AFTER_S) of its last packet.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import paramiko

PING_INTERVAL_S = 2.0
SILENT_AFTER_S = 6.0
#: The longest a silent link goes unnoticed.
NOTICE_BOUND_S = PING_INTERVAL_S + SILENT_AFTER_S


class LinkWatch:
    """A daemon thread pinging the transport `current()` returns; `on_silent(transport,
    reason)` is called (from that thread) when a ping goes unanswered."""

    def __init__(self, name: str, current: Callable[[], paramiko.Transport | None],
                 on_silent: Callable[[paramiko.Transport, str], None]) -> None:
        self._current, self._on_silent = current, on_silent
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"linkwatch-{name}",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(PING_INTERVAL_S):
            transport = self._current()
            if transport is None or not transport.is_active():
                continue  # closed, or being replaced: nothing to watch now
            answered = threading.Event()

            def ping(t: paramiko.Transport = transport, done: threading.Event = answered
                     ) -> None:
                # Returns on the reply (success or failure alike) or when t closes.
                with contextlib.suppress(Exception):
                    t.global_request("keepalive@openssh.com", wait=True)
                done.set()

            threading.Thread(target=ping, daemon=True).start()
            if not answered.wait(SILENT_AFTER_S) and not self._stop.is_set():
                self._on_silent(transport, f"no answer to an SSH keepalive for "
                                           f"{SILENT_AFTER_S:g} s: the link is silent")
