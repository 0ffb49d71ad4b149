"""`kv-report`: the ``======Report======`` blocks of seed 003 (course KV store, Java test).

A block, as printed (fields may be wrapped onto any number of lines)::

    ======Report======
    Number of Servers: 5 Number of Clients: 1
    Total Put Time in ms: 3541 Total Put Count: 1047
    Total Get Time in ms: 3120 Total Get Count: 1047
    Throughput: 100%

Each block gives two runs, ``op=put`` and ``op=get``: ``count`` aggregated records of
(total ms / count) each, back to back, so ``latency_mean_ms`` is the time per request the
report's charts plot. Params: ``servers``, ``clients``, and ``cache_strategy`` /
``cache_size`` when a cache line describes the block. ``Throughput`` (a success
fraction: ``100%`` or ``841/1047``) is kept verbatim in ``extra.stated`` with its value,
and a note is added where it disagrees with the block's counts.

Which cache line belongs to which block: a cache line (``Cache Type:LFU Cache Size 5``,
``Cache Size: LFU Cache Size 10``) describes the NEXT report block, and only that one.
Evidence in the seed: in the cache test the first cache line comes straight after the
section title, before any block, so there it can only precede its block; in the clients
test it sits on the same line just before ``======Report======``. Read the same way, the
servers test's cache lines (printed after a block, then "Reached here....") belong to the
following blocks, so its first block has no stated cache and its cache params stay empty.
A block with no cache line since the previous block gets none (not carried forward).

Author comments (lines starting ``//``) since the previous block are kept as param
``annotation``: in the seed they mark the scaling runs (servers added or removed during
the run), which must not be pooled with steady-state runs of the same servers x clients.
Everything else (titles, prose, author lines, "Reached here....") is skipped as noise.
A field repeated without a new header starts a new block (a lost header), with a note.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.importers import numbers
from harness.importers.base import (
    ImportOptions,
    ImportResult,
    Noise,
    ParsedRun,
    Records,
    nothing_found,
    read_lines,
)

NAME = "kv-report"

_FIELDS = {
    "servers": r"Number\s+of\s+Servers\s*:\s*(\d+)",
    "clients": r"Number\s+of\s+Clients\s*:\s*(\d+)",
    "put_ms": r"Total\s+Put\s+Time\s+in\s+ms\s*:\s*(\d+(?:\.\d+)?)",
    "put_count": r"Total\s+Put\s+Count\s*:\s*(\d+)",
    "get_ms": r"Total\s+Get\s+Time\s+in\s+ms\s*:\s*(\d+(?:\.\d+)?)",
    "get_count": r"Total\s+Get\s+Count\s*:\s*(\d+)",
    "throughput": r"Throughput\s*:\s*(\d+(?:\.\d+)?\s*%|\d+\s*/\s*\d+)",
    "cache": r"Cache\s*(?:Type|Size)\s*:\s*(LFU|LRU|FIFO)\s*Cache\s*Size\s*:?\s*(\d+)",
    "header": r"={3,}\s*Report\s*={3,}",
}
_TOKEN = re.compile("|".join(f"(?P<{k}>{v})" for k, v in _FIELDS.items()), re.IGNORECASE)
_SUB = {k: re.compile(v, re.IGNORECASE) for k, v in _FIELDS.items()}
_COMMENT = re.compile(r"^\s*//\s*(.*?)\s*$")


#: Field -> what it is called in the report (for messages), and whether it is a count.
_NAMES = {"servers": ("Number of Servers", 1), "clients": ("Number of Clients", 1),
          "put_ms": ("Total Put Time in ms", None), "put_count": ("Total Put Count", 0),
          "get_ms": ("Total Get Time in ms", None), "get_count": ("Total Get Count", 0)}


def success_fraction(text: str, where: str) -> float:
    """``100%`` or ``841/1047`` as a fraction (nan for ``n/0``); its numbers are read as
    `harness.importers.numbers` reads counts and amounts."""
    text = text.replace(" ", "")
    if text.endswith("%"):
        return numbers.amount(text[:-1], where, "Throughput") / 100
    num, _, den = text.partition("/")
    n, d = (numbers.count(v, where, "Throughput", least=0) for v in (num, den))
    return n / d if d else float("nan")


def _check(kind: str, value: re.Match, where: str) -> None:
    """A field's numbers, as read: impossible ones are an error naming the line."""
    if kind == "throughput":
        success_fraction(value.group(1), where)
    elif kind == "cache":
        numbers.count(value.group(2), where, "Cache Size", least=0)
    elif kind in _NAMES:
        name, least = _NAMES[kind]
        if least is None:
            numbers.amount(value.group(1), where, name)
        else:
            numbers.count(value.group(1), where, name, least=least)


