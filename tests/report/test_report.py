"""The batch report: notebooks executed, one HTML, one PDF, robust to missing data."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from harness import paths
from harness.report import build_report, discover_notebooks, execute_notebook
from harness.report.build import Built
from tests.fixtures.claims import assert_wording_rule


def test_full_report_from_fixture_data(dsmc_raw: Path, tmp_path: Path):
    import re

    from harness.results import iter_run_dirs

    out = build_report(dsmc_raw, tmp_path / "report", pdf=True,
                       figures_dir=tmp_path / "figures")
    html = out["html"].read_text()
    for title in ("Setup and overview", "Methodology", "Datastore vs memcache",
                  "Appendix: every run", "Contents"):
        assert title in html
    assert "ratio to fastest" in html and "faster than datastore reads" in html
    assert "datastore_memcache.analyse(" not in html  # code cells hidden
    assert html.count('<tr><td class="num">') == 0  # sanity of table markup
    appendix = html[html.index('id="appendix"'):]
    # Every run listed, in the row of its configuration (one per op here).
    listing = appendix.split("Measurement checks")[0]
    assert all(re.search(rf"\b{d.name}\b", listing) for d in iter_run_dirs(dsmc_raw))
    assert "50 runs in 5 configurations under" in appendix
    assert out["pdf"].read_bytes()[:5] == b"%PDF-"
    for nb in discover_notebooks(paths.notebooks_dir()):
        assert out[nb.stem].exists()
    assert (tmp_path / "figures" / "datastore-vs-memcache-throughput.png").exists()
    # One wording rule for the whole report (issue 26): no finding claims an effect its
    # printed interval includes, or declines one its interval shows (here the datastore
    # findings state theirs; tests/studies hold every study's findings to the same rule).
    assert_wording_rule(_text(html), at_least=3)
    assert "never disagree" not in html and "Holm-adjusted together" not in html
    # The summary of findings opens the report with the study's seed claims first, each
    # linked to the part that argues it.
    findings = html[html.index('id="findings"'):html.index('id="sec-1"')]
    [argued] = re.findall(r'<h3 id="(sec-\d+-\d+)">What the data support</h3>', html)
    assert re.search(f'<a href="#{argued}"[^>]*>datastore reads against memcache reads '
                     r"\(hits\): mean time per op</a>", findings)


def _unmarked(html: str) -> str:
    """`html` without the marks that keep names on one line (`harness.report.wrapping`):
    what the tests look for is the text, wherever a line may break."""
    import re

    return re.sub(r'<span class="name">(.*?)</span>', r"\1", html).replace(
        '<code class="name">', "<code>")


def _text(html: str) -> str:
    """The report's words: tags out (a list item or cell starts a line), entities read."""
    import html as html_lib
    import re

    return html_lib.unescape(re.sub(r"<(?:li|td|p|h\d)[^>]*>", "\n", html))


def test_absent_results_are_reported_not_run(tmp_path: Path):
    out = build_report(tmp_path / "no_raw_results", tmp_path / "report", pdf=False,
                       figures_dir=tmp_path / "figures")
    html = out["html"].read_text()
    assert "Not run." in html and "No runs found" in html
    assert "pdf" not in out
    # Optional sections with nothing to show are left out, not reported as not run.
    assert "Imported results" not in html and "No imported results" not in html


def test_optional_section_appears_only_with_data(tmp_path: Path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(paths.notebooks_dir() / "50-imported.ipynb", nbs)
    raw = tmp_path / "raw"
    kw = dict(pdf=False, notebooks_dir=nbs, figures_dir=tmp_path / "figures", progress=False)
    html = build_report(raw, tmp_path / "r1", **kw)["html"].read_text()
    assert "Imported results" not in html
    # Issue 51: the title page counted the sections shown ("7 notebooks executed" when
    # 10 ran); a notebook left out for having nothing to show was executed all the same.
    assert "1 notebook executed; 1 with nothing to show left out" in html
    seed = paths.project_root() / "examples" / "legacy" / "seed001-gae-bench.txt"  # seed 001
    from harness.cli import main

    assert main(["import", "gae-bench", str(seed), "-o", str(raw)]) == 0
    html = build_report(raw, tmp_path / "r2", **kw)["html"].read_text()
    assert "Imported results" in html and "17.9" in html
    assert "1 notebook executed</td>" in html


def _notebook(path: Path, cells) -> None:
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), path)


