"""What the runs of one `harness run` share (`RunContext`), what each run ends as
(`RunOutcome`), and its id."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.hosts import Host
from harness.run.agentctl import AgentPool
from harness.run.inflight import ExperimentLock
from harness.run.serverpool import ServerPool
from harness.spec import RunPlan


@dataclass(frozen=True)
class RunOutcome:
    plan: RunPlan
    run_dir: Path
    status: str
    measured_ops: int
    throughput_ops_s: float
    latency_p50_ms: float
    latency_p99_ms: float
    error_rate: float
    error: str | None
    #: Open loop: measured ops intended and never sent, and the p99 of the send lag.
    unsent: int = 0
    send_lag_p99_ms: float | None = None


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


#: How long a workload's `prepare` (and `baseline`) may wait on the servers before the
#: run fails; a line names the servers every `PREPARE_NOTE_S` meanwhile.
PREPARE_TIMEOUT_S = 300.0


PREPARE_NOTE_S = 10.0


@dataclass
class RunContext:
    """What every run of one `harness run` shares: hosts, their facts, client dirs."""

    hosts: dict[str, Host]
    infos: dict[str, Any]
    client_hosts: list[Host]
    workdirs: dict[str, str]
    kit: dict[str, Any]
    #: The experiment's lock and state file: what this process started, for a kill.
    lock: ExperimentLock
    #: Local directory for copies being collected (listed in the state file).
    scratch: str
    #: The running server sets, by configuration (`harness.run.serverpool`).
    pool: ServerPool
    #: Client machines holding records not yet copied: their work directories stay,
    #: holding only the files of those clients (their names' prefixes, `runNNNNN-cNNN.`).
    keep_workdirs: dict[str, set[str]] = field(default_factory=dict)
    #: One agent per client machine, for every run (`harness.run.agentctl`).
    agents: AgentPool = field(default_factory=AgentPool)
    #: Each server-only machine's server of /proc snapshots, for every run of the grid
    #: (`harness.run.telemetry`); closed with the agents.
    snapshot_links: dict[str, Any] = field(default_factory=dict)


def run_id_for(plan: RunPlan) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{plan.config_id[:60]}-r{plan.repetition:03d}-{secrets.token_hex(3)}"


def left_over(lock: ExperimentLock) -> str:
    """What a lock's state file still lists, for a message."""
    st = lock.state
    parts = []
    if st.runs:
        parts.append(f"{len(st.runs)} unwritten run(s)")
    if st.servers:
        parts.append(f"{len(st.servers)} server process(es)")
    if st.workdirs:
        parts.append(f"{len(st.workdirs)} client work director(ies)")
    return ", ".join(parts) or "nothing"
