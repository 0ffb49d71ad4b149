"""Spec field `timeline` and the thread that runs its steps during a run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness.errors import SpecError
from harness.hosts import LocalHost
from harness.run.timeline import Timeline
from harness.services.base import Endpoint, RunningService
from harness.spec import TimelineEvent, load_spec

SPEC = """\
name: t
workload: kvstore
services:
  kv: {{kind: redis_cluster, settings: {{masters: 2{hosts}}}}}
run: {{duration_s: 10, warmup_s: 1}}
{timeline}
"""


def spec(tmp_path: Path, timeline: str, hosts: str = "") -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(SPEC.format(timeline=timeline, hosts=hosts))
    return path


def test_a_valid_timeline_is_read_in_order(tmp_path: Path) -> None:
    s = load_spec(spec(tmp_path, "timeline:\n  - {at_s: 2, action: add_node, service: kv}\n"
                                 "  - {at_s: 5.5, action: remove_node, service: kv, "
                                 "args: {node: 0}}"))
    assert s.timeline == (TimelineEvent(2.0, "add_node", "kv", {}),
                          TimelineEvent(5.5, "remove_node", "kv", {"node": 0}))


def test_timeline_problems_name_their_fields(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(spec(tmp_path, "timeline:\n  - {at_s: 2, action: reboot, service: kv}\n"
                                 "  - {at_s: 11, action: add_node, service: kv}\n"
                                 "  - {at_s: 1, action: add_node, service: db}\n"
                                 "  - {at: 1, action: add_node, service: kv}",
                       hosts=", hosts: [localhost, elsewhere]"))
    text = str(err.value)
    assert "timeline.0.action: 'reboot' is not an action of redis_cluster service 'kv'; " \
           "actions: ['add_node', 'remove_node']" in text
    assert "timeline.1.at_s: 11 s is not within the run (11 s)" in text
    assert "timeline.2.service: unknown service 'db'" in text
    assert "timeline.3.at: unknown field (did you mean 'at_s'?)" in text
    assert "services.kv.settings.hosts: unknown host 'elsewhere'" in text


def test_timeline_needs_a_duration(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(SPEC.format(timeline="timeline: [{at_s: 1, action: add_node, "
                                         "service: kv}]", hosts="")
                    .replace("duration_s: 10, warmup_s: 1", "ops: 100"))
    with pytest.raises(SpecError, match=r"timeline: needs run\.duration_s"):
        load_spec(path)


class _Scaled(RunningService):
    """A RunningService whose scale() only notes the call: the thread is under test."""

    def scale(self, action: str, args: Any) -> dict[str, Any]:
        if action == "fail":
            raise RuntimeError("no capacity")
        time.sleep(0.05)
        return {"did": action}


def test_steps_run_at_their_times_and_late_ones_are_skipped() -> None:
    svc = _Scaled("kv", "x", LocalHost(), Endpoint("x", "127.0.0.1", 1), "", {}, [])
    start = time.time_ns()
    said: list[str] = []
    tl = Timeline([TimelineEvent(0.1, "grow", "kv", {"host": "a"}),
                   TimelineEvent(0.0, "fail", "kv"), TimelineEvent(30.0, "late", "kv")],
                  {"kv": svc}, start, say=said.append).start()
    time.sleep(0.4)
    records = tl.finish()
    # Each step as it begins and ends, beside the live numbers (`harness run` prints them).
    steps = [ln.split("] ", 1)[1] for ln in said]
    assert steps[:3] == ["fail kv: started", "fail kv: FAILED: RuntimeError: no capacity",
                         "grow kv host=a: started"]
    assert len(steps) == 4 and steps[3].startswith("grow kv host=a: done in 0.")
    assert [r["action"] for r in records] == ["fail", "grow", "late"]
    assert records[0]["error"] == "RuntimeError: no capacity" and tl.errors
    grow = records[1]
    assert grow["result"] == {"did": "grow"} and grow["error"] is None
    assert grow["args"] == {"host": "a"}
    assert 0.1e9 <= grow["start_ns"] < grow["end_ns"] < 0.4e9
    assert records[2]["skipped"] == "the clients had finished"


@pytest.mark.parametrize(("timeline", "expected"), [
    # remove_node {node: 5} of 2 masters was an IndexError in the middle of the run.
    ("[{at_s: 1, action: remove_node, service: kv, args: {node: 5}}]",
     "timeline.0.args.node: there is no node 5 at 1 s: 2 nodes, 0 to 1 (or -1 to -2)"),
    ("[{at_s: 1, action: remove_node, service: kv}, "
     "{at_s: 2, action: remove_node, service: kv}]",
     "timeline.1: at 2 s kv has one node left; remove_node would remove the last"),
    ("[{at_s: 1, action: remove_node, service: kv, args: {node: x}}]",
     "timeline.0.args.node: expected int, got str 'x'"),
    ("[{at_s: 1, action: add_node, service: kv, args: {hots: a}}]",
     "timeline.0.args.hots: unknown setting (did you mean 'host'?); known: host"),
    ("[{at_s: 1, action: add_node, service: kv, args: {host: elsewhere}}]",
     "timeline.0.args.host: 'elsewhere' is not one of kv's hosts ['localhost']"),
])
def test_timeline_steps_a_service_cannot_take_are_refused(tmp_path: Path, timeline: str,
                                                         expected: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(spec(tmp_path, f"timeline: {timeline}"))
    assert any(expected in p for p in err.value.problems), err.value.problems


def test_a_node_added_earlier_can_be_removed(tmp_path: Path) -> None:
    s = load_spec(spec(tmp_path, "timeline: [{at_s: 1, action: add_node, service: kv}, "
                                 "{at_s: 2, action: remove_node, service: kv, "
                                 "args: {node: 2}}, {at_s: 3, action: remove_node, "
                                 "service: kv, args: {node: -2}}]"))
    assert len(s.timeline) == 3
