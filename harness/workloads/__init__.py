"""Workloads: one module per study. The registry is explicit."""

from __future__ import annotations

from harness.registry import Registry
from harness.workloads.base import Workload, WorkloadClient
from harness.workloads.cluster import Cluster
from harness.workloads.datastore_memcache import DatastoreMemcache
from harness.workloads.filestore import FileStore
from harness.workloads.kvstore import KVStore
from harness.workloads.memcache_mix import MemcacheMix
from harness.workloads.redis_mix import RedisMix
from harness.workloads.ycsb import Ycsb

WORKLOADS: Registry[Workload] = Registry("workload")
WORKLOADS.add("cluster", Cluster())
WORKLOADS.add("datastore_memcache", DatastoreMemcache())
WORKLOADS.add("filestore", FileStore())
WORKLOADS.add("kvstore", KVStore())
WORKLOADS.add("memcache_mix", MemcacheMix())
WORKLOADS.add("redis_mix", RedisMix())
WORKLOADS.add("ycsb", Ycsb())

__all__ = ["WORKLOADS", "Workload", "WorkloadClient"]
