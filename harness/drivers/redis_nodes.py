"""A Redis Cluster's layout from CLUSTER NODES: each master's slots and its replicas.

CLUSTER NODES lists every node, replicas included, whatever they have replicated so far
(CLUSTER SLOTS leaves out a replica whose replication offset is still 0, as it is
before the first write, and CLUSTER SHARDS calls it `loading`), one line per node:
``<id> <host:port@bus[,hostname]> <flags> <master id or -> <ping> <pong> <epoch> <link>
<slot or first-last> ...``. A node that failed, is in a handshake or has no address is
left out; so are slots being migrated (``[slot->-id]``), which their owner still serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.drivers.redis import MAX_MASTERS, SLOTS, RespError

_GONE = ("fail", "handshake", "noaddr")
#: Nodes a layout may name: `MAX_MASTERS`, each with a few replicas.
MAX_NODES = MAX_MASTERS * 4


@dataclass(frozen=True)
class NodeLine:
    node_id: str
    address: str  # host:port
    flags: tuple[str, ...]
    master_id: str  # '' for a master
    slots: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Layout:
    """`masters` ("host:port", in the order of their first slot), the index of each
    slot's master (-1: none), and each master's replicas' addresses."""

    masters: tuple[str, ...]
    owner: tuple[int, ...]
    replicas: tuple[tuple[str, ...], ...]


def node_lines(text: str, asked_host: str) -> list[NodeLine]:
    """CLUSTER NODES' lines; a node that does not know its own host is `asked_host`."""
    out: list[NodeLine] = []
    for line in text.splitlines():
        parts = line.split()
        if len(out) >= MAX_NODES:
            raise RespError(f"CLUSTER NODES names more than {MAX_NODES} nodes")
        if len(parts) < 8:
            continue
        addr = parts[1].split("@", 1)[0].split(",", 1)[0]
        host, sep, port = addr.rpartition(":")
        if not sep or not port.isdigit():
            raise RespError(f"CLUSTER NODES: {parts[1]!r} is not host:port")
        slots = []
        for item in parts[8:]:
            if item.startswith("["):
                continue
            first, _, last = item.partition("-")
            last = last or first
            a, b = (int(first), int(last)) if first.isdigit() and last.isdigit() else (-1, -1)
            if not 0 <= a <= b < SLOTS:
                raise RespError(f"CLUSTER NODES: {item!r} is not a slot range")
            slots.append((a, b))
        out.append(NodeLine(parts[0], f"{host or asked_host}:{port}",
                            tuple(parts[2].split(",")), "" if parts[3] == "-" else parts[3],
                            tuple(slots)))
    return out


def layout(text: str, asked_host: str) -> Layout:
    """The cluster as one node's CLUSTER NODES `text` shows it (see the module)."""
    lines = [n for n in node_lines(text, asked_host) if not set(n.flags) & set(_GONE)]
    masters = sorted((n for n in lines if "master" in n.flags and n.slots),
                     key=lambda n: min(n.slots))
    index = {m.node_id: i for i, m in enumerate(masters)}
    owner = [-1] * SLOTS
    for i, m in enumerate(masters):
        for a, b in m.slots:
            owner[a:b + 1] = [i] * (b - a + 1)
    replicas: list[list[str]] = [[] for _ in masters]
    for n in lines:
        if "slave" in n.flags and n.master_id in index:
            replicas[index[n.master_id]].append(n.address)
    return Layout(tuple(m.address for m in masters), tuple(owner),
                  tuple(tuple(sorted(r)) for r in replicas))
