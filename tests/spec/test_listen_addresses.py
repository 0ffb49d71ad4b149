"""No spelling of "every interface" gets past the listen check (issue 48 item 6): held
to what the operating system's own resolver makes of each spelling (getaddrinfo with
AI_NUMERICHOST, as a server's bind does), not to our own list, and to a real bind."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.spec.access import listen_problem

#: The review's spellings and their relatives.
EVERY = ["0.0.0.0", "::", "[::]", "::ffff:0.0.0.0", "::ffff:0:0", "::0.0.0.0", "0:0::0",
         "0x0", "0", "000.000.000.000", "0.0", "0x0.0", "０.０.０.０", "::ffff:０.0.0.0",
         "*", "any", "ANY", " 0.0.0.0 ", "::%lo"]


def _os_reads_as_unspecified(text: str) -> bool:
    """Whether this machine's resolver reads `text` as an address that binds every
    interface (0.0.0.0, ::, or :: mapping 0.0.0.0)."""
    try:
        infos = socket.getaddrinfo(text, None, proto=socket.IPPROTO_TCP,
                                   flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return False
    for family, *_, sockaddr in infos:
        ip = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if ip.is_unspecified or (family == socket.AF_INET6 and ip.ipv4_mapped is not None
                                 and ip.ipv4_mapped.is_unspecified):
            return True
    return False


@pytest.mark.parametrize("address", EVERY)
def test_every_spelling_of_every_interface_is_refused(address: str) -> None:
    assert listen_problem(address) is not None


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.5", "::1", "fd00::5",
                                     "::ffff:10.0.0.5", "fe80::1%eth0", "db-1.example",
                                     "localhost"])
def test_a_machines_own_address_or_name_is_fine(address: str) -> None:
    assert listen_problem(address) is None


def test_the_mapped_spelling_really_binds_every_interface() -> None:
    """Why ::ffff:0.0.0.0 is refused: a dual-stack socket bound there takes connections
    to 127.0.0.1 (any IPv4 address of the machine), as 0.0.0.0 would."""
    srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        srv.bind(("::ffff:0.0.0.0", 0))
    except OSError as exc:
        srv.close()
        pytest.skip(f"no dual-stack IPv6 here ({exc})")
    with srv:
        srv.listen(1)
        port = srv.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=30):
            conn, _ = srv.accept()
            conn.close()
    assert listen_problem("::ffff:0.0.0.0") is not None


_PIECES = st.sampled_from(["0", "00", "0x0", "0x00", "000", ".", ":", "::", "ffff",
                           "0.0.0.0", "０", "．", "1", "127", "[", "]", "%lo", "f", "0:0"])


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(_PIECES, min_size=1, max_size=8).map("".join))
def test_whatever_the_resolver_reads_as_every_interface_is_refused(text: str) -> None:
    if _os_reads_as_unspecified(text):
        assert listen_problem(text) is not None, text


def test_the_oracle_knows_the_spellings() -> None:
    """The resolver itself reads these as every interface (so the property above is
    tested on spellings that matter, not only on ones it rejects)."""
    assert all(_os_reads_as_unspecified(a) for a in ("0", "0x0", "0.0", "::ffff:0:0",
                                                     "::0.0.0.0", "000.000.000.000"))
    assert not _os_reads_as_unspecified("127.0.0.1")
