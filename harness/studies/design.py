"""A spec's facts in words, for a notebook's prose: read from the spec, never typed in,
so the text cannot drift from `experiments/*.yaml`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.spec import expand, load_spec


@dataclass(frozen=True)
class SpecDesign:
    file: str
    experiment: str
    configurations: int
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    repetitions: int
    ops_per_run: int | None
    duration_s: float | None
    warmup_ops: int
    processes: int
    connections: int
    inflight: int
    params: tuple[tuple[str, Any], ...]
    pause_us: float = 0.0

    def sentence(self) -> str:
        """One Markdown sentence: what the spec runs, how often and how long."""
        grid = " × ".join(f"`{k}` ({', '.join(map(str, v))})" for k, v in self.grid)
        keys = {k for k, _ in self.grid}
        size = (f"{self.ops_per_run:,} measured ops" if self.ops_per_run is not None
                else f"{self.duration_s:g} s of measured ops")
        warm = f" after {self.warmup_ops:,} warm-up ops" if self.warmup_ops else ""
        # Client counts the grid varies are in the grid, not here.
        clients = " × ".join(
            text for key, text in (
                ("clients.processes", _n(self.processes, "client process")),
                ("clients.connections", _n(self.connections, "connection")),
                ("clients.inflight", f"{self.inflight} in flight" if self.inflight > 1
                 else ""),
                ("clients.pause_us", f"a {self.pause_us:g} µs pause before each wait"
                 if self.pause_us else ""))
            if key not in keys and text)
        params = ", ".join(f"`{k}` = {v}" for k, v in self.params)
        return (f"`experiments/{self.file}` (experiment `{self.experiment}`): "
                f"{_n(self.configurations, 'configuration')}"
                + (f" ({grid})" if grid else "")
                + f", {_n(self.repetitions, 'repetition')} each; per run {size}{warm}"
                + (f", {clients}" if clients else "") + (f"; {params}" if params else "")
                + ".")


def _n(n: int, noun: str) -> str:
    plural = noun + ("es" if noun.endswith("s") else "s")
    return f"{n:,} {noun if n == 1 else plural}"


def spec_design(path: Path) -> SpecDesign:
    spec = load_spec(path)
    configs = {p.config_id for p in expand(spec)}
    return SpecDesign(
        file=Path(path).name, experiment=spec.name, configurations=len(configs),
        grid=tuple((k, tuple(v)) for k, v in spec.grid.items()), repetitions=spec.repetitions,
        ops_per_run=spec.size.ops, duration_s=spec.size.duration_s,
        warmup_ops=spec.size.warmup_ops, processes=spec.clients.processes,
        connections=spec.clients.connections, inflight=spec.clients.inflight,
        pause_us=spec.clients.pause_us,
        # The parameters the spec sets itself (not the workload's defaults, nor the grid's).
        params=tuple((k, v) for k, v in (spec.raw.get("params") or {}).items()
                     if k not in spec.grid))
