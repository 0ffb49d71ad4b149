"""Your own build of a server: the `binary` setting of every launched server kind.

    services:
      kv: {kind: redis, host: server, settings: {binary: /opt/redis-dev/src/redis-server}}
    grid:
      services.kv.binary: [/usr/bin/redis-server, /opt/redis-dev/src/redis-server]

A path (absolute, or `~`), or a mapping of spec host -> path where hosts differ; unset,
the binary is found on the host's PATH as before. For PostgreSQL it names the `postgres`
executable, and initdb, psql and pg_basebackup are taken beside it. Each manifest records
the path run, its sha256 (computed on the machine that ran it) and the version the
server reports, so two builds in one interleaved grid are told apart by what ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.errors import ServiceError
from harness.hosts import Host
from harness.settings import Setting

BINARY_SETTING = Setting((str, dict, type(None)), None,
                         "the server's executable (your own build): a path, or spec host "
                         "-> path; None: found on PATH")


def binary_problems(value: Any) -> list[str]:
    """Why a `binary` value cannot be used (messages without a prefix)."""
    if value is None:
        return []
    paths = value.values() if isinstance(value, Mapping) else [value]
    if isinstance(value, Mapping) and not value:
        return ["binary: an empty mapping; give a path, or spec host -> path"]
    out = []
    for p in paths:
        if not isinstance(p, str) or not p.startswith(("/", "~/")) or "\n" in p:
            out.append(f"binary: {p!r} is not an absolute path (or one in ~)")
    return out


def binary_for(settings: Mapping[str, Any], host: Host, default: str) -> str:
    """The executable to run on `host`: the setting's path for it, else `default` (a
    name found on PATH)."""
    value = settings.get("binary")
    if isinstance(value, Mapping):
        value = value.get(host.name)
    if not value:
        return default
    return host.run(["sh", "-c", 'echo "$HOME"'], check=False).stdout.strip() + value[1:] \
        if value.startswith("~/") else value


def binary_missing(host: Host, path: str) -> str | None:
    """None when `path` is an executable file on `host` (or a name on its PATH)."""
    if "/" not in path:
        return None if host.which(path) else path
    ok = host.run(["test", "-x", path, "-a", "-f", path], check=False).ok
    return None if ok else f"{path} (not an executable file)"


def binary_record(host: Host, path: str) -> dict[str, Any]:
    """What the manifest records of the executable run: its path (resolved on `host`)
    and sha256."""
    script = 'p=$(command -v -- "$1") || exit 1; p=$(realpath -e -- "$p"); ' \
             'sha256sum -- "$p"'
    res = host.run(["sh", "-c", script, "sh", path], check=False)
    if not res.ok or not res.stdout.strip():
        raise ServiceError(f"{host.name}: cannot read the binary {path}: "
                           f"{(res.stderr or res.stdout).strip()}")
    digest, _, real = res.stdout.strip().partition("  ")
    return {"path": real, "sha256": digest}