class _Block:
    def __init__(self, line: int, cache: tuple[str, int, int] | None,
                 annotation: str | None, headed: bool) -> None:
        self.line, self.cache, self.annotation, self.headed = line, cache, annotation, headed
        self.fields: dict[str, tuple[str, int]] = {}

    def runs(self) -> list[ParsedRun]:
        f = {k: v for k, (v, _) in self.fields.items()}
        params: dict[str, Any] = {}
        for key in ("servers", "clients"):
            if key in f:
                params[key] = int(f[key])
        if self.cache:
            params["cache_strategy"], params["cache_size"] = self.cache[0].upper(), self.cache[1]
        if self.annotation:
            params["annotation"] = self.annotation
        notes = [] if self.headed else [f"line {self.line}: block without a Report header"]
        if self.cache:
            notes.append(f"cache from line {self.cache[2]} (the cache line before this block)")
        stated: dict[str, Any] = {}
        if "throughput" in f:
            stated["throughput"] = f["throughput"]
            stated["success_fraction"] = success_fraction(  # checked as read: cannot fail
                f["throughput"], f"line {self.fields['throughput'][1]}")
            if "put_count" in f and "get_count" in f:
                counts = int(f["get_count"]) / max(int(f["put_count"]), 1)
                if abs(counts - stated["success_fraction"]) > 1e-9:
                    notes.append(f"stated throughput {f['throughput']} differs from the "
                                 f"counts (get {f['get_count']} / put {f['put_count']})")
        present = []
        for op in ("put", "get"):
            ms, count = f.get(f"{op}_ms"), f.get(f"{op}_count")
            if ms is not None and count is not None and int(count) > 0:
                present.append((op, ms, count))
            elif ms is not None and count is not None:  # e.g. every get failed
                notes.append(f"{op}: 0 ops in {ms} ms; no {op} run")
            elif ms is not None or count is not None:
                notes.append(f"{op}: time or count missing (cut off?); no {op} run")
        out = []
        for op, ms, count in present:
            out.append(ParsedRun(
                records=[Records.aggregate(op, int(count), float(ms) * 1e6)],
                grid_point={"op": op, **params},
                notes=list(notes),
                extra={"stated": {**stated, f"total_{op}_time_ms": ms,
                                  f"total_{op}_count": count}},
                line=self.line,
            ))
        return out


class KvReport:
    name = NAME
    description = "seed 003's ======Report====== blocks (servers, clients, put/get totals)"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        blocks: list[_Block] = []
        cache: tuple[str, int, int] | None = None
        annotation: str | None = None
        for no, line in enumerate(read_lines(path), 1):
            tokens = list(_TOKEN.finditer(line))
            comment = _COMMENT.match(line)
            if comment and not tokens:
                annotation = comment.group(1)
                continue
            if not tokens:
                noise.skip(no, line)
                continue
            for tok in tokens:
                kind = tok.lastgroup
                value = _SUB[kind].match(tok.group(0))
                _check(kind, value, numbers.at(path, no))
                if kind == "cache":
                    if cache is not None:
                        result.notes.append(f"line {cache[2]}: cache line not followed by a "
                                            "report block before the next one; ignored")
                    cache = (value.group(1), int(value.group(2)), no)
                elif kind == "header" or not blocks or kind in blocks[-1].fields:
                    blocks.append(_Block(no, cache, annotation, headed=kind == "header"))
                    cache = annotation = None
                    if kind != "header":
                        blocks[-1].fields[kind] = (value.group(1), no)
                else:
                    blocks[-1].fields[kind] = (value.group(1), no)
        if cache is not None:
            result.notes.append(f"line {cache[2]}: cache line after the last block; ignored")
        result.skipped = noise.lines
        for block in blocks:
            if not block.fields:
                result.notes.append(f"line {block.line}: empty report block")
            result.runs.extend(block.runs())
        if not result.runs:
            raise nothing_found(path, NAME)
        return result
