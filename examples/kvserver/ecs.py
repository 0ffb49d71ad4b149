"""The ECS: sets up the ring and moves data when a server joins or leaves.

Used by the harness's `command` service as its setup/add/remove hooks, or by hand:

    python -m examples.kvserver.ecs init   HOST:PORT,HOST:PORT,...
    python -m examples.kvserver.ecs add    MEMBERS NEW        (NEW is already running)
    python -m examples.kvserver.ecs remove MEMBERS LEAVING    (stop LEAVING afterwards)

MEMBERS is the ring before the change. Hand-over of a range from server A to server B:
lock the range on A (its PUTs get `server_write_lock`), copy it to B, give the new ring
to A first (A answers `server_not_responsible` from then on), then to B and the others,
unlock A and drop the copied pairs there. A PUT acknowledged by A before the lock is
copied; one refused under the lock is retried by its client at B: none is lost. Giving
A the ring first means no client can read a stale value from A after B took a write.
"""

from __future__ import annotations

import socket
import sys

from .ring import Ring, in_range


def admin(member: str, line: str, timeout_s: float = 600.0) -> str:
    host, _, port = member.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(line.encode() + b"\r\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    text = reply.decode().strip()
    if not text.startswith("ecs_ok"):
        raise RuntimeError(f"{member}: {line.split()[0]} answered {text!r}")
    return text


def publish(ring: Ring, order: list[str]) -> None:
    """Give the ring to the members in `order` first, then to the rest."""
    meta = ring.metadata()
    for m in [*order, *(m for m in ring.members if m not in order)]:
        admin(m, f"ecs_metadata {meta}")


def hand_over(first: int, last: int, giver: str, taker: str, new: Ring,
              leaving: str | None = None) -> int:
    rng = f"{first:032x} {last:032x}"
    admin(giver, f"ecs_lock {rng}")
    moved = int(admin(giver, f"ecs_transfer {rng} {taker}").split()[1])
    order = [giver, taker] if giver in new.members else [taker]
    if leaving:  # not in the new ring: told separately, first of all
        admin(leaving, f"ecs_metadata {new.metadata()}")
    publish(new, order)
    admin(giver, "ecs_unlock")
    admin(giver, f"ecs_drop {rng}")
    return moved


def init(members: list[str]) -> None:
    publish(Ring(members), [])


def add(members: list[str], new: str) -> int:
    old, ring = Ring(members), Ring([*members, new])
    first, last = ring.range_of(new)
    giver = _owner_at(old, last)
    admin(new, f"ecs_metadata {ring.metadata()}")  # nobody routes to it before publish
    return hand_over(first, last, giver, new, ring)


def remove(members: list[str], leaving: str) -> int:
    old = Ring(members)
    rest = [m for m in members if m != leaving]
    if not rest:
        raise RuntimeError("cannot remove the last server")
    ring = Ring(rest)
    first, last = old.range_of(leaving)
    return hand_over(first, last, leaving, _owner_at(ring, last), ring, leaving=leaving)


def _owner_at(ring: Ring, pos: int) -> str:
    """The member responsible for ring position `pos`."""
    for m in ring.members:
        if in_range(pos, *ring.range_of(m)):
            return m
    raise AssertionError("a ring covers every position")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("init", "add", "remove"):
        print(__doc__, file=sys.stderr)
        return 2
    members = [m for m in argv[1].split(",") if m]
    if argv[0] == "init":
        init(members)
        print(f"ring of {len(members)}")
    else:
        moved = (add if argv[0] == "add" else remove)(members, argv[2])
        print(f"{argv[0]} {argv[2]}: {moved} pairs handed over")
    return 0


if __name__ == "__main__":
    sys.exit(main())
