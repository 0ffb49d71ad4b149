"""The harness's exception hierarchy.

Every error a user can cause or meet carries a message that says what to do; the CLI
prints it without a traceback and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""


class SpecError(HarnessError):
    """An experiment spec is invalid; carries every problem found, each `file:field: message`."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class RegistryError(HarnessError):
    """Unknown or duplicate name in a registry (workloads, services, drivers)."""


class HostError(HarnessError):
    """A host could not be reached, or a command on it failed."""


class HostKeyError(HostError):
    """An SSH host key is unknown or does not match known_hosts."""


class CommandError(HostError):
    """A command exited non-zero; `result` holds its output."""

    def __init__(self, message: str, result: object):
        self.result = result
        super().__init__(message)


class ServiceError(HarnessError):
    """A server could not be started, did not become ready, or is missing."""


class WorkloadError(HarnessError):
    """A workload could not prepare or run."""


class ResultsError(HarnessError):
    """Raw results are missing, corrupt or of an unknown schema version."""


class SchemaVersionError(ResultsError):
    """A manifest has a schema_version this kit does not know."""


class ImportFormatError(HarnessError):
    """An imported file holds nothing recognisable in the named format."""


class ExportError(HarnessError):
    """An export cannot be written as asked (e.g. its output would land in the raw results)."""
