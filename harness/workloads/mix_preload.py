"""The preload of a get/set mix: every key set once before the runs, in pipelined
batches (one round trip per batch, not per key: the driver coalesces the writes), with
the workload client's own encoders (`harness.workloads.kv_mix`)."""

from __future__ import annotations

from typing import Any

from harness.errors import WorkloadError
from harness.services.base import Endpoint

#: Sets per pipelined batch.
PREPARE_BATCH = 1000
PREPARE_BATCH_TLS = 100


async def preload(cls: Any, server: str, endpoint: Endpoint, keys: list[bytes], sizes: Any,
                  tails: list[bytes]) -> None:
    """Set each of `keys` to a value of its `sizes` (the set request's head from
    `cls.set_head`, then its tail) on `endpoint`; WorkloadError naming the first key the
    server did not store."""
    # memcached -Z drops a connection that pipelines a few hundred requests over TLS at
    # once (1.6.18: close_notify, then its replies): smaller batches there.
    step = PREPARE_BATCH if endpoint.tls is None else PREPARE_BATCH_TLS
    conn = await cls.open(endpoint)
    futs: list[Any] = []
    try:
        for lo in range(0, len(keys), step):
            batch = keys[lo:lo + step]
            futs = [conn.call(cls.set_head(k, int(sizes[lo + i])) + tails[lo + i])
                    for i, k in enumerate(batch)]
            for k, fut in zip(batch, futs, strict=True):
                reply = await fut
                if reply != cls.stored:
                    raise WorkloadError(f"{server} answered {reply!r} to set {k!r}")
    finally:
        conn.close()
        # A failure leaves the batch's other replies unread: read their outcomes, or
        # asyncio prints "Future exception was never retrieved" for each of them.
        for fut in futs:
            fut.add_done_callback(_retrieved)


def _retrieved(fut: Any) -> None:
    if not fut.cancelled():
        fut.exception()
