"""The batch report: execute every notebook with papermill, assemble HTML, print to PDF.

``build_report(raw_dir, out_dir)`` runs each ``notebooks/NN-*.ipynb`` in order into
``out_dir/executed/``, then builds one ``report.html`` from their markdown cells and
outputs (code hidden; images embedded, tables as HTML; `render`), with a title page,
contents, the summary of findings (`findings`) and an appendix listing every run, and
renders it to ``report.pdf`` with WeasyPrint.

Why WeasyPrint: it turns our own HTML+CSS into a PDF in-process, with nothing but
Debian's Pango underneath; the LaTeX route (nbconvert --to pdf) needs a TeX install of
~1 GB, and webpdf needs a Chromium download, which a fresh machine may not reach.

A notebook that fails is reported as a failed section with its error; a study whose
raw results are absent reports "not run" itself (its section ends at that note).
"""

from __future__ import annotations

import html
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from harness import __version__, paths
from harness.errors import HarnessError
from harness.report import sanitize
from harness.report.execute import execute_notebook, venv_kernel
from harness.report.findings import findings_html
from harness.report.render import Section, render_notebook
from harness.report.wrapping import keep_names_whole
from harness.text import printable, raw_stream

NOTEBOOK_GLOB = "[0-9][0-9]-*.ipynb"
REPORT_TITLE = "Key-value stores and caches: evaluation report"


class ReportError(HarnessError):
    """The report could not be assembled (missing notebooks or template, PDF failure)."""


class Built(dict[str, Path]):
    """`build_report`'s paths by kind, and what failed in the report written: sections
    whose notebook failed and parts that could not be drawn, one line each."""

    def __init__(self, *args: object, **kwargs: Path) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.failures: list[str] = []


def discover_notebooks(notebooks_dir: Path) -> list[Path]:
    """Every ``NN-name.ipynb`` in `notebooks_dir`, in order: adding one adds a section."""
    return sorted(Path(notebooks_dir).glob(NOTEBOOK_GLOB))


# --- assembly --------------------------------------------------------------------------


def _git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def appendix_html(raw_dir: Path) -> str:
    """Every run, by configuration (`provenance.run_index`); then the runs that were
    skipped, and why."""
    from harness.analysis.data.load import SkippedRunWarning
    from harness.analysis.sections import provenance, tables

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = provenance.load_all_runs(raw_dir)
    index = provenance.run_index(runs)
    # One table per experiment: the experiment column would only repeat.
    parts = [f"<p>{len(runs)} runs in {len(index)} configurations under "
             f"<code>{html.escape(str(raw_dir))}</code>.</p>"]
    for exp, group in index.groupby("experiment", sort=True):
        parts.append(f"<h3>{html.escape(str(exp))}</h3>")
        parts.append(tables.to_html(group.drop(columns=["experiment"]),
                                    numeric=["runs", "measured ops", "errors"],
                                    css_class="kv-table runs"))
    table = "\n".join(parts)
    for w in caught:  # listed in the report, and still told to whoever ran it
        warnings.warn(w.message if isinstance(w.message, Warning) else str(w.message),
                      stacklevel=2)
    skipped = "".join(
        f"<li>{html.escape(str(w.message))}</li>" for w in caught
        if issubclass(w.category, SkippedRunWarning) or "skipping run" in str(w.message))
    if skipped:
        table += ('<div class="failed"><strong>Skipped runs</strong> (not in any figure or '
                  "table of this report; <code>harness verify</code> checks them):"
                  f"<ul>{skipped}</ul></div>")
    return table


