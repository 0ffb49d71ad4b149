"""System packages, declared once: each server kind's on its service class (`packages`),
and here the tools the kit and its tests need besides the servers.

`harness.services.catalog` gathers them; everything that installs or names them is
checked against it by `tests/test_packaging.py`: `scripts/ensure-system-packages.sh`
(make setup), `.ci/run`, `environment.yml`, the manual's server table (docs/servers.md) and the test
fixtures.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SystemPackage:
    """One package: its Debian/Ubuntu name, its conda-forge name (None when conda has
    none or the kit needs none from conda), and what shows it is installed, in the form
    `scripts/ensure-system-packages.sh` probes: a command, `lib:NAME`, `jar:NAME`,
    `font:NAME` or `header:PATH` (below /usr/include)."""

    debian: str
    conda: str | None
    probe: str
    why: str


MEMCACHED = SystemPackage("memcached", "memcached", "memcached", "the memcached server")
REDIS_SERVER = SystemPackage("redis-server", "redis-server", "redis-server", "the Redis server")
REDIS_TOOLS = SystemPackage("redis-tools", None, "redis-cli",
                            "redis-cli (cluster create/reshard; conda's redis-server has it)")
POSTGRESQL = SystemPackage("postgresql", "postgresql", "initdb", "the PostgreSQL server")

#: What the kit and its tests need besides the servers.
TOOLS: tuple[SystemPackage, ...] = (
    SystemPackage("openssh-server", "openssh", "sshd", "target machines in the tests"),
    SystemPackage("iproute2", None, "ip", "network namespaces (netem, test machines)"),
    SystemPackage("poppler-utils", "poppler", "pdftoppm", "rendering report pages to check"),
    SystemPackage("libpango-1.0-0", "pango", "lib:libpango-1.0.so.0", "WeasyPrint's PDF"),
    SystemPackage("libpangoft2-1.0-0", None, "lib:libpangoft2-1.0.so.0",
                  "WeasyPrint's PDF (conda's pango has it)"),
    SystemPackage("libharfbuzz-subset0", None, "lib:libharfbuzz-subset.so.0",
                  "WeasyPrint's font subsetting (conda's pango brings harfbuzz)"),
    SystemPackage("fonts-dejavu-core", None, "font:DejaVuSans.ttf", "the report's font"),
    SystemPackage("default-jre-headless", None, "java",
                  "HdrHistogram's own log reader checks `harness export hdr`"),
    SystemPackage("libhdrhistogram-java", None, "jar:hdrhistogram.jar",
                  "HdrHistogram's own log reader checks `harness export hdr`"),
    SystemPackage("gcc", None, "gcc", "builds the native load-generator core (optional)"),
    SystemPackage("libssl-dev", "openssl", "header:openssl/ssl.h",
                  "OpenSSL's headers: TLS in the native core (optional; without them the "
                  "Python engine measures TLS)"),
    SystemPackage("nutcracker", None, "nutcracker",
                  "twemproxy, a memcached proxy: tests and experiments/deployment/"),
    SystemPackage("pgbouncer", "pgbouncer", "pgbouncer",
                  "a PostgreSQL pooler: tests and experiments/deployment/"),
    SystemPackage("haproxy", None, "haproxy",
                  "a TCP proxy before Redis and PostgreSQL: tests and experiments/deployment/"),
    SystemPackage("pgpool2", None, "pgpool",
                  "pgpool-II, another PostgreSQL pooler: tests and experiments/deployment/"),
    SystemPackage("prometheus", None, "prometheus",
                  "scrapes `harness run --metrics` in the tests (its HTTP API is read back)"),
    SystemPackage("openssl", None, "openssl",
                  "CAs and certificates of the TLS tests' servers started by hand "
                  "(conda's openssl has it)"),
    SystemPackage("stress-ng", None, "stress-ng",
                  "a CPU hog beside runs in the tests (telemetry's other_cpu, the checks)"),
    SystemPackage("strace", None, "strace",
                  "signals and kills at exact system calls in the tests (`harness run` is "
                  "killed at each fsync of a run's write)"),
    SystemPackage("chromium", None, "chromium",
                  "JupyterLab in a real browser in the tests (headless, driven by "
                  "Playwright; never a browser it downloads)"),
)
