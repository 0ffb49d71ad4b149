"""`harness list | gen-files | netem cleanup`: what the kit offers, and its utilities."""

from __future__ import annotations

import argparse
import os

from harness.cli.exits import EXIT_FAILED_RUNS, EXIT_OK
from harness.errors import HarnessError


def cmd_list(args: argparse.Namespace) -> int:
    from harness.services import SERVICES
    from harness.workloads import WORKLOADS

    if args.what == "studies" or args.demo or args.legacy:
        return _list_studies(args)
    # the manual's server table (docs/servers.md), from the declarations
    if args.what == "packages":
        from harness.services.catalog import readme_table

        print(readme_table())
        return EXIT_OK
    if args.what in ("all", "workloads"):
        for name in WORKLOADS:
            w = WORKLOADS.get(name)
            print(f"workload {name}: {w.description}\n  ops: {', '.join(w.ops)}")
            for p, s in w.params.items():
                print(f"  param {p} (default {s.default!r}): {s.help}")
    if args.what in ("all", "services"):
        for name in SERVICES:
            s = SERVICES.get(name)
            print(f"service {name}:")
            for key, setting in s.settings.items():
                print(f"  setting {key} (default {setting.default!r}): {setting.help}")
            if s.packages:
                print(f"  packages: {' '.join(p.debian for p in s.packages)} (Debian/Ubuntu)")
    return _list_studies(args) if args.what == "all" else EXIT_OK


def _list_studies(args: argparse.Namespace) -> int:
    """The registered studies; `--demo` and `--legacy` print what `make demo` loops over."""
    from harness.studies import STUDIES

    infos = sorted((STUDIES.get(name) for name in STUDIES), key=lambda i: i.notebook)
    if args.demo:  # one line per spec: file name under experiments/, then run options
        root = os.geteuid() == 0 if hasattr(os, "geteuid") else False
        for info in infos:
            for spec in info.specs:
                if spec.demo:
                    sets = () if root else spec.unprivileged_set
                    print(" ".join([spec.file, *(f"--set {s}" for s in sets)]))
        return EXIT_OK
    if args.legacy:  # one line per seed report: importer, file under examples/legacy/, experiment
        for info in infos:
            if info.legacy is not None:
                print(f"{info.legacy.format} {info.legacy.file} {info.legacy.experiment}")
        return EXIT_OK
    for info in infos:
        print(f"study {info.name}: {info.title}\n  notebook: notebooks/{info.notebook}\n"
              f"  workloads: {', '.join(info.workloads)}")
        for spec in info.specs:
            how = [f"experiment {spec.experiment()}"]
            if spec.parameter:
                how.append(f"notebook parameter {spec.parameter}")
            if not spec.demo:
                how.append("not in make demo")
            print(f"  spec experiments/{spec.file} ({', '.join(how)})")
        if info.legacy is not None:
            print(f"  legacy: harness import {info.legacy.format} "
                  f"examples/legacy/{info.legacy.file} --experiment {info.legacy.experiment}")
    return EXIT_OK


def cmd_gen_files(args: argparse.Namespace) -> int:
    from harness.datasets.filegen import check_params, generate_files

    params = {k: getattr(args, k) for k in ("size_bytes", "min_bytes", "max_bytes",
                                             "median_bytes", "sigma")
              if getattr(args, k) is not None}
    problems = check_params(args.dist, **params)
    if args.count < 0:
        problems.append("--count must be >= 0")
    if problems:
        raise HarnessError("gen-files: " + "; ".join(problems))
    specs = generate_files(args.dir, args.count, args.dist, args.seed, **params)
    total = sum(s.size_bytes for s in specs)
    print(f"wrote {len(specs)} file(s), {total:,} bytes, to {args.dir}")
    return EXIT_OK


def cmd_netem_cleanup(args: argparse.Namespace) -> int:
    from harness.netem.cleanup import cleanup

    found = cleanup(force=args.force)
    return EXIT_OK if not found.in_use or args.force else EXIT_FAILED_RUNS
