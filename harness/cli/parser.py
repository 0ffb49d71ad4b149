"""`harness`'s argument parser: each subcommand, its options and the function that
does its work."""

from __future__ import annotations

import argparse

from harness import paths
from harness.cli import plan
from harness.cli.catalogue import cmd_gen_files, cmd_list, cmd_netem_cleanup
from harness.cli.results import (
    cmd_compare,
    cmd_explain,
    cmd_export,
    cmd_history,
    cmd_import,
    cmd_report,
    cmd_summary,
    cmd_verify,
)
from harness.cli.running import (
    cmd_cleanup,
    cmd_collect,
    cmd_hosts_check,
    cmd_run,
    cmd_validate,
)
from harness.importers.numbers import DEFAULT_MAX_OPS

DESCRIPTION = ("`harness` command line: run | validate | plan | summary | compare | history | "
               "explain | "
               "report | import "
               "| export | hosts | verify | list.")

SPEC_HELP = "the experiment spec (YAML), e.g. experiments/datastore_vs_memcache.yaml"


def _include_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--include", action="append", default=[], choices=("partial",),
                   help="also pool partial runs (interrupted, or with records lost); by "
                   "default only complete runs count, one per repetition, and failed runs "
                   "never; what is left out is said")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run an experiment spec")
    p.add_argument("spec", help=SPEC_HELP)
    p.add_argument("--out", default=str(paths.raw_results_dir()), help="raw results directory")
    p.add_argument("--dry-run", action="store_true", help="list the runs, start nothing")
    p.add_argument("--resume", action="store_true", help="skip runs that are complete")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec field, e.g. --set repetitions=3 --set run.ops=20")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                   help="a label written into every run's manifest, e.g. --label "
                   "commit=$(git rev-parse --short HEAD) --label version=7.2.4 (repeatable; "
                   "adds to or replaces the spec's labels:); `harness history --by KEY` "
                   "orders runs by it")
    p.add_argument("--until", choices=("decided",), default=None,
                   help="decided: after the first round, more rounds only for the "
                   "configurations whose comparison with the first is still open "
                   "(a sequential test valid at every look; overrides the spec's until:)")
    p.add_argument("--budget", default=None, metavar="TIME",
                   help="with --until decided: the wall time the runs may take, e.g. 10m")
    p.add_argument("--equivalence", default=None, metavar="MARGIN",
                   help="with --until decided: the margin of \"equivalent\", e.g. 5%%")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no live status line (ops/s, p50, p99, errors each second of a run)")
    p.add_argument("--metrics", metavar="ADDR:PORT", default=None,
                   help="serve Prometheus /metrics while the grid runs (a bare PORT: "
                   "127.0.0.1 only; every interface is never bound); overrides the spec's "
                   "export: {prometheus: ...}; see docs/live.md")
    p.add_argument("--metrics-linger", type=float, default=None, metavar="SECONDS",
                   help="after the grid, keep /metrics up at most this long for a scrape "
                   "of the final values (default 30; not at all if nothing scraped it)")
    p.add_argument("--search", metavar="SLO", default=None,
                   help="find the highest offered rate meeting SLO, e.g. \"p99 < 1ms and "
                        "p50 < 200us\" (writes OUT/EXPERIMENT/search.json)")
    p.add_argument("--resolution", type=float, default=None,
                   help="search: stop when the bracket is within this share (default 0.05)")
    p.add_argument("--figures", default=str(paths.figures_dir()),
                   help="search: where the latency-throughput figure goes")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("collect", help="fetch records that runs left on client machines "
                       "(a failed transfer) and complete those runs")
    p.add_argument("spec", help=SPEC_HELP)
    p.add_argument("--out", default=str(paths.raw_results_dir()), help="raw results directory")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("validate", help="check a spec (and --out) without running anything")
    p.add_argument("spec", help=SPEC_HELP)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec field, as `harness run --set` does")
    p.add_argument("--out", default=str(paths.raw_results_dir()),
                   help="raw results directory the runs would go to (checked too)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("cleanup", help="stop what a killed `harness run` left running and "
                       "write the records it left", description="Reads the state file an "
                       "earlier `harness run` of SPEC left in the experiment directory "
                       "(it was killed, or could not write a run): stops the servers and "
                       "client processes it started (only those: each is matched by pid "
                       "and start time), writes the records of runs it had not written, "
                       "removes its temporary directories, and says what it did. `harness "
                       "run` does the same before it starts.")
    p.add_argument("spec", help=SPEC_HELP)
    p.add_argument("--out", default=str(paths.raw_results_dir()), help="raw results directory")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a spec field, as `harness run --set` does")
    p.set_defaults(func=cmd_cleanup)

    plan.add(sub)  # a command in one module: its arguments and its work

    p = sub.add_parser("summary", help="one row per configuration")
    p.add_argument("raw_dir", nargs="*", default=[str(paths.raw_results_dir())],
                   metavar="RAW",
                   help="raw-results directories (or experiments' directories in them); "
                   "several are pooled as one tree: a run found in two counts once, the "
                   "other copy a duplicate")
    p.add_argument("--by", help="comma-separated grouping columns, e.g. op or threads,op")
    p.add_argument("--experiment", help="comma-separated experiment names")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    _include_option(p)
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser(
        "history", help="where each configuration's throughput and latency changed over "
        "time (change points), and a gate for CI",
        description="Orders each experiment's runs in time (or by a label's values: --by "
        "commit) and finds the change points of every configuration, op and metric: "
        "binary segmentation with a permutation test, each change tested again between "
        "its neighbours with the run-level intervals of `harness compare`, all candidates "
        "one Benjamini-Hochberg family. Runs that failed, or failed a measurement check "
        "(saturated client, busy machine, warm-up not over, target rate not met), are "
        "left out and listed.")
    p.add_argument("raw_dir", nargs="?", default=str(paths.raw_results_dir()),
                   help="raw-results directory (or one experiment's directory in it)")
    p.add_argument("--experiment", help="comma-separated experiment names (default: all)")
    p.add_argument("--by", metavar="LABEL", help="points are this label's values (harness "
                   "run --label LABEL=...), ordered by their first run, each pooling its "
                   "runs; default: one point per run, by start time")
    p.add_argument("--metric", action="extend", nargs="+",
                   choices=("throughput_ops_s", "latency_mean_ms", "latency_p50_ms",
                            "latency_p99_ms"),
                   help="metrics (default: throughput_ops_s latency_p50_ms latency_p99_ms)")
    p.add_argument("--q", "--alpha", dest="alpha", type=float, default=0.05,
                   help="false discovery rate over all candidate changes (default 0.05)")
    p.add_argument("--min-effect", default="0%", metavar="PCT",
                   help="ignore changes smaller than this, e.g. 5%% (default 0%%)")
    p.add_argument("--min-runs", type=int, default=3, metavar="N",
                   help="runs a change needs on each side (default 3: one or two "
                   "outlying runs are no change)")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    p.add_argument("--gate", action="store_true",
                   help="for CI, the last line a verdict: exit 1 when a series' newest point "
                   "lies in a significantly worse level that began among the points not "
                   "yet accepted (--window, --since); 0 otherwise, also when the newest "
                   "runs are too few to judge (said in one line, with how many more runs "
                   "it needs; 3 with --strict); 2 when the tree cannot be read")
    p.add_argument("--window", type=int, metavar="N",
                   help="--gate: the points not yet accepted are each series' newest N "
                   "(default: --min-runs)")
    p.add_argument("--since", metavar="POINT",
                   help="--gate: the points not yet accepted are those after POINT, a --by "
                   "label value (the last commit the job accepted) or a run id")
    p.add_argument("--strict", action="store_true",
                   help="--gate: exit 3, not 0, when the newest runs cannot be judged yet")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none unless stderr is a terminal)")
    _include_option(p)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser(
        "explain", help="which grid keys move which latency quantiles, by how much, and "
        "whether they depend on each other",
        description="Regresses each run's own latency quantiles (log scale: effects are "
        "ratios) on the experiment's grid keys, each value against the key's first, with "
        "two-way interactions; intervals come from the runs (each configuration's own "
        "run-to-run variance), all terms one Benjamini-Hochberg family. Runs that failed "
        "a measurement check of their own are left out and listed.")
    p.add_argument("raw_dir", nargs="?", default=str(paths.raw_results_dir()),
                   help="raw-results directory (or one experiment's directory in it)")
    p.add_argument("--experiment", required=True, help="the experiment to explain")
    p.add_argument("--quantiles", default="0.5,0.99", help="comma-separated (default "
                   "0.5,0.99)")
    p.add_argument("--interactions", type=int, default=2, choices=(1, 2),
                   help="2: main effects and two-way interactions (default); 1: main only")
    p.add_argument("--trend", action="append", default=[], metavar="KEY",
                   help="fit a numeric grid key as a trend per doubling (repeatable)")
    p.add_argument("--with", dest="with_", metavar="cpu,steal,other_cpu",
                   help="the runs' telemetry as covariates: the busiest client process's "
                   "CPU, the largest steal, the most CPU other processes used on a machine")
    p.add_argument("--op", help="only ops of this kind (e.g. get); default: all")
    p.add_argument("--q", "--alpha", dest="alpha", type=float, default=0.05,
                   help="false discovery rate over all terms (default 0.05)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    _include_option(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("compare", help="did CAND change throughput or latency against BASE?",
                       description="Match groups of two raw-results (or experiment) "
                       "directories and judge each metric: better, worse, no significant "
                       "difference, or inconclusive (too few runs to tell). The rows are one "
                       "family: Benjamini-Hochberg at q decides better/worse and the ratio's "
                       "interval is printed at the matching FCR-adjusted level (1 - Rq/m), "
                       "so a verdict never disagrees with its interval; raw and adjusted p "
                       "side by side.")
    p.add_argument("base", metavar="BASE",
                   help="the baseline's raw-results (or experiment) directory")
    p.add_argument("cand", metavar="CAND", nargs="?",
                   help="the candidate's, to judge against BASE; without it, each "
                   "configuration of one experiment in BASE against its first (--experiment, "
                   "--baseline)")
    p.add_argument("--by", help="comma-separated keys to match groups on (default: the op "
                   "and every grid key both trees share, and the experiment where a tree "
                   "holds several; within one experiment: op)")
    p.add_argument("--experiment", help="the experiment to compare (within one tree: "
                   "needed where it holds several)")
    p.add_argument("--baseline", action="append", metavar="KEY=VALUE",
                   help="within one experiment: the configuration the others are judged "
                   "against (default: the first); repeatable for several grid keys")
    p.add_argument("--allow-different", metavar="KEY,...", default="",
                   help="two trees that differ outside --by (workload, servers, a "
                   "parameter, a client setting) are refused, naming each difference; "
                   "these may differ (said above the table)")
    p.add_argument("--metric", action="extend", nargs="+",
                   choices=("throughput", "latency_mean", "latency_p50", "latency_p99"),
                   help="metrics to judge (default: all four)")
    p.add_argument("--q", "--alpha", dest="alpha", type=float, default=0.05,
                   help="false discovery rate over the rows (with --gate familywise: the "
                   "familywise error rate); default 0.05")
    p.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="changes within ±PCT%% count as no difference (default 5)")
    p.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    p.add_argument("--fail-if-worse", type=float, metavar="PCT",
                   help="exit 1 if any metric is significantly worse by more than PCT%%")
    p.add_argument("--gate", choices=("fdr", "familywise"), default="fdr",
                   help="how the rows are judged: fdr (Benjamini-Hochberg, FCR-adjusted "
                   "intervals; the default) or familywise (Bonferroni verdicts with "
                   "simultaneous intervals: for CI gates, where one false 'worse' among "
                   "many rows fails a build)")
    _include_option(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="execute the notebooks and write report HTML/PDF")
    p.add_argument("--raw", default=str(paths.raw_results_dir()),
                   help="raw-results directory the report reads")
    p.add_argument("--out", default=str(paths.report_dir()),
                   help="where report.html, report.pdf and the executed notebooks go")
    p.add_argument("--compare", nargs=2, metavar=("BASE", "CAND"),
                   help="add the comparison section: CAND against BASE (two raw-results "
                   "trees), its table and a forest plot of every ratio")
    p.add_argument("--by", help="--compare: comma-separated keys to match groups on "
                   "(default: the op and every grid key both trees share)")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"),
                   help="set a notebook parameter, as papermill's -p (VALUE read as YAML: "
                   "-p alpha 0.01, -p include '[partial]'); repeatable")
    p.add_argument("--no-pdf", action="store_true", help="write the HTML only")
    p.add_argument("--pdf", action="store_true", help="(default) also write the PDF")
    _include_option(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("import", help="bring other tools' results into the raw-results format",
                       description="Parse FILEs written by another tool or script and write "
                       "them as runs (source: imported). Formats: perfctest, gae-bench, "
                       "cluster-perf, kv-report, memtier-json, redis-benchmark-csv, "
                       "redis-benchmark, ycsb, ycsb-raw, ycsb-hdr.")
    p.add_argument("format", help="the files' format, e.g. gae-bench or redis-benchmark-csv")
    p.add_argument("files", nargs="+", metavar="FILE", help="the files to import")
    p.add_argument("-o", "--out", required=True, metavar="RAW_DIR", help="raw results directory")
    p.add_argument("--experiment", help="experiment name (default: FORMAT-<file stem>)")
    p.add_argument("--count", type=int, help="ops per timed set (gae-bench, default 50)")
    p.add_argument("--requests", type=int, help="requests per test, which redis-benchmark's "
                   "CSV and -q output do not state (its -n)")
    p.add_argument("--size", type=int, help="value size in bytes (gae-bench, default 100)")
    p.add_argument("--max-ops", type=int, default=DEFAULT_MAX_OPS, metavar="N",
                   help="ops a file may declare, each rebuilt as a record (default "
                        f"{DEFAULT_MAX_OPS:,}: a small file can claim any count)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("export", help="raw results -> HdrHistogram logs or CSV tables",
                       description="hdr: one HdrHistogram interval log (values in ns) per "
                       "group, readable by HdrHistogram's own tools, plus index.csv. csv: "
                       "per-run (and op) statistics, or every op with --per op.")
    p.add_argument("format", choices=("hdr", "csv"))
    p.add_argument("raw_dir", metavar="RAW", help="raw-results directory to export from")
    p.add_argument("-o", "--out", required=True,
                   help="hdr: a directory; csv: a file (or a directory for runs.csv/ops.csv)")
    p.add_argument("--by", help="comma-separated grouping columns, e.g. op or threads,op "
                   "(hdr default: experiment + grid parameters; csv default: run_id,op)")
    p.add_argument("--experiment", help="comma-separated experiment names")
    p.add_argument("--interval", type=float, default=1.0, help="hdr: seconds per interval")
    p.add_argument("--per", choices=("run", "op"), default="run",
                   help="csv: one row per run and op (default) or per measured op")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("hosts", help="host utilities")
    hsub = p.add_subparsers(dest="hosts_command", required=True)
    hc = hsub.add_parser("check", help="check a spec's machines before a run: SSH and "
                         "host keys, binaries, the kit on clients, and that the control and "
                         "client machines reach each server machine")
    hc.add_argument("spec", help="the experiment spec (YAML) whose machines to check")
    hc.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a spec field, as for `harness run`")
    hc.add_argument("--out", default=str(paths.raw_results_dir()),
                    help="raw results directory the runs would go to (checked too)")
    hc.set_defaults(func=cmd_hosts_check)

    p = sub.add_parser("verify", help="check every run's ops checksum, and that no ops file "
                       "lacks its manifest")
    p.add_argument("raw_dir", nargs="?", default=str(paths.raw_results_dir()),
                   help="raw-results directory (or one experiment's directory in it)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("gen-files", help="write test files of a given size distribution",
                       description="Write COUNT files 0.txt, 1.txt, ... into DIR; sizes are "
                       "fixed, uniform or log-normal, and the same for the same --seed.")
    p.add_argument("dir", help="directory the files are written to")
    p.add_argument("--count", type=int, default=100, help="how many files")
    p.add_argument("--dist", choices=("fixed", "uniform", "lognormal"), default="lognormal")
    p.add_argument("--size-bytes", type=int, help="fixed: every file's size")
    p.add_argument("--min-bytes", type=int, help="uniform: lower bound; lognormal: clip")
    p.add_argument("--max-bytes", type=int, help="uniform: upper bound; lognormal: clip")
    p.add_argument("--median-bytes", type=int, help="lognormal: median size")
    p.add_argument("--sigma", type=float, help="lognormal: sigma of log(size)")
    p.add_argument("--seed", type=int, default=1, help="seed of the sizes drawn")
    p.set_defaults(func=cmd_gen_files)

    p = sub.add_parser("list", help="workloads, services, studies, system packages")
    p.add_argument("what", nargs="?", default="all",
                   choices=("all", "workloads", "services", "studies", "packages"))
    p.add_argument("--demo", action="store_true",
                   help="studies: the specs `make demo` runs, one per line with its options")
    p.add_argument("--legacy", action="store_true",
                   help="studies: the seed reports `make demo` imports (format file experiment)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("netem", help="emulated networks (namespaces, links, relays)")
    nsub = p.add_subparsers(dest="netem_command", required=True)
    nc = nsub.add_parser("cleanup", help="remove every hkv-* namespace, link, relay, "
                         "server and directory a crashed run left behind",
                         description="Finds leftovers by their hkv- prefix, stops their "
                         "processes, deletes namespaces, links and state directories, and "
                         "prints each. Resources whose creating process still runs are "
                         "left alone unless --force. Idempotent.")
    nc.add_argument("--force", action="store_true",
                    help="also remove resources whose owner is still running")
    nc.set_defaults(func=cmd_netem_cleanup)
    return parser
