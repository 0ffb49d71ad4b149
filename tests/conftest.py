"""Shared fixtures live in tests/fixtures/, one module per concern.

`make test` runs the suite in two parts: the tests below marked `serial` alone, and the
rest in parallel worker processes (pytest-xdist, a file per worker at a time). The
serial ones assert on time or CPU (rates, send lag, per-second lines, CPU shares with a
hog beside them, latency SLOs, deadlines) or start a browser or JupyterLab, so other
tests' load on the same cores would make them fail for the wrong reason."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures.sshd",
    "tests.fixtures.sshd_variants",
    "tests.fixtures.machines",
    "tests.fixtures.servers",
    "tests.fixtures.rawdata",
    "tests.fixtures.engines",
    "tests.fixtures.browser",
    "tests.fixtures.byhand",
]

#: Test files (relative to tests/) whose tests time things or share the CPU on purpose.
SERIAL = frozenset({
    "loadgen/test_open_loop.py", "run/test_telemetry.py",
    "analysis/checks/test_measurement_checks.py", "run/test_capacity.py", "run/test_live.py",
    "run/test_faults.py", "hosts/test_procstat.py", "loadgen/test_loadgen.py",
    "netem/test_netem.py", "test_lab.py", "test_explore_lab.py",
    "workloads/test_kvstore_native.py", "studies/kvstore/test_elastic.py",
    "studies/cluster/test_runs.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        rel = Path(str(item.fspath)).relative_to(root).as_posix()
        if rel in SERIAL:
            item.add_marker(pytest.mark.serial)
