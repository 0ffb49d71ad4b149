"""A free port whose cluster bus port (+10000) is free too, on a host's address: where a
Redis Cluster node listens (`harness.services.redis_cluster`)."""

from __future__ import annotations

from harness.errors import ServiceError
from harness.hosts import Host

# Prints a port p such that p and p + 10000 (the cluster bus port, which must stay
# below 65536) were both free a moment ago on the address in argv[1].
_PAIR = """
import random, socket, sys
def free(p):
    with socket.socket() as s:
        try:
            s.bind((sys.argv[1], p))
        except OSError:
            return False
    return True
rng = random.SystemRandom()
for _ in range(500):
    p = rng.randint(20000, 55535)
    if free(p) and free(p + 10000):
        print(p)
        break
"""


def free_port_pair(host: Host) -> int:
    """A free port whose cluster bus port (+10000) is free too, on `host`'s address."""
    out = host.run([host.python, "-c", _PAIR, host.address]).stdout.strip()
    if not out:
        raise ServiceError(f"{host.name}: no free port pair (p, p + 10000) found")
    return int(out)
