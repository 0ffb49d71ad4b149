"""`cluster-perf`: output of eXtremeDB's cluster_perf sample (seed 002).

One output is a settings block (``Name : value`` lines, among them ``Number of nodes : 2``),
the node list (``Node 127.0.0.1:20000, rank 1``), then per operation a title line
(``Insert:``, ``Hash search:``, ...), progress dots, and a result::

    100000 objects: 562 milliseconds,(5 microsecs/object)
    .................... 100000 searches: 113 milliseconds (1microsecs/search)

Pasted text loses spaces (``100000objects:``, ``Hashsearch:``), so matching ignores them.
A file may hold several outputs (the seed: a local cluster, then a network cluster); a new
output starts at a settings line seen after results.

One run per operation result: ``count`` aggregated records of (milliseconds / count)
each, back to back; per-op latency comes from the unrounded total (562 ms / 100000 =
5.62 µs), the rounded-down figure the tool printed is kept in ``extra.stated``. Params:
``op`` (insert, hash_search, tree_search, sequential, search_delete), ``nodes`` (from
"Number of nodes") and ``mode``: ``single-node`` for one node, ``local-cluster`` when all
listed nodes are on 127.0.0.1/localhost, else ``network-cluster`` (empty when the output
lists no nodes). The node list and settings go in ``extra``.
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
    slug,
)

NAME = "cluster-perf"

#: Operation titles (letters only, lower case) -> the study's op names.
OPS: dict[str, str] = {
    "insert": "insert",
    "hashsearch": "hash_search",
    "treesearch": "tree_search",
    "sequential": "sequential",
    "searchdelete": "search_delete",
}

_RESULT = re.compile(  # (?<!\d): tried once per run of digits, not from each digit in it
    r"(?<!\d)(\d+)\s*(objects|searches)\s*:\s*(\d+(?:\.\d+)?)\s*milliseconds"
    r"\s*,?\s*(?:\(\s*(\d+(?:\.\d+)?)\s*microsecs\s*/\s*(\w+)\s*\))?",
    re.IGNORECASE,
)
_TITLE = re.compile(r"^\s*([A-Za-z][A-Za-z /_-]*?)\s*:\s*$")
_SETTING = re.compile(r"^\s*([A-Za-z][A-Za-z ()-]*?)\s+:\s+(\S.*?)\s*$")
_NODE = re.compile(r"^\s*Node\s+([\w.\-\[\]:]+?):(\d+)\s*,\s*rank\s+(\d+)\s*$", re.IGNORECASE)
_DOTS = re.compile(r"^[\s.]+$")
_WHOLE = re.compile(r"^\d+$", re.ASCII)
_LOCAL = {"127.0.0.1", "localhost", "::1"}


def _mode(nodes: int | None, hosts: list[str]) -> str | None:
    if nodes == 1:
        return "single-node"
    if not hosts:
        return None
    return "local-cluster" if all(h in _LOCAL for h in hosts) else "network-cluster"


class _Output:
    """State of one cluster_perf output while its lines are read."""

    def __init__(self) -> None:
        self.settings: dict[str, str] = {}
        self.nodes: list[dict[str, Any]] = []
        self.results: list[tuple[int, str, int, float, dict[str, str]]] = []
        self.title: str | None = None

    def runs(self, index: int) -> list[ParsedRun]:
        n = self.settings.get("Number of nodes")
        nodes = int(n) if n and _WHOLE.match(n) else None  # checked as read
        hosts = [node["host"] for node in self.nodes]
        mode = _mode(nodes, hosts)
        point: dict[str, Any] = {}
        if nodes is not None:
            point["nodes"] = nodes
        if mode is not None:
            point["mode"] = mode
        notes = [] if nodes is not None else ["the output does not state the number of nodes"]
        out = []
        for line, op, count, ms, stated in self.results:
            out.append(ParsedRun(
                records=[Records.aggregate(op, count, ms * 1e6)],
                grid_point={"op": op, **point},
                notes=list(notes),
                extra={"stated": stated, "cluster_nodes": self.nodes,
                       "settings": self.settings, "output": index},
                line=line,
            ))
        return out


class ClusterPerf:
    name = NAME
    description = "eXtremeDB cluster_perf output: 'N objects: T milliseconds' per operation"

    def parse(self, path: Path, options: ImportOptions) -> ImportResult:
        noise = Noise()
        result = ImportResult(NAME, Path(path))
        outputs = [_Output()]
        for no, line in enumerate(read_lines(path), 1):
            cur = outputs[-1]
            found = _RESULT.search(line)
            if found:
                count, _unit, ms, us, per = found.groups()
                title = cur.title
                if title is None:
                    result.notes.append(f"line {no}: result without an operation title; "
                                        "not imported")
                    noise.skip(no, line)
                    continue
                key = re.sub(r"[^a-z]", "", title.lower())
                op = OPS.get(key) or slug(title)
                if key not in OPS:
                    result.notes.append(f"line {no}: operation {title!r} is not one of the "
                                        f"seed's; imported as op {op!r}")
                stated = {"line": line.strip(" ."), "milliseconds": ms, "count": count}
                if us is not None:
                    stated[f"microsecs_per_{per.lower()}"] = us
                where = numbers.at(path, no)
                cur.results.append((no, op, numbers.count(count, where, f"{op} count"),
                                    numbers.amount(ms, where, f"{op} milliseconds"), stated))
                cur.title = None
                continue
            if _DOTS.match(line):
                continue  # progress dots: output, but nothing in them
            node = _NODE.match(line)
            if node:
                cur.nodes.append({"host": node.group(1), "port": int(node.group(2)),
                                  "rank": int(node.group(3))})
                continue
            setting = _SETTING.match(line)
            if setting:
                if cur.results:
                    outputs.append(cur := _Output())
                name, value = setting.group(1).strip(), setting.group(2)
                if name == "Number of nodes" and _WHOLE.match(value):
                    numbers.count(value, numbers.at(path, no), name)
                cur.settings[name] = value
                continue
            title = _TITLE.match(line)
            if title:
                cur.title = title.group(1)
                if re.sub(r"[^a-z]", "", cur.title.lower()) in OPS:
                    continue
            noise.skip(no, line)  # unknown titles count as noise unless a result follows
        result.skipped = noise.lines
        for i, out in enumerate(outputs, 1):
            result.runs.extend(out.runs(i))
        if not result.runs:
            raise nothing_found(path, NAME)
        return result
