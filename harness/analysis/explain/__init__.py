"""What drives the tail (`harness explain`).

- `data`       the slow ops and what each run recorded beside them
- `analysis`   which factors separate the slow ops from the rest, tested as one family
- `text`       the findings in words
- `plots`      the figures
- `view`       the explorer's and the report's view
"""

from __future__ import annotations


def __getattr__(name: str) -> object:
    """`harness.analysis.explain.X` for the names of `analysis` (where they lived before the
    package was grouped: `from harness.analysis import explain` in a notebook still works).
    A submodule's name is left to the import system."""
    import importlib
    import importlib.util

    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(f"{__name__}.analysis"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
