"""Service launchers: start and stop real servers on a Host.

The registry is explicit: each launcher is added here by name.
"""

from __future__ import annotations

from harness.registry import Registry
from harness.services.base import Endpoint, RunningService, Service, Setting
from harness.services.command import Command
from harness.services.external import External
from harness.services.filestore import FileStore
from harness.services.memcached import Memcached
from harness.services.pg_cluster import PgCluster
from harness.services.postgres import Postgres
from harness.services.redis import Redis
from harness.services.redis_cluster import RedisCluster

SERVICES: Registry[Service] = Registry("service")
SERVICES.add("command", Command())
SERVICES.add("external", External())
SERVICES.add("filestore", FileStore())
SERVICES.add("memcached", Memcached())
SERVICES.add("pg_cluster", PgCluster())
SERVICES.add("postgres", Postgres())
SERVICES.add("redis", Redis())
SERVICES.add("redis_cluster", RedisCluster())

__all__ = ["SERVICES", "Endpoint", "RunningService", "Service", "Setting"]
