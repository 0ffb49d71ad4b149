"""`perfctest`: the per-operation result log of seed 000 (App Engine file store).

The log's header names three columns, ``nthreads operation time``; its lines are::

    1 insert 459.302978 ALLOPERATIONS
    1 insert 1 1.234597 459.302978 SINGLEOPERATION

Reading (fields counted from the right, so a pasted editor's line-number prefix, as in
the seed, is ignored whatever it is):

* ALLOPERATIONS: ``nthreads operation total``: the total time of the whole experiment.
* SINGLEOPERATION: ``nthreads operation X time total``: ``time`` is one operation's
  latency, ``total`` repeats its experiment's total. ``X`` (always 1 in the seed) is not
  named by the header: it could be a thread number, the memcache switch or the file
  size the generator printed as ``(100, 1)``. It is kept verbatim as param ``field3``
  (when constant in a run) and never interpreted.

Unit: seconds. The ops are HTTP requests to App Engine over a link whose ping is 23-61
ms, so 0.3-1.2 ms per op would be impossible, while 0.3-1.2 s is plausible; and the
experiment total, 459.302978 s, fits the test script's 10 passes ("Doing 0..10") over the
100 generated files at ~0.46 s per op. The seed shows only the first 21 operations of
that experiment; the stated total is kept (``extra.stated_total_s``) but no ops are made
up for the part not shown.

One run per experiment, i.e. per (nthreads, operation, total); op records in file order,
one client, back to back (a closed loop: start = sum of earlier latencies, a lower bound
of the real wall time, since think time between requests is not logged). Params:
``threads`` (nthreads) and ``op`` (the operation, lower case). Memcache on/off is not in
the log and stays empty. A log line's numbers are checked (`harness.importers.numbers`):
0 threads, a time that is not finite, a count longer than any measurement are an error
naming the line.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.importers import numbers
from harness.importers.base import (
    ImportOptions,
    ImportResult,
    Noise,
    ParsedRun,
    Records,
    nothing_found,
    read_lines,
    slug,
)

NAME = "perfctest"
_NUM = re.compile(r"^\d+(?:\.\d+)?$", re.ASCII)
_THREADS = re.compile(r"^\d+$", re.ASCII)  # str.isdigit() takes '²', which int() refuses
_NS_PER_S = 1e9


def _is_num(tok: str) -> bool:
    return bool(_NUM.match(tok))


def _parse_line(tokens: list[str], where: str) -> tuple[str, tuple] | None:
    """('single', (threads, op, x, time_s, total_s)) or ('all', (threads, op, total_s));
    None for a line that is not the log's. Its numbers are checked (an error naming the
    line: `harness.importers.numbers`)."""
    if len(tokens) >= 6 and tokens[-1] == "SINGLEOPERATION":
        threads, op, x, t, total = tokens[-6:-1]
        if _THREADS.match(threads) and all(_is_num(v) for v in (x, t, total)):
            return "single", (numbers.count(threads, where, "nthreads", most=None), op, x,
                              numbers.amount(t, where, f"{op} time"),
                              numbers.amount(total, where, f"{op} total"))
    if len(tokens) >= 4 and tokens[-1] == "ALLOPERATIONS":
        threads, op, total = tokens[-4:-1]
        if _THREADS.match(threads) and _is_num(total):
            return "all", (numbers.count(threads, where, "nthreads", most=None), op,
                           numbers.amount(total, where, f"{op} total"))
    return None


class PerfcTest:
    name = NAME
    description = "seed 000's perfctest.py log: SINGLEOPERATION / ALLOPERATIONS lines"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        # (threads, op, total) -> [first line, latencies_s, X values]
        runs: dict[tuple[int, str, float], list] = {}
        announced: dict[tuple[int, str, float], int] = {}
        for no, line in enumerate(read_lines(path), 1):
            parsed = _parse_line(line.split(), numbers.at(path, no))
            if parsed is None:
                noise.skip(no, line)
                continue
            kind, fields = parsed
            if kind == "all":
                threads, op, total = fields
                announced.setdefault((threads, op.lower(), total), no)
                continue
            threads, op, x, t, total = fields
            entry = runs.setdefault((threads, op.lower(), total), [no, [], []])
            entry[1].append(t)
            entry[2].append(x)
        result = ImportResult(NAME, Path(path), skipped=noise.lines)
        for (threads, op, total), (first, lats, xs) in runs.items():
            notes = [
                f"{len(lats)} operation(s) listed; their sum is {sum(lats):.6f} s of the "
                f"stated experiment total {total} s",
                "start times are back to back (think time between requests is not logged)",
            ]
            if (threads, op, total) not in announced:
                notes.append("no ALLOPERATIONS line for this experiment; total taken from "
                             "the SINGLEOPERATION lines")
            params: dict = {}
            extra: dict = {"stated_total_s": total}
            if len(set(xs)) == 1:
                params["field3"] = xs[0]
            else:
                extra["field3_values"] = xs
            result.runs.append(ParsedRun(
                records=[Records.measured(slug(op), [v * _NS_PER_S for v in lats])],
                grid_point={"op": slug(op), "threads": threads},
                params=params, notes=notes, extra=extra, line=first,
            ))
        for key, no in announced.items():
            if key not in runs:
                result.notes.append(f"line {no}: experiment {key[1]} x {key[0]} thread(s) "
                                    "has a total but no SINGLEOPERATION lines; not imported")
        if not result.runs:
            raise nothing_found(path, NAME)
        return result
