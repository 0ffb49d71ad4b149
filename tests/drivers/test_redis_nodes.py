"""CLUSTER NODES as a layout (`harness.drivers.redis_nodes`), from a captured reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.drivers.redis import RespError
from harness.drivers.redis_nodes import layout, node_lines

CAPTURED = Path(__file__).parents[1] / "data" / "drivers" / "redis-7.0.15-cluster-nodes-3x1.txt"


def test_a_captured_reply_gives_each_masters_slots_and_its_replica() -> None:
    found = layout(CAPTURED.read_text(), "127.0.0.1")
    assert found.masters == ("127.0.0.1:46430", "127.0.0.1:36294", "127.0.0.1:45044")
    assert found.replicas == (("127.0.0.1:31231",), ("127.0.0.1:48706",), ("127.0.0.1:40056",))
    assert found.owner[0] == found.owner[5460] == 0 and found.owner[5461] == 1
    assert found.owner[16383] == 2 and -1 not in found.owner


def test_failed_replicas_migrating_slots_and_unknown_hosts() -> None:
    text = CAPTURED.read_text().replace(" slave a912", " slave,fail a912")
    text = text.replace("connected 0-5460", "connected 0-5460 [5460->-647c56c7]")
    text = text.replace("127.0.0.1:46430@56430", ":46430@56430")
    found = layout(text, "10.0.0.9")
    assert found.masters[0] == "10.0.0.9:46430" and found.owner[5460] == 0
    assert found.replicas[2] == ()  # its only replica failed


@pytest.mark.parametrize("bad", ["0-99999", "abc", "5-1"])
def test_a_slot_that_is_not_one_is_a_resp_error(bad: str) -> None:
    text = CAPTURED.read_text().replace("connected 0-5460", f"connected {bad}")
    with pytest.raises(RespError, match="not a slot range"):
        node_lines(text, "h")


def test_too_many_nodes_is_a_resp_error() -> None:
    line = "ab 127.0.0.1:1@2 master - 0 0 1 connected\n"
    with pytest.raises(RespError, match="more than 4000 nodes"):
        node_lines(line * 4001, "h")
