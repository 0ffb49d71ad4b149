"""Performance over time (`harness history`): change points per configuration.

- `runs`       the runs in time (or label) order, with their checks
- `changes`    the change points and the CI gate
- `text`       the findings in words
- `plots`      the history figures
- `report`     the report's history section
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """`harness.analysis.history.X` for the names of `changes` (where they lived before the
    package was grouped: `from harness.analysis import history` in a notebook still works).
    A submodule's name is left to the import system."""
    import importlib
    import importlib.util

    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(f"{__name__}.changes"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
