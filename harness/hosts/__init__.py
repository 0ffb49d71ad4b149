"""Machines: one Host interface for this machine and for targets over SSH.

`base` (the interface) <- `local`, `ssh` (implementations) <- `connect` (picks one from a
`HostSpec`). The names below are the package's public face; `SSHHost` is imported from
`harness.hosts.ssh` where needed, so that paramiko loads only when SSH is used.
"""

from harness.hosts.base import CommandResult, Host, Process, check_result
from harness.hosts.connect import connect_host
from harness.hosts.hostspec import LOCAL_NAMES, HostSpec
from harness.hosts.local import LocalHost, free_port

__all__ = [
    "LOCAL_NAMES",
    "CommandResult",
    "Host",
    "HostSpec",
    "LocalHost",
    "Process",
    "check_result",
    "connect_host",
    "free_port",
]
