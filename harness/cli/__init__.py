"""`harness` command line: run | validate | summary | compare | report | import | export |
hosts | verify | list.

The parser (`parser`), each group of subcommands' work (`running`, `results`,
`catalogue`), and the entry point (`entry.main`, the `harness` script)."""

from __future__ import annotations

from harness.cli.entry import main
from harness.cli.exits import (
    EXIT_FAILED_RUNS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from harness.cli.parser import build_parser

__all__ = ["EXIT_FAILED_RUNS", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_TERMINATED", "EXIT_USAGE",
           "build_parser", "main"]
