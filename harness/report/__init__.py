"""The report: each study's notebook executed by papermill, assembled into one HTML and
one PDF (`build`); ``python -m harness.report`` runs it as `harness report` does."""

from harness.report.build import (
    ReportError,
    build_report,
    check_parameters,
    discover_notebooks,
    execute_notebook,
    render_notebook,
    venv_kernel,
)

__all__ = ["ReportError", "build_report", "check_parameters", "discover_notebooks",
           "execute_notebook", "render_notebook", "venv_kernel"]
