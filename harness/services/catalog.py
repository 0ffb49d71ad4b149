"""Every system package the kit declares, gathered from the service registry and the
tools list (`harness.services.packages`): what `harness list packages` prints and what
`tests/test_packaging.py` checks the installers and the manual's server table
(docs/servers.md) against."""

from __future__ import annotations

from harness.services import SERVICES
from harness.services.packages import TOOLS, SystemPackage


def server_packages() -> dict[str, tuple[SystemPackage, ...]]:
    """Service kind -> its declared packages (kinds that need none are left out)."""
    out = {}
    for name in SERVICES:
        declared = SERVICES.get(name).packages
        if declared:
            out[name] = declared
    return out


def all_packages() -> tuple[SystemPackage, ...]:
    """Every declared package once: the servers' first, then the tools."""
    seen: dict[str, SystemPackage] = {}
    for declared in server_packages().values():
        for pkg in declared:
            seen.setdefault(pkg.debian, pkg)
    for pkg in TOOLS:
        seen.setdefault(pkg.debian, pkg)
    return tuple(seen.values())


def readme_table() -> str:
    """The manual's server table (docs/servers.md), as `harness list packages --markdown`
    prints it."""
    rows = ["| service kind | Debian/Ubuntu packages | conda-forge packages |",
            "|---|---|---|"]
    for kind, declared in server_packages().items():
        debian = " ".join(f"`{p.debian}`" for p in declared)
        conda = " ".join(f"`{p.conda}`" for p in declared if p.conda) or "-"
        rows.append(f"| `{kind}` | {debian} | {conda} |")
    debian = " ".join(f"`{p.debian}`" for p in TOOLS)
    conda = " ".join(f"`{p.conda}`" for p in TOOLS if p.conda)
    rows.append(f"| tools and tests | {debian} | {conda} |")
    return "\n".join(rows)
