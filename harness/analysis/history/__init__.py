"""Performance over time (`harness history`): change points per configuration.

- `runs`       the runs in time (or label) order, with their checks
- `changes`    the change points
- `gate`       the CI gate: a worse level not yet accepted fails the job
- `text`       the findings in words
- `plots`      the history figures
- `report`     the report's history section
"""

from __future__ import annotations

from harness.analysis import forward_to

#: The names of `changes`, which this package grew from (`harness.analysis.MOVED`).
__getattr__ = forward_to(__name__, "changes")
