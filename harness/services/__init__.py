"""Service launchers: start and stop real servers on a Host.

The registry is explicit: each launcher is added here by name.
"""

from __future__ import annotations

from harness.registry import Registry
from harness.services.base import Endpoint, RunningService, Service, Setting

SERVICES: Registry[Service] = Registry("service")

__all__ = ["SERVICES", "Endpoint", "RunningService", "Service", "Setting"]