def test_each_notebook_is_a_section_and_failures_do_not_crash(tiny_raw: Path, tmp_path: Path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    params = new_code_cell('raw_results = "x"')
    params.metadata["tags"] = ["parameters"]
    _notebook(nbs / "20-extra.ipynb", [new_markdown_cell("# Extra study\n\n## Part"),
                                       params, new_code_cell("raw_results")])
    _notebook(nbs / "05-broken.ipynb", [new_markdown_cell("# Broken"),
                                        new_code_cell("1 / 0")])
    (nbs / "notes.ipynb").write_text("{}")  # not NN-name: ignored
    out = build_report(tiny_raw, tmp_path / "report", pdf=False, notebooks_dir=nbs,
                       figures_dir=tmp_path / "figures")
    html = out["html"].read_text()
    assert html.index("Broken") < html.index("Extra study")
    assert "This section failed to execute" in html and "ZeroDivisionError" in html
    assert str(tiny_raw) in html  # the parameter was injected
    assert "notes" not in out


def test_corrupt_run_is_listed_and_skipped(tiny_raw: Path, tmp_path: Path):
    raw = tmp_path / "raw"
    shutil.copytree(tiny_raw, raw)
    (raw / "tiny" / "tiny-2-1" / "ops.parquet").write_bytes(b"garbage")
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(paths.notebooks_dir() / "00-overview.ipynb", nbs)
    with pytest.warns(UserWarning, match="tiny-2-1"):
        out = build_report(raw, tmp_path / "report", pdf=False, notebooks_dir=nbs,
                           figures_dir=tmp_path / "figures")
    html = out["html"].read_text()
    assert "Skipped runs" in html and "checksum mismatch" in html
    assert "3 runs in 1 experiment" in html


def test_overview_says_what_every_number_left_out(pooling_raw: Path, tmp_path: Path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(paths.notebooks_dir() / "00-overview.ipynb", nbs)
    kw = dict(pdf=False, notebooks_dir=nbs, figures_dir=tmp_path / "figures", progress=False)
    html = _unmarked(build_report(pooling_raw, tmp_path / "r1", **kw)["html"].read_text())
    assert "<code>pooling</code>: 2 partial, 1 failed and 1 duplicate run left out" in html
    assert "--include partial" in html  # how to add them
    html = _unmarked(build_report(pooling_raw, tmp_path / "r2", include=["partial"], **kw)[
        "html"].read_text())
    assert "<code>pooling</code>: 1 failed and 2 duplicate runs left out" in html
    assert re.search(r"9 runs in \d+ configurations under", html)  # every run listed


def test_report_command_passes_include(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       tiny_raw: Path):
    import harness.report
    from harness.cli import main

    seen = {}
    monkeypatch.setattr(harness.report, "build_report",
                        lambda raw, out, **kw: seen.update(kw) or Built())
    assert main(["report", "--raw", str(tiny_raw), "--out", str(tmp_path / "r"),
                 "--include", "partial"]) == 0
    assert seen["include"] == ["partial"]


def test_kernel_noise_goes_to_its_log_and_progress_is_plain_lines_in_a_pipe(
        tiny_raw: Path, tmp_path: Path) -> None:
    """What the kernel process itself writes to its stderr (as ipykernel's "KeyboardInterrupt
    caught in kernel" when jupyter_client interrupts it at shutdown) lands in
    executed/kernel.log, not on the console; with stderr not a terminal the progress is a
    line per notebook, not bar fragments."""
    import subprocess
    import sys

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    _notebook(nbs / "10-noisy.ipynb", [new_markdown_cell("# Noisy"), new_code_cell(
        "import os\nos.write(2, b'[IPKernelApp] ERROR | kernel noise\\n')")])
    _notebook(nbs / "20-quiet.ipynb", [new_markdown_cell("# Quiet"), new_code_cell("1")])
    code = ("import sys; from pathlib import Path; from harness.report import build_report; "
            f"build_report(Path({str(tiny_raw)!r}), Path({str(tmp_path / 'r')!r}), "
            f"pdf=False, notebooks_dir=Path({str(nbs)!r}), "
            f"figures_dir=Path({str(tmp_path / 'f')!r}))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert "kernel noise" not in res.stderr + res.stdout
    assert "kernel noise" in (tmp_path / "r" / "executed" / "kernel.log").read_text()
    lines = res.stderr.splitlines()
    # A line per notebook as it finishes (they run side by side), then the total.
    assert sorted(ln.split(" (")[0].split("] ")[-1] for ln in lines[:2]) == [
        "10-noisy", "20-quiet"], res.stderr
    assert [ln.split("] ")[0] for ln in lines[:2]] == ["report: [1/2", "report: [2/2"]
    assert lines[2].startswith("report: 2 notebooks in "), res.stderr
    assert len(lines) == 3, res.stderr
    assert "%|" not in res.stderr  # no tqdm bar


def words_past_the_margin(pdf: Path, margin_mm: float = 16.0) -> list[tuple[int, str]]:
    """(page, word) of every word whose box ends right of the page's text area (A4 with
    the stylesheet's right margin), from `pdftotext -bbox` (poppler)."""
    import re
    import subprocess

    out = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True,
                         text=True, check=True).stdout
    found = []
    for i, (width, body) in enumerate(re.findall(
            r'<page width="([\d.]+)" height="[\d.]+">(.*?)</page>', out, re.S), 1):
        edge = float(width) - margin_mm * 72 / 25.4 + 1.0  # 1 pt for rounding
        found += [(i, w) for x, w in re.findall(
            r'<word xMin="[\d.]+" yMin="[\d.]+" xMax="([\d.]+)" yMax="[\d.]+">([^<]*)</word>',
            body) if float(x) > edge]
    return found


def test_wide_tables_fit_the_page(tiny_raw: Path, tmp_path: Path, browser):
    """A runs table of long run ids and grid points beside short words, in the PDF: no
    word past the right margin (the run appendix was cut off at the right), and short
    words are never split (`tables.breakable` gives long ones break points)."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    wide = (
        "import pandas as pd\nfrom harness.analysis.sections.tables import show\n"
        "ids = ['20261125T165606Z-op=find,clients.connections=1,memcache=False-d28672-r001-0eb1f8'"
        " + str(i) for i in range(6)]\n"
        "df = pd.DataFrame({'run_id': ids, 'configuration': [i[17:] for i in ids],"
        " 'rep.': 1, 'status': 'complete', 'started (UTC)': '2026-11-25 16:56:06',"
        " 'measured ops': 123456, 'errors': 0})\nshow(df, css_class='kv-table runs')")
    _notebook(nbs / "10-wide.ipynb", [new_markdown_cell("# Wide"), new_code_cell(wide)])
    out = build_report(tiny_raw, tmp_path / "r", pdf=True, notebooks_dir=nbs,
                       figures_dir=tmp_path / "f", progress=False)
    assert words_past_the_margin(out["pdf"]) == []
    import subprocess

    text = subprocess.run(["pdftotext", str(out["pdf"]), "-"], capture_output=True,
                          text=True, check=True).stdout
    assert text.count("complete") >= 6 and "errors" in text  # whole, not "comp lete"
    # The HTML in Chromium, at a desktop width: no table wider than the text column
    # (each table's box within the body's content box), the run appendix included.
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(out["html"].as_uri())
    over = page.evaluate("""() => {
        const b = document.body.getBoundingClientRect();
        const s = getComputedStyle(document.body);
        const right = b.right - parseFloat(s.paddingRight) + 1;
        return [...document.querySelectorAll('table')].map(t => [
            t.closest('section, div') ? (t.closest('section, div').id || t.className) : '',
            t.getBoundingClientRect().right, t.scrollWidth, t.clientWidth, right])
          .filter(([_, r, sw, cw, edge]) => r > edge || sw > cw + 1);
    }""")
    tables = page.evaluate("() => document.querySelectorAll('table').length")
    assert tables >= 3 and over == []


def page_fill(pdf: Path) -> list[float]:
    """Per page, how far down its text area (A4, the stylesheet's top and bottom margins)
    anything is drawn, text or figure, as a share of the area's height: the pages
    rendered at 20 dpi (poppler's pdftoppm), the running head and page number left
    out."""
    import subprocess

    from PIL import Image

    out = pdf.parent / "fill"
    out.mkdir(exist_ok=True)
    subprocess.run(["pdftoppm", "-gray", "-r", "20", "-png", str(pdf), str(out / "p")],
                   check=True)
    fills = []
    for page in sorted(out.glob("p-*.png")):
        img = Image.open(page).convert("L")
        px_mm = img.height / 297
        top, bottom = round(18 * px_mm), round((297 - 20) * px_mm)
        data = img.load()
        inked = [y for y in range(top, bottom)
                 if any(data[x, y] < 200 for x in range(img.width))]
        fills.append((inked[-1] - top + 1) / (bottom - top) if inked else 0.0)
    return fills


def pdf_words(pdf: Path) -> list[str]:
    """The words of `pdf` as pdftotext -bbox splits them: at spaces and at line ends, so
    a name broken across two lines is two words."""
    import html as html_lib
    import re
    import subprocess

    out = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True,
                         text=True, check=True).stdout
    return [html_lib.unescape(w) for w in re.findall(r"<word [^>]*>([^<]*)</word>", out)]


#: Names of the kinds a table cut in two in the demo's report (issue 51), each under
#: `harness.report.wrapping.NAME_CHARS` characters.
NAMES = ["Store/W", "Mem/R-hit", "kv_cache", "seed001-datastore-memcache",
         "6.18.44-fc-v782", "services.db.mode=network-cluster,", "mem_read_miss",
         "x86_64"]


def test_the_pages_keep_names_whole_fill_up_and_list_runs_compactly(tmp_path: Path):
    """Issue 51, rendered and read back with pdftotext: names were cut over lines in
    tables ("seed00 1-datastore-memcache", "Store/ W"), the contents spilled onto a
    near-empty page, and the appendix took 25 pages of run ids cut mid-word. A narrow
    table of names, the overview of runs with kit-like ids, and the appendix."""
    import re

    import numpy as np

    from harness.results import STATUS_CODE, write_run
    from tests.fixtures.rawdata import make_ops, manifest_for

    raw = tmp_path / "raw"
    ids = []
    for op in ("mem_read_miss", "store_write"):
        for rep in (1, 2, 3):
            run_id = (f"20261128T23303{rep}Z-op={op},services.db.mode=network-cluster,"
                      f"services.kv.cache_size=1000-r00{rep}-{rep}c{op[:4].encode().hex()}")
            ids.append(run_id)
            write_run(raw, manifest_for(
                run_id=run_id, experiment="seed001-datastore-memcache", workload="w",
                grid_point={"op": op, "services.db.mode": "network-cluster",
                            "services.kv.cache_size": 1000}, repetition=rep),
                make_ops(op, np.full(50, 2_000_000, np.int64),
                         np.full(50, STATUS_CODE["ok"]), np.zeros(50, bool)))
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(paths.notebooks_dir() / "00-overview.ipynb", nbs)
    # Names beside six columns of numbers: narrow columns, as in the demo's tables; then
    # a table too wide for its names kept whole, which must still fit the page.
    narrow = (
        "import pandas as pd\nfrom harness.analysis.sections.tables import show\n"
        f"names = {NAMES!r}\n"
        "show(pd.DataFrame({'name': names, 'what': ['a name'] * 8,"
        " **{f'n{i}': [123456.789] * 8 for i in range(6)}}))\n"
        "show(pd.DataFrame({f'name{i}': names for i in range(4)}))")
    _notebook(nbs / "10-names.ipynb", [new_markdown_cell("# Names"), new_code_cell(narrow)])
    out = build_report(raw, tmp_path / "r", pdf=True, notebooks_dir=nbs,
                       figures_dir=tmp_path / "f", progress=False)
    words = pdf_words(out["pdf"])
    broken = [name for name in NAMES if not any(name in w for w in words)]
    assert broken == [], broken
    assert words_past_the_margin(out["pdf"]) == []
    # No page but the last under 10% full (the contents and each chapter's last lines
    # had pages of their own).
    fills = page_fill(out["pdf"])
    assert len(fills) >= 3 and [f for f in fills[:-1] if f < 0.10] == [], fills
    # The appendix: a row per configuration, each run by the end of its id; no run id
    # spelled out whole over several lines.
    appendix = out["html"].read_text().split('id="appendix"')[1]
    rows = re.findall(r"<tr><td.*?</tr>", appendix.split("Measurement checks")[0])
    assert len(rows) == 2, rows
    assert all(run_id.rsplit("-", 1)[1] in appendix for run_id in ids)
    assert "20261128T233031Z" not in appendix
    assert "6 runs in 2 configurations under" in appendix


def test_report_compare_and_p_reach_the_notebooks(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path, tiny_raw: Path,
                                                  capsys: pytest.CaptureFixture):
    import harness.report
    from harness.cli import main

    seen: dict = {}
    monkeypatch.setattr(harness.report, "build_report",
                        lambda raw, out, **kw: seen.update(kw) or Built())
    other = tmp_path / "other"
    shutil.copytree(tiny_raw, other)
    assert main(["report", "--raw", str(tiny_raw), "--out", str(tmp_path / "r"),
                 "--compare", str(tiny_raw), str(other), "--by", "size, op",
                 "-p", "alpha", "0.01", "-p", "include", "[partial]"]) == 0
    assert seen["parameters"] == {"alpha": 0.01, "include": ["partial"],
                                  "compare_base": str(tiny_raw.resolve()),
                                  "compare_cand": str(other.resolve()),
                                  "compare_by": ["size", "op"]}
    monkeypatch.undo()
    for argv, message in (
            (["-p", "alhpa", "0.01"], "-p alhpa: no notebook has that parameter (did you "
                                      "mean 'alpha'?)"),
            (["--by", "op"], "--by matches the groups of --compare BASE CAND"),
            (["--compare", str(tiny_raw), str(tmp_path / "nope")],
             "nope: no such raw-results directory")):
        assert main(["report", "--raw", str(tiny_raw), "--out", str(tmp_path / "r2"),
                     "--no-pdf", *argv]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "r2" / "report.html").exists()


def test_the_comparison_section_has_its_table_and_a_forest_plot(tiny_raw: Path,
                                                                 tmp_path: Path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(paths.notebooks_dir() / "60-compare.ipynb", nbs)
    other = tmp_path / "other"
    shutil.copytree(tiny_raw, other)
    out = build_report(tiny_raw, tmp_path / "r", pdf=False, notebooks_dir=nbs,
                       figures_dir=tmp_path / "f", progress=False,
                       parameters={"compare_base": str(tiny_raw),
                                   "compare_cand": str(other), "compare_by": ["size"]})
    html = _unmarked(out["html"].read_text())
    section = html[html.index("Comparison of two result trees"):]
    assert "groups matched on size" in section and "throughput (ops/s)" in section
    assert "<img" in section  # the forest plot, after the table
    assert section.index("throughput (ops/s)") < section.index("<img")
    assert (tmp_path / "f" / "compare-forest.png").exists()


def test_a_kernel_that_dies_while_starting_is_started_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that dies before it answers (as one whose TCP port another process took
    between jupyter_client's choice and its bind) ran nothing: the notebook is run again
    with a new kernel. Here a real kernel launcher that exits the first time."""
    died = tmp_path / "died-once"
    launcher = tmp_path / "flaky-kernel"
    launcher.write_text(f"#!/bin/sh\nif [ ! -e {died} ]; then touch {died}; exit 1; fi\n"
                        f'exec {sys.executable} -m ipykernel_launcher "$@"\n')
    launcher.chmod(0o755)
    spec = tmp_path / "jupyter" / "kernels" / "flaky"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(launcher), "-f", "{connection_file}"], "display_name": "flaky",
        "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = new_notebook(cells=[new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                             new_code_cell("print(x * 42)")])
    nb.metadata["kernelspec"] = {"name": "flaky", "display_name": "flaky", "language": "python"}
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    out = tmp_path / "out.ipynb"
    assert execute_notebook(path, out, {"x": 2}, "flaky") is None
    assert died.exists()
    assert nbformat.read(out, 4).cells[-1].outputs[0]["text"] == "84\n"


def test_the_summary_of_findings_opens_the_report_and_links_each_answer(
        tiny_raw: Path, tmp_path: Path) -> None:
    """A section's published answers reach the "Summary of findings" right after the
    contents: the decided ones with ratio and interval, linked to the heading that argues
    them, strings from the notebook escaped; inconclusive ones counted; the checks of the
    experiment (published by another section) qualify them; an output marked for the
    appendix leaves its section for the appendix."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    params = new_code_cell('raw_results = "x"')
    params.metadata["tags"] = ["parameters"]
    publish = new_code_cell(
        "from harness.analysis.sections.answers import Answer, publish, publish_checks\n"
        "from harness.analysis.sections.display import html\n"
        "display(publish_checks({'mine': {'trend': 2}}))\n"
        "display(html('<p>per configuration detail</p>', appendix=True))\n"
        "publish([Answer('<script>alert(1)</script> against b: throughput', 'better', "
        "1.5, 1.2, 1.9, 0.975, 'mine', '', 'Part `two`'),\n"
        "         Answer('c against d: mean latency', 'inconclusive', 1.1, 0.5, 2.0, "
        "0.975, 'mine', '', 'Part `two`')])")
    _notebook(nbs / "20-mine.ipynb", [
        new_markdown_cell("# My study\n\n## Part one"), params,
        new_markdown_cell("## Part `two`"), publish])
    html = build_report(tiny_raw, tmp_path / "report", pdf=False, notebooks_dir=nbs,
                        figures_dir=tmp_path / "figures", progress=False)["html"].read_text()
    html = _unmarked(html)
    findings = html[html.index('id="findings"'):html.index('id="sec-1"')]
    assert html.index('href="#findings"') < html.index('id="findings"')
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; against b: throughput</a>" in findings
    assert 'href="#sec-1-2"' in findings  # "Part two", the second heading of section 1
    assert '<h3 id="sec-1-2">Part <code>two</code></h3>' in html
    assert "1.5× [1.2, 1.9] (97.5%)" in findings and "better" in findings
    assert "2 comparisons, 1 decided" in findings and "1 inconclusive" in findings
    assert "trend in 2 configurations" in findings
    assert "c against d" not in findings  # an inconclusive answer is counted, not listed
    section = html[html.index('id="sec-1"'):html.index('id="appendix"')]
    assert "per configuration detail" not in section
    assert "per configuration detail" in html[html.index('id="appendix"'):]


@pytest.mark.parametrize("planted", ["report.html", "executed/05-one.ipynb",
                                     "executed/kernel.log", "executed"])
def test_a_link_planted_in_the_output_is_refused_and_its_target_untouched(
        tiny_raw: Path, tmp_path: Path, planted: str) -> None:
    """A symbolic link where the report writes (the security review overwrote the files
    report.html and an executed notebook pointed at): an error naming it, and the file it
    points at as it was."""
    from harness.errors import HarnessError

    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    _notebook(nbs / "05-one.ipynb", [new_markdown_cell("# One"), new_code_cell("1")])
    victim = tmp_path / "victim"
    if planted == "executed":
        victim.mkdir()
    else:
        victim.write_text("the user's")
    out = tmp_path / "report"
    (out / "executed").mkdir(parents=True)
    link = out / planted
    if planted == "executed":
        link.rmdir()
    link.symlink_to(victim)
    with pytest.raises(HarnessError, match=f"{link} is a symbolic link"):
        build_report(tiny_raw, out, pdf=False, notebooks_dir=nbs,
                     figures_dir=tmp_path / "figures", progress=False)
    if planted == "executed":
        assert os.listdir(victim) == []
    else:
        assert victim.read_text() == "the user's"