def assemble_html(sections: list[Section], raw_dir: Path, template_dir: Path, *,
                  executed: int | None = None) -> str:
    """The report's HTML. `executed`: notebooks run, sections left out for having
    nothing to show (`Section.omit`) included (the title page counts them all)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
    )
    try:
        template = env.get_template("template.html.j2")
        css = (template_dir / "style.css").read_text()
    except (jinja2.TemplateNotFound, FileNotFoundError) as exc:
        raise ReportError(f"report template missing in {template_dir}: {exc}") from None
    return keep_names_whole(template.render(
        title=REPORT_TITLE,
        generated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        raw_dir=str(raw_dir),
        kit=f"{__version__} ({_git_commit(paths.project_root())})",
        sections=sections,
        executed=len(sections) if executed is None else executed,
        findings=sanitize.clean(findings_html(sections)),
        appendix=sanitize.clean(appendix_html(raw_dir) + "".join(
            part for s in sections for part in s.appendix)),
        css=css,
    ))


def write_pdf(html_text: str, pdf_path: Path, base_url: Path) -> Path:
    try:
        import weasyprint
    except OSError as exc:  # Pango missing: WeasyPrint fails at import with OSError
        raise ReportError(
            f"PDF export needs Pango ({exc}); install the Debian packages "
            "libpango-1.0-0 libpangoft2-1.0-0 (make setup does), or pass --no-pdf"
        ) from None
    pdf = weasyprint.HTML(string=html_text, base_url=str(base_url),
                          url_fetcher=sanitize.url_fetcher()).write_pdf()
    return paths.write_new(pdf_path, pdf)


#: Overrides how many notebooks `harness report` executes at once.
JOBS_ENV = "KVBENCH_REPORT_JOBS"


def report_jobs() -> int:
    """Notebooks executed at once: `JOBS_ENV` if set, else one per CPU (at most 4)."""
    wanted = os.environ.get(JOBS_ENV, "").strip()
    if wanted:
        try:
            return max(1, int(wanted))
        except ValueError:
            raise ReportError(f"{JOBS_ENV}={wanted!r}: expected a number of notebooks "
                              "to execute at once") from None
    return max(1, min(4, len(os.sched_getaffinity(0))))


def build_report(
    raw_dir: Path,
    out_dir: Path,
    *,
    pdf: bool = True,
    progress: bool = True,
    notebooks_dir: Path | None = None,
    figures_dir: Path | None = None,
    include: Sequence[str] = (),
    parameters: Mapping[str, object] | None = None,
    jobs: int | None = None,
) -> Built:
    """Execute every notebook into `out_dir`/executed/ and write report.html (and .pdf).

    Returns paths: ``html``, ``pdf`` (if made), ``executed`` (the directory) and one
    entry per notebook name (its executed copy); and `Built.failures`: a section that
    fails costs itself (or one experiment's part), never the rest of the report. Never
    starts a server: it only reads `raw_dir`, which may be missing or hold only some
    studies. `include`: run statuses every number pools besides complete
    (``("partial",)``; `harness.analysis.data.pooling`), the notebooks' parameter ``include``.
    `jobs`: notebooks executed at once (default `report_jobs`).
    """
    from harness.analysis.data.pooling import check_include

    raw_dir = Path(raw_dir).resolve()
    out_dir = Path(out_dir).resolve()
    notebooks_dir = Path(notebooks_dir or paths.notebooks_dir()).resolve()
    figures_dir = Path(figures_dir or paths.figures_dir()).resolve()
    notebooks = discover_notebooks(notebooks_dir)
    if not notebooks:
        raise ReportError(f"no notebooks matching {NOTEBOOK_GLOB} in {notebooks_dir}")
    executed_dir = out_dir / "executed"
    if executed_dir.is_symlink():
        raise ReportError(f"{executed_dir} is a symbolic link: the report does not write "
                          "through one; remove it or choose another --out")
    executed_dir.mkdir(parents=True, exist_ok=True)
    given = dict(parameters or {})
    check_parameters(notebooks, given)
    parameters = {"raw_results": str(raw_dir), "figures_dir": str(figures_dir),
                  "include": list(check_include(include)), **given}

    result = Built(executed=executed_dir)
    sections = []
    # A bar on a terminal; into a pipe or a log (`make demo | tee log`), a line per notebook.
    bar_on = progress and sys.stderr.isatty()
    # Notebooks run side by side, one kernel per core (each kernel is one busy process;
    # the sections do not depend on each other), and are assembled in their order.
    workers = max(1, min(len(notebooks), jobs or report_jobs()))
    with venv_kernel(executed_dir / "kernel.log") as kernel, tqdm(
            total=len(notebooks), unit="notebook", desc="report", disable=not bar_on,
            file=raw_stream(sys.stderr)) as bar, ThreadPoolExecutor(workers) as pool:
        began = time.monotonic()

        def run(nb: Path) -> tuple[str | None, float]:
            t0 = time.monotonic()
            failed = execute_notebook(nb, executed_dir / nb.name,
                                      {**parameters, **_study_parameters(nb)}, kernel)
            return failed, time.monotonic() - t0

        futures = {pool.submit(run, nb): nb for nb in notebooks}
        outcomes: dict[Path, str | None] = {}
        for done, future in enumerate(as_completed(futures), 1):
            nb = futures[future]
            failed, took = future.result()
            outcomes[nb] = failed
            bar.set_postfix_str(nb.stem)
            bar.update(1)
            if progress and not bar_on:
                print(f"report: [{done}/{len(notebooks)}] {nb.stem} ({took:.1f} s)",
                      file=sys.stderr, flush=True)
            if failed:
                bar.write(printable(f"{nb.name}: failed: {failed.splitlines()[0]}"),
                          file=raw_stream(sys.stderr))
        if progress and not bar_on:
            print(f"report: {len(notebooks)} notebooks in {time.monotonic() - began:.1f} s "
                  f"({workers} at a time)", file=sys.stderr, flush=True)
    for nb in notebooks:
        target, failed = executed_dir / nb.name, outcomes[nb]
        result[nb.stem] = target
        section = render_notebook(target, len(sections) + 1, failed)
        if not section.omit:
            sections.append(section)
        if failed:
            result.failures.append(f"{nb.stem}: the notebook failed: "
                                   f"{failed.splitlines()[0]}")
        result.failures += [f"{nb.stem}: {what} could not be drawn"
                            for what in section.failed_parts]

    template_dir = paths.report_dir()
    html_text = assemble_html(sections, raw_dir, template_dir, executed=len(notebooks))
    result["html"] = paths.write_new(out_dir / "report.html", html_text)
    if pdf:
        result["pdf"] = write_pdf(html_text, out_dir / "report.pdf", out_dir)
    return result


def check_parameters(notebooks: Sequence[Path], given: Mapping[str, object]) -> None:
    """Every parameter given (`harness report -p NAME VALUE`) is one some notebook
    declares in its `parameters` cell; else a ReportError naming the known ones."""
    import difflib

    import papermill as pm

    if not given:
        return
    known = {name for nb in notebooks for name in pm.inspect_notebook(str(nb))}
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ReportError(f"-p {name}: no notebook has that parameter{hint}; "
                              f"parameters: {', '.join(sorted(known))}")


def _study_parameters(notebook: Path) -> dict[str, object]:
    """A study notebook's experiment names, from its registered specs' ``name:``, so a
    renamed spec cannot leave its section reading no runs."""
    from harness.studies import for_notebook

    info = for_notebook(notebook.name)
    return dict(info.notebook_parameters()) if info is not None else {}


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.report [--raw DIR] [--out DIR] [--pdf]``, the same options as
    ``harness report`` (usable before the CLI is wired, and by make)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m harness.report")
    parser.add_argument("--raw", type=Path, default=paths.raw_results_dir())
    parser.add_argument("--out", type=Path, default=paths.report_dir())
    parser.add_argument("--pdf", action="store_true", help="also write report.pdf")
    parser.add_argument("--include", action="append", default=[], choices=("partial",),
                        help="also pool partial runs in every number")
    args = parser.parse_args(argv)
    try:
        out = build_report(args.raw, args.out, pdf=args.pdf, include=args.include)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for key in ("html", "pdf"):
        if key in out:
            print(out[key])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
