"""What the kit makes of the server's own end of its connection (`server_end`): the
address it dialed, or something in between. The servers themselves are in
tests/services/test_poolers.py."""

from __future__ import annotations

import ipaddress

from harness.services.pg_remote import dialed, server_end


def test_the_dialed_address_and_port_is_nothing_between() -> None:
    to = dialed("127.0.0.1", 5432)
    assert server_end("127.0.0.1", 5432, to) == (True, "127.0.0.1:5432")
    # An IPv4 client on a dual-stack socket: the server may see its end as mapped.
    assert server_end("::ffff:127.0.0.1", 5432, to) == (True, "127.0.0.1:5432")


def test_a_name_is_resolved_to_every_address_it_may_reach() -> None:
    to = dialed("localhost", 6432)
    assert (ipaddress.ip_address("127.0.0.1"), 6432) in to
    assert server_end("127.0.0.1", 6432, to)[0]


def test_another_port_another_address_or_a_socket_is_something_between() -> None:
    to = dialed("127.0.0.1", 6432)
    assert server_end("127.0.0.1", 5432, to) == (False, "127.0.0.1:5432")
    assert server_end("10.0.0.5", 6432, to) == (False, "10.0.0.5:6432")
    assert server_end("fd00::5", 6432, to) == (False, "[fd00::5]:6432")
    assert server_end(None, None, to) == (False, "a Unix socket")
    # Whatever a server answers, it is printed as text, never trusted as an address.
    assert server_end("not\x1baddress", 6432, to) == (False, "not\\x1baddress")
