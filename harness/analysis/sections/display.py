"""What a study's notebook cells display: Markdown and HTML with the report's markers.

IPython is imported on call: these objects only exist in a notebook.
"""

from __future__ import annotations

from typing import Any

#: Output metadata key of a study's "not run" note; the report ends the section there.
NOT_RUN_MARKER = "harness_not_run"
#: Output metadata key of an optional section with nothing to show: the report leaves the
#: whole section out (e.g. "imported results" when nothing was imported).
OMIT_MARKER = "harness_omit_section"
#: Output metadata key of a part of a section that could not be drawn (one experiment of
#: several): the rest of the section stands, and `harness report` names it and exits 1.
FAILED_PART_MARKER = "harness_failed_part"
#: Output metadata key of detail the report moves to its appendix (shown in place in
#: JupyterLab): e.g. the measurement checks per configuration.
APPENDIX_MARKER = "harness_appendix"


def markdown(text: str, *, not_run: bool = False, omit: bool = False) -> Any:
    """Markdown; `not_run` ends the study's report section here, `omit` leaves an
    optional section out of the report."""
    from IPython.display import Markdown

    meta = {**({NOT_RUN_MARKER: True} if not_run else {}),
            **({OMIT_MARKER: True} if omit else {})}
    return Markdown(text, metadata=meta or None)


def failed_part(what: str, exc: BaseException) -> Any:
    """The note that stands in for a part of a section that raised `exc` (`what`: e.g.
    "experiment `x`"), marked so the report counts it as a failure."""
    from IPython.display import Markdown

    from harness.text import printable

    error = printable(f"{type(exc).__name__}: {exc}").replace("`", "'")
    return Markdown(f"**Could not be drawn: {what}.** `{error}`. The rest of this section "
                    "does not depend on it.", metadata={FAILED_PART_MARKER: what})


def html(text: str, *, appendix: bool = False) -> Any:
    """HTML; `appendix` moves it to the report's appendix."""
    from IPython.display import HTML

    return HTML(text, metadata={APPENDIX_MARKER: True} if appendix else None)
