"""The JupyterLab explorer (`notebooks/explore.ipynb`).

- `widgets`    the explorer's menus and figures
- `data`       its numbers (`harness summary`'s, latency CDFs, series over time)
- `history`    the history explorer
"""

from __future__ import annotations

from harness.analysis import forward_to

#: The names of `widgets`, which this package grew from (`harness.analysis.MOVED`).
__getattr__ = forward_to(__name__, "widgets")
