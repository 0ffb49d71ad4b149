"""Emulated networks: network namespaces as machines, links with netem delay and loss
(`links`), TCP relays through them (`relay`, run as ``python -m harness.netem.relay``) and
what a killed run left behind (`cleanup`)."""

from harness.netem.links import (
    EMULATIONS,
    OWNER_FILE,
    PREFIX,
    PROFILES,
    SUBNET,
    Link,
    Member,
    NamespaceHost,
    NetemError,
    Network,
    free_subnet,
    ip,
    is_root,
    make_link,
    make_state_dir,
    netem_supported,
    new_tag,
    proc_start_time,
    require_root,
    start_relay,
)

__all__ = [
    "EMULATIONS", "OWNER_FILE", "PREFIX", "PROFILES", "SUBNET", "Link", "Member",
    "NamespaceHost", "NetemError", "Network", "free_subnet", "ip", "is_root", "make_link",
    "make_state_dir", "netem_supported", "new_tag", "proc_start_time", "require_root",
    "start_relay",
]
