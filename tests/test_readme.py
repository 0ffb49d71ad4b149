"""The README's commands run as written, in a fresh clone (issue 51 item 5). A file of
its own: the longest test of the suite, it is scheduled apart from the manual's tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
@pytest.mark.timeout(1800)  # three grids and a report: 300 s was too few beside a CPU hog
def test_the_readmes_commands_run_as_written_in_a_fresh_clone(tmp_path: Path) -> None:
    """Every `sh` block of the README after the set-up, in order, in a fresh clone (the
    set-up block is what `make setup` and CI do themselves; `make demo` has its own
    test), after saving the first experiment where the README says: each command exits
    0. Two of them failed as written: the compare named a second tree nothing made, and
    `history --by commit` found no run labelled with a commit."""
    from harness.hosts import LocalHost
    from tests.fixtures.servers import require_service

    require_service("memcached", LocalHost())
    clone = tmp_path / "kvbench"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    text = (ROOT / "README.md").read_text()  # the README as it is now, not as committed
    blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
    spec = next(body for lang, body in blocks if lang == "yaml")
    path = re.search(r"Save this as\s+`([^`]+)`", text)
    assert path is not None, "the README says where to save the first experiment"
    (clone / path.group(1)).parent.mkdir(parents=True, exist_ok=True)
    # The commands as written; the experiment smaller (3 runs of 1 s, not 5 of 2): three
    # grids of it and a report took 7 minutes of the suite.
    small = spec.replace("repetitions: 5", "repetitions: 3").replace(
        "run: {duration_s: 2, warmup_s: 0.5}", "run: {duration_s: 1, warmup_s: 0.2}")
    assert small != spec, "the README's experiment changed: shrink it here as well"
    (clone / path.group(1)).write_text(small)
    # Each block one script, as a reader pastes it (a variable set in it lasts).
    scripts = ["set -e\n" + "\n".join(
        line for line in body.splitlines() if line.strip()
        and not line.lstrip().startswith(("make ", "#", "source ")))
        for lang, body in blocks if lang == "sh"]
    scripts = [s for s in scripts if s.strip() != "set -e"]  # the set-up block
    assert any("harness compare" in s for s in scripts), scripts
    env = {**os.environ, "HARNESS_ROOT": str(clone),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for script in scripts:  # `source .venv/bin/activate`: this interpreter's is active
        res = subprocess.run(["bash", "-c", script], cwd=clone, env=env,
                             capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, (script, res.stdout[-2000:], res.stderr[-3000:])
    assert (clone / "report" / "report.pdf").is_file()
