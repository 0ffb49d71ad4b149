"""`gae-bench`: the set timings of seed 001 ("GAE/P DataStore vs Memcached").

The benchmark handler writes, per test, a header ``"-"*10 + "<test name><br>"`` and then
ten lines ``"%0.3f<br>"``: the seconds one set of ``count`` ops took (each op on a value
of ``size`` bytes). Count and size were request arguments, not printed; the seed's text
says 50 ops of 100 bytes per set, so those are the defaults (``--count``, ``--size``).

Reading: a header is a line starting with at least three dashes; a value is a decimal
number (it always has a decimal point, so the code listing's bare line numbers around it
are noise); ``<br>`` is treated as a line break, so the raw HTML output imports too.

One run per set, repetition 1..n within its test, ``count`` aggregated records of
(set time / count) each, back to back, so a run's ``latency_mean_ms`` is the set's mean
per op and its throughput count / set time. Test names map to the study's op names
(``DataStore - write`` -> ``store_write``, ``Memcached - read - hit`` ->
``mem_read_hit``, ...); an unknown test name becomes its slug, with a note. Params:
``op`` and ``value_size_bytes`` (the size), plus ``ops_per_set`` (the count).
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
    ends_cut,
    nothing_found,
    read_lines,
    slug,
)

NAME = "gae-bench"
DEFAULT_COUNT = 50
DEFAULT_SIZE = 100

#: Test names of the seed's handler (letters only, lower case) -> the study's op names.
OPS: dict[str, str] = {
    "datastorewrite": "store_write",
    "datastoreread": "store_read",
    "memcachedwrite": "mem_write",
    "memcachedreadhit": "mem_read_hit",
    "memcachedreadmiss": "mem_read_miss",
}

_HEADER = re.compile(r"^\s*-{3,}\s*(\S.*?)\s*$")
_VALUE = re.compile(r"^\s*(\d+\.\d+)\s*$")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def op_name(test: str) -> tuple[str, bool]:
    """(op name, known?) for a test name as the handler printed it."""
    key = re.sub(r"[^a-z]", "", test.lower())
    return (OPS[key], True) if key in OPS else (slug(test), False)


class GaeBench:
    name = NAME
    description = "seed 001's GAE handler output: '----------<test>' then seconds per set"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        count = options.count or DEFAULT_COUNT
        size = options.size or DEFAULT_SIZE
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        test: str | None = None
        sets: dict[str, int] = {}
        no = 0
        for no, line in enumerate(read_lines(path), 1):
            unused = False
            for part in _BR.split(line):
                header = _HEADER.match(part)
                value = _VALUE.match(part)
                if header:
                    test = header.group(1)
                    op, known = op_name(test)
                    if not known:
                        result.notes.append(f"line {no}: test {test!r} is not one of the "
                                            f"seed's; imported as op {op!r}")
                elif value and test is not None:
                    op, _ = op_name(test)
                    sets[op] = sets.get(op, 0) + 1
                    seconds = numbers.amount(value.group(1), numbers.at(path, no),
                                             f"{test} set seconds")
                    result.runs.append(ParsedRun(
                        records=[Records.aggregate(op, count, seconds * 1e9)],
                        grid_point={"op": op},
                        params={"value_size_bytes": size, "ops_per_set": count},
                        repetition=sets[op],
                        extra={"stated": {"set_seconds": value.group(1), "test": test}},
                        line=no,
                    ))
                else:
                    unused = unused or bool(part.strip())
            if unused:
                noise.skip(no, line)
        last = result.runs[-1] if result.runs else None
        if last is not None and ends_cut(path) and last.line == no:
            # A cut "%0.3f" value shows as fewer decimals than the ones before it.
            text = last.extra["stated"]["set_seconds"]
            prev = [r.extra["stated"]["set_seconds"] for r in result.runs[-2:-1]]
            if prev and len(text.split(".")[1]) != len(prev[0].split(".")[1]):
                result.runs.pop()
                noise.skip(no, text)
                result.notes.append(f"line {no}: the file ends inside value {text!r} (cut "
                                    "short?); that set is not imported")
        result.skipped = noise.lines
        if not result.runs:
            raise nothing_found(path, NAME)
        src = "given" if options.count else "default"
        result.notes.append(f"each set is {count} ops ({src} --count) of {size} bytes "
                            f"({'given' if options.size else 'default'} --size); the file "
                            "states only the seconds per set")
        uneven = {op: n for op, n in sets.items() if n != max(sets.values())}
        if uneven:
            result.notes.append(f"tests with fewer sets than the others: {uneven}")
        return result
