"""`until: decided` (`harness.run.decide`): the spec and the command line accept it and
name the field of a bad value; the rounds go only to the comparisons still open; and on
a real memcached a grid with one clearly slower configuration stops after its first
round, decided, while a budget that is spent stops the runs with the comparisons it
leaves open named."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.cli import main as cli_main
from harness.errors import SpecError
from harness.hosts import LocalHost
from harness.results import iter_run_dirs, read_manifest
from harness.run.decide import Decider, comparisons, decided_lines, read_decided
from harness.spec import DecideRule, expand, load_spec
from tests.fixtures.servers import require_service

SPEC = """\
name: {name}
workload: memcache_mix
hosts:
  server: localhost
  client: localhost
services:
  cache: {{kind: memcached, host: server}}
clients: {{hosts: [client], processes: 1, connections: 1}}
params: {{key_space: 1000}}
grid: {{clients.pause_us: [{pauses}]}}
repetitions: 3
run: {{ops: 300}}
"""


def write(tmp_path: Path, until: str, name: str = "dec", pauses: str = "0, 1000") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, pauses=pauses) + until)
    return path


def problems(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return "\n".join(info.value.problems)


def test_until_decided_is_read_with_its_defaults_and_its_settings(tmp_path: Path) -> None:
    assert load_spec(write(tmp_path, "until: decided\n")).until == DecideRule(None, 0.05, 20)
    spec = load_spec(write(tmp_path, "until: {decided: true, budget: 10m, equivalence: 2%, "
                                     "max_repetitions: 12}\n"))
    assert spec.until == DecideRule(600.0, 0.02, 12)
    assert load_spec(write(tmp_path, "until: {decided: true, budget: 90, equivalence: "
                                     "0.1}\n")).until == DecideRule(90.0, 0.1, 20)


@pytest.mark.parametrize(("until", "says"), [
    ("until: {decided: true, budget: soon}\n", "until.budget: expected a wall time"),
    ("until: {decided: true, budget: -3}\n", "until.budget: must be positive"),
    ("until: {decided: true, equivalence: 150%}\n", "until.equivalence: expected a margin"),
    ("until: {decided: true, equivalence: five}\n", "until.equivalence: expected a margin"),
    ("until: {decided: true, max_repetitions: 3}\n", "until.max_repetitions: must be more"),
    ("until: {decided: false}\n", "until.decided: must be true"),
    ("until: {decided: true, budgt: 1m}\n", "until.budgt: unknown setting"),
    ("until: decide\n", "until: expected decided or a mapping"),
])
def test_a_bad_value_is_refused_naming_its_field(tmp_path: Path, until: str, says: str
                                                 ) -> None:
    assert says in problems(write(tmp_path, until))


def test_the_command_line_sets_it_and_a_budget_alone_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "")
    args = ["run", str(path), "--out", str(tmp_path / "raw"), "--dry-run"]
    assert cli_main([*args, "--until", "decided", "--budget", "10m"]) == 0
    assert cli_main([*args, "--budget", "10m"]) == 2
    assert "--budget: goes with --until decided" in capsys.readouterr().err
    assert cli_main([*args, "--until", "decided", "--budget", "ten"]) == 2
    assert "until.budget: expected a wall time" in capsys.readouterr().err


def _rates(mean: float, n: int, seed: int, noise: float = 0.02) -> dict[int, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    return {r + 1: (300.0, float(mean * np.exp(rng.normal(0, noise)))) for r in range(n)}


def test_rounds_go_only_to_the_comparisons_still_open(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "until: {decided: true, max_repetitions: 10}\n",
                           pauses="0, 10, 20, 30"))
    templates = [p for p in expand(spec) if p.repetition == 1]
    ids = [p.config_id for p in templates]
    said: list[str] = []
    decider = Decider(spec.until, 3, said.append)  # type: ignore[arg-type]
    runs = {ids[0]: _rates(1000, 3, 1), ids[1]: _rates(20, 3, 2),  # far slower
            ids[2]: _rates(1000, 3, 3, noise=0.3), ids[3]: _rates(1005, 3, 4, noise=0.3)}
    assert decider.more(templates, runs) == [ids[0], ids[2], ids[3]]
    text = "\n".join(said)
    assert "clients.pause_us=10 against clients.pause_us=0: worse" in text
    assert "2 of 3 comparison(s) open" in text
    assert "clients.pause_us=20 vs clients.pause_us=0: " in text
    assert "neither excludes 1 nor lies within the margin" in text
    # At max_repetitions nothing more is asked, and it is said once.
    full = {**runs, ids[2]: _rates(1000, 10, 3, noise=0.3), ids[3]: _rates(1005, 10, 4, 0.3),
            ids[0]: _rates(1000, 10, 1)}
    assert decider.more(templates, full) == []
    assert decider.more(templates, full) == []
    assert "\n".join(said).count("(max_repetitions)") == 2
    # What the rounds stopped on is written whole, every look with its interval.
    data = read_decided(Path(decider.write(tmp_path) or tmp_path).parent)
    assert data is not None and data["ended"] == "answered or at max_repetitions"
    states = {c["configuration"]: c["state"] for c in data["comparisons"]}
    assert states["clients.pause_us=10"] == "worse"
    assert [look["look"] for look in data["comparisons"][1]["looks"]] == list(range(1, 9))
    lines = decided_lines(data)
    assert "Bonferroni over 3 comparison(s)" in lines[0]
    assert any(line.startswith("  clients.pause_us=10 vs clients.pause_us=0: worse")
               for line in lines)
    assert decided_lines({**data, "comparisons": [{"looks": "x"}]})[0].startswith(
        "warning: decided.json is not one")


def test_with_ops_in_the_grid_each_is_compared_within_its_op() -> None:
    """As `harness compare` within a tree pairs them: a set is not a slower get."""
    plans = [SimpleNamespace(config_id=f"{op}-{v}", grid_point={"op": op, "v": v})
             for op in ("get", "set") for v in (1, 2, 3)]
    pairs = [(b.config_id, c.config_id) for b, c in comparisons(plans)]  # type: ignore[arg-type]
    assert pairs == [("get-1", "get-2"), ("get-1", "get-3"), ("set-1", "set-2"),
                     ("set-1", "set-3")]
    flat = [SimpleNamespace(config_id=str(v), grid_point={"v": v}) for v in (1, 2)]
    assert [(b.config_id, c.config_id) for b, c in comparisons(flat)] == [("1", "2")]  # type: ignore[arg-type]


def test_a_spent_budget_stops_the_rounds_naming_what_is_open(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "until: {decided: true, budget: 1s}\n"))
    templates = [p for p in expand(spec) if p.repetition == 1]
    said: list[str] = []
    decider = Decider(spec.until, 3, said.append, started=0.0)  # type: ignore[arg-type]
    runs = {templates[0].config_id: _rates(1000, 3, 1, 0.3),
            templates[1].config_id: _rates(1000, 3, 2, 0.3)}
    assert decider.more(templates, runs) == []
    assert "budget 1 s spent" in said[-1] and "1 comparison(s) still open" in said[-1]


def test_a_round_that_would_not_fit_in_the_budget_is_not_started(tmp_path: Path) -> None:
    """6 runs took 10 s: a round of 2 more (about 3.3 s) does not fit in 2 s left."""
    spec = load_spec(write(tmp_path, "until: {decided: true, budget: 12s}\n"))
    templates = [p for p in expand(spec) if p.repetition == 1]
    said: list[str] = []
    decider = Decider(spec.until, 3, said.append,  # type: ignore[arg-type]
                      started=time.monotonic() - 10)
    runs = {templates[0].config_id: _rates(1000, 3, 1, 0.3),
            templates[1].config_id: _rates(1000, 3, 2, 0.3)}
    assert decider.more(templates, runs) == []
    assert "budget 12 s nearly spent" in said[-1] and "next round of 2 run(s)" in said[-1]
    roomy = Decider(spec.until, 3, said.append,  # type: ignore[arg-type]
                    started=time.monotonic() - 1)
    assert len(roomy.more(templates, runs)) == 2


@pytest.mark.integration
def test_a_clearly_slower_configuration_is_decided_within_a_few_looks(
        tmp_path: Path) -> None:
    require_service("memcached", LocalHost())
    raw = tmp_path / "raw"
    path = write(tmp_path, "until: {decided: true, budget: 5m, max_repetitions: 8}\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli_main(["run", str(path), "--out", str(raw), "--no-progress", "-q"]) == 0
    runs = [read_manifest(d) for d in iter_run_dirs(raw / "dec")]
    assert all(m.status == "complete" for m in runs)
    # The first round (3 repetitions of each) and at most two more looks, far from 8.
    assert 6 <= len(runs) <= 10
    said = err.getvalue()
    assert "clients.pause_us=1000 against clients.pause_us=0: worse" in said
    assert "max_repetitions)" not in said
    # The looks are kept beside the runs, and `harness compare` within the tree says them.
    assert (raw / "dec" / "decided.json").is_file()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["compare", str(raw), "--experiment", "dec"]) in (0, 1)
    assert "clients.pause_us=1000 vs clients.pause_us=0: worse" in out.getvalue()


@pytest.mark.integration
def test_a_spent_budget_stops_the_runs_with_a_message(tmp_path: Path) -> None:
    require_service("memcached", LocalHost())
    raw = tmp_path / "raw"
    path = write(tmp_path, "", pauses="0, 1")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli_main(["run", str(path), "--out", str(raw), "--no-progress", "-q",
                         "--until", "decided", "--budget", "1s"]) == 0
    assert len(list(iter_run_dirs(raw / "dec"))) == 6
    assert "until decided: budget 1 s spent" in err.getvalue()
