"""What a manifest records about the machines and the kit (its inventory). Never credentials."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from harness import __version__
from harness.errors import HostError
from harness.hosts import Host
from harness.paths import project_root

_HOST_INFO = r"""
import json, os, platform, socket
def first(path, key):
    try:
        for line in open(path):
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
print(json.dumps({
    "hostname": socket.gethostname(),
    "os": platform.platform(),
    "kernel": platform.release(),
    "machine": platform.machine(),
    "python": platform.python_version(),
    "cpu_model": first("/proc/cpuinfo", "model name") or platform.processor(),
    "cpu_count": os.cpu_count(),
    "mem_total": first("/proc/meminfo", "MemTotal"),
}, allow_nan=False))
"""


def host_info(host: Host) -> dict[str, Any]:
    """Hostname, OS, kernel, CPU, memory and Python version of a host."""
    try:
        info = json.loads(host.run([host.python, "-c", _HOST_INFO], timeout=30).stdout)
    except (HostError, ValueError) as exc:
        return {"error": f"could not read host facts: {exc}"}
    info["harness_host"] = host.name
    info["address"] = host.address
    return info


def kit_info() -> dict[str, Any]:
    """The kit's version and the git commit of the checkout (dirty when modified)."""
    info: dict[str, Any] = {"version": __version__, "git_commit": None, "git_dirty": None}
    root = project_root()
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=10)
        if commit.returncode == 0:
            info["git_commit"] = commit.stdout.strip()
            status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                     "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10)
            info["git_dirty"] = bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info
