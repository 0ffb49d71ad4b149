"""Shared fixtures live in tests/fixtures/, one module per concern."""

pytest_plugins = [
    "tests.fixtures.sshd",
    "tests.fixtures.sshd_variants",
    "tests.fixtures.machines",
    "tests.fixtures.servers",
    "tests.fixtures.rawdata",
    "tests.fixtures.engines",
    "tests.fixtures.browser",
]
