"""Workloads: one module per study. The registry is explicit."""

from __future__ import annotations

from harness.registry import Registry
from harness.workloads.base import Workload, WorkloadClient
from harness.workloads.datastore_memcache import DatastoreMemcache
from harness.workloads.filestore import FileStore

WORKLOADS: Registry[Workload] = Registry("workload")
WORKLOADS.add("datastore_memcache", DatastoreMemcache())
WORKLOADS.add("filestore", FileStore())

__all__ = ["WORKLOADS", "Workload", "WorkloadClient"]
