"""Foreign runs (a newer schema, a damaged manifest or ops file) are named and skipped by
summary, compare and report, never fatal; the commands exit 0 while something is left."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import paths
from harness.cli import main
from harness.report import build_report
from harness.results import MANIFEST, OPS_FILE, sha256_file

EXP = "datastore_vs_memcache"
#: run_id -> what is done to it (see `foreign_tree`).
DAMAGED = {
    "r000": "schema_version 99",
    "r101": "not valid JSON",
    "r202": "checksum mismatch",
    "r303": "cannot read ops",
}


def foreign_tree(src: Path, dst: Path) -> Path:
    """A copy of `src` with one run of a newer schema, one with a corrupt manifest, one
    whose ops file fails its checksum and one whose ops file matches its (rewritten)
    checksum but is not Parquet (what a careless hand edit leaves)."""
    shutil.copytree(src, dst)
    exp = dst / EXP
    man = exp / "r000" / MANIFEST
    data = json.loads(man.read_text())
    data["schema_version"] = 99
    man.write_text(json.dumps(data))
    (exp / "r101" / MANIFEST).write_text("{ not json")
    (exp / "r202" / OPS_FILE).write_bytes(b"garbage")
    ops = exp / "r303" / OPS_FILE
    ops.write_bytes(b"PAR1 not really")
    man = exp / "r303" / MANIFEST
    data = json.loads(man.read_text())
    data["ops_file"]["sha256"] = sha256_file(ops)
    man.write_text(json.dumps(data))
    return dst


@pytest.fixture(scope="module")
def foreign_raw(dsmc_raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return foreign_tree(dsmc_raw, tmp_path_factory.mktemp("foreign") / "raw")


def _named_each(err: str) -> None:
    for run_id, why in DAMAGED.items():
        lines = [ln for ln in err.splitlines() if f"{EXP}/{run_id}" in ln]
        assert lines, f"{run_id} not named on stderr:\n{err}"
        assert why in lines[0], lines[0]


def test_summary_names_and_skips_foreign_runs(foreign_raw: Path, capsys):
    assert main(["summary", str(foreign_raw), "--by", "op", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    _named_each(err)
    rows = json.loads(out)
    assert sum(r["runs"] for r in rows) == 50 - len(DAMAGED)
    # Each damaged run was one repetition of one op (r<op><rep>): 9 runs left of those.
    by_op = {r["op"]: r["runs"] for r in rows}
    assert sorted(by_op.values()) == [9, 9, 9, 9, 10]


def test_summary_of_only_foreign_runs_is_an_error(dsmc_raw: Path, tmp_path: Path, capsys):
    raw = tmp_path / "raw"
    shutil.copytree(dsmc_raw / EXP / "r000", raw / EXP / "r000")
    data = json.loads((raw / EXP / "r000" / MANIFEST).read_text())
    data["schema_version"] = 99
    (raw / EXP / "r000" / MANIFEST).write_text(json.dumps(data))
    assert main(["summary", str(raw)]) == 2
    err = capsys.readouterr().err
    assert "r000" in err and "nothing left to summarise" in err


def test_compare_names_and_skips_foreign_runs(dsmc_raw: Path, foreign_raw: Path, capsys):
    assert main(["compare", str(dsmc_raw), str(foreign_raw), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    _named_each(err)
    rows = json.loads(out)
    assert {r["n_cand"] for r in rows} == {9, 10}
    assert {r["n_base"] for r in rows} == {10}


def test_report_lists_skipped_runs_and_why(foreign_raw: Path, tmp_path: Path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    for name in ("00-overview.ipynb", "10-datastore-memcache.ipynb"):
        shutil.copy(paths.notebooks_dir() / name, nbs)
    with pytest.warns(UserWarning) as caught:
        out = build_report(foreign_raw, tmp_path / "report", pdf=False, notebooks_dir=nbs,
                           figures_dir=tmp_path / "figures", progress=False)
    assert {run_id for run_id in DAMAGED if any(run_id in str(w.message) for w in caught)} \
        == set(DAMAGED)
    html = out["html"].read_text()
    appendix = html[html.index("Skipped runs"):]
    for run_id, why in DAMAGED.items():
        assert f"{EXP}/{run_id}" in appendix and why in appendix, run_id
    assert "This section failed" not in html
    assert "<figure" in html  # the study still drew its figures from the other runs
