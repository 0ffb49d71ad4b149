"""Open the host a spec describes: local, or SSH (paramiko imported only then)."""

from __future__ import annotations

from harness.hosts.base import Host
from harness.hosts.hostspec import HostSpec
from harness.hosts.local import LocalHost


def connect_host(spec: HostSpec) -> Host:
    """Open the host a spec describes: LocalHost for `localhost`, else SSHHost."""
    if spec.is_local:
        return LocalHost(spec.name, python=spec.python)
    from harness.hosts.ssh import SSHHost  # paramiko is only imported when SSH is used

    return SSHHost.connect(spec)
