"""The JupyterLab explorer (`notebooks/explore.ipynb`).

- `widgets`    the explorer's menus and figures
- `data`       its numbers (`harness summary`'s, latency CDFs, series over time)
- `history`    the history explorer
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """`harness.analysis.explore.X` for the names of `widgets` (where they lived before the
    package was grouped: `from harness.analysis import explore` in a notebook still works).
    A submodule's name is left to the import system."""
    import importlib
    import importlib.util

    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(f"{__name__}.widgets"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
