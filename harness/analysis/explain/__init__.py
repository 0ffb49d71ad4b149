"""What drives the tail (`harness explain`).

- `data`       the slow ops and what each run recorded beside them
- `analysis`   which factors separate the slow ops from the rest, tested as one family
- `text`       the findings in words
- `plots`      the figures
- `view`       the explorer's and the report's view
"""

from __future__ import annotations

from harness.analysis import forward_to

#: The names of `analysis`, which this package grew from (`harness.analysis.MOVED`).
__getattr__ = forward_to(__name__, "analysis")
