"""Was each measurement sound: the measurement checks.

- `registry`   the registered checks (`CHECKS`), their thresholds, and judging a group
- `runfacts`   what the checks read of each run (from the data's one pass)
- `tails`      Hill's tail index: the heavy-tail check
- `words`      the failed checks in words: a verdict's caveat, tables, warning lines
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """`harness.analysis.checks.X` for the names of `registry` (where they lived before the
    package was grouped: `from harness.analysis import checks` in a notebook still works).
    A submodule's name is left to the import system."""
    import importlib
    import importlib.util

    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(f"{__name__}.registry"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
