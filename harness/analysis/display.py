"""What a study's notebook cells display: Markdown and HTML with the report's markers.

IPython is imported on call: these objects only exist in a notebook.
"""

from __future__ import annotations

from typing import Any

from harness.analysis.studies import NOT_RUN_MARKER, OMIT_MARKER


def markdown(text: str, *, not_run: bool = False, omit: bool = False) -> Any:
    """Markdown; `not_run` ends the study's report section here, `omit` leaves an
    optional section out of the report."""
    from IPython.display import Markdown

    meta = {**({NOT_RUN_MARKER: True} if not_run else {}),
            **({OMIT_MARKER: True} if omit else {})}
    return Markdown(text, metadata=meta or None)


def html(text: str) -> Any:
    from IPython.display import HTML

    return HTML(text)
