"""`harness plan SPEC --target 5%`: how many runs, and how long, each configuration needs
for a 95% interval of its throughput as narrow as the target, read from the runs of the
spec's experiment already in the tree (a first round: `harness run SPEC --set
repetitions=3`). The command's arguments and its work in one module (`add`, `run`).

The numbers: `harness.analysis.stats.components` (Kalibera and Jones's variance
components, run-to-run and within a run).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness import paths
from harness.cli.exits import EXIT_OK
from harness.errors import HarnessError, SpecError
from harness.text import printable

HELP = "runs and run length per configuration for a target interval width"


def add(sub: argparse._SubParsersAction) -> None:
    """The command's parser, on `sub`."""
    p = sub.add_parser("plan", help=HELP, description=__doc__.split("\n\n")[0])
    p.add_argument("spec", help="the experiment spec (YAML) whose first round is in --raw")
    p.add_argument("--raw", default=str(paths.raw_results_dir()),
                   help="the raw-results tree holding the first round")
    p.add_argument("--target", default="5%", type=_percent,
                   help="the 95%% interval's half-width, relative to the mean (default 5%%)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec field, as `harness run --set` does")
    p.set_defaults(func=run)


def _percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%")) / 100
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5%, not "
                                         f"{printable(text)[:40]!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError("expected a percentage between 0 and 100")
    return value


def run(args: argparse.Namespace) -> int:
    from harness.analysis.stats import components as comp
    from harness.cli.running import _overrides
    from harness.spec import expand, load_spec

    spec = load_spec(args.spec, _overrides(args.set))
    exp_dir = Path(args.raw) / spec.name
    labels = {p.config_id: " ".join(f"{k}={v}" for k, v in p.grid_point.items())
              or "default" for p in expand(spec)}
    rates = _first_round(exp_dir, set(labels))
    if not any(rates.values()):
        least = comp.WINDOWS * comp.MIN_OPS_PER_WINDOW
        raise SpecError([f"{exp_dir}: no complete run of {spec.name} with {least} measured "
                         f"ops or more to plan from; run a first round: harness run "
                         f"{args.spec} --out {args.raw} --set repetitions=3"])
    print(f"{spec.name}: runs for a 95% interval of throughput within ±{args.target:.0%} "
          f"of its mean, from the first round in {exp_dir} (run-to-run and within-run "
          "variance, Kalibera and Jones)")
    head = (f"{'configuration':<28} {'runs':>4} {'ops/s':>10} {'between':>8} "
            f"{'within':>8}  plan (run length: runs, time)")
    print(head)
    total = 0.0
    for config_id, label in labels.items():
        c = comp.components(rates.get(config_id, []))
        name = printable(label)[:28]
        if c is None:
            print(f"{name:<28} {len(rates.get(config_id, [])):>4}  too few runs to plan "
                  "from (2 or more complete ones)")
            continue
        options = comp.plan(c, args.target)
        best = comp.cheapest(options)
        cells = "; ".join(
            f"{o.length_s:.3g} s: " + (f"{o.runs} ({_time(o.total_s)})" if o.runs
                                       else f"> {comp.MOST_RUNS}")
            for o in options)
        mark = (f"  -> {best.runs} runs of {best.length_s:.3g} s" if best else
                "  -> out of reach")
        total += best.total_s if best and best.total_s else 0.0
        print(f"{name:<28} {c.runs:>4} {c.mean_ops_s:>10,.0f} "
              f"{c.between_rel_var ** 0.5:>7.1%} {c.within_rel_var ** 0.5:>7.1%}  "
              f"{cells}{mark}")
    print(f"between: run-to-run SD of a run's mean; within: SD of a tenth of a run, both "
          f"relative to the mean. The cheapest plans take about {_time(total)} of runs in "
          "all (runs' start and warm-up included, as the first round's took them).")
    return EXIT_OK


def _first_round(exp_dir: Path, configs: set[str]) -> dict[str, list]:
    """config_id -> the complete runs' rates, of the configurations the spec has."""
    import numpy as np

    from harness.analysis.stats import components as comp
    from harness.results import iter_run_dirs, read_manifest
    from harness.results.io import read_ops

    out: dict[str, list] = defaultdict(list)
    if not exp_dir.is_dir():
        return out
    for run_dir in iter_run_dirs(exp_dir):
        try:
            m = read_manifest(run_dir)
            if m.status != "complete" or m.config_id not in configs:
                continue
            ops = read_ops(run_dir, ["start_ns", "warmup"])
        except HarnessError as exc:  # named, and the rest still plans
            print(f"warning: {exc}", file=sys.stderr)
            continue
        start = ops.column("start_ns").to_numpy()
        measured = ~ops.column("warmup").to_numpy(zero_copy_only=False)
        r = comp.run_rates(np.asarray(start)[measured], _wall_s(m))
        if r is not None:
            out[m.config_id].append(r)
    return out


def _wall_s(m: Any) -> float | None:
    from harness.results.manifest import utc_seconds

    a, b = utc_seconds(m.started_utc), utc_seconds(m.ended_utc)
    return None if a is None or b is None else b - a


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"

