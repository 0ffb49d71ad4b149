"""Service-level objectives (``p99 < 1ms and p50 < 200us``) and the capacity search's
settings (a spec's `search:` block, `harness run --search`): read once for the spec's
validation, the search (`harness.run.capacity`) and the figures that draw the limits
(`harness.analysis`). It imports nothing of the kit but its errors, so all of them may
import it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import SpecError

#: SLO metrics and the summary field and quantile each reads.
METRICS: dict[str, tuple[str, float | None]] = {
    "mean": ("latency_mean_ms", None),
    "p50": ("latency_p50_ms", 0.5),
    "p90": ("latency_p90_ms", 0.9),
    "p99": ("latency_p99_ms", 0.99),
    "p99.9": ("latency_p999_ms", 0.999),
}
UNITS_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3}
_CONDITION = re.compile(r"^\s*(mean|p50|p90|p99\.9|p99)\s*(<=|<)\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)"
                        r"\s*(us|µs|ms|s)\s*$")


@dataclass(frozen=True)
class Condition:
    """One SLO condition: `metric` < `limit_ms`."""

    metric: str
    limit_ms: float
    text: str

    @property
    def field(self) -> str:
        return METRICS[self.metric][0]


@dataclass(frozen=True)
class Slo:
    conditions: tuple[Condition, ...]

    @property
    def text(self) -> str:
        return " and ".join(c.text for c in self.conditions)


def parse_slo(text: str, where: str = "--search") -> Slo:
    """``p99 < 1ms and p50 < 200us``: metrics mean, p50, p90, p99, p99.9; units us, ms,
    s. SpecError naming `where` and the bad part otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError([f"{where}: give an SLO such as \"p99 < 1ms\""])
    out = []
    for part in re.split(r"\s+and\s+", text.strip()):
        m = _CONDITION.match(part)
        if not m:
            raise SpecError([f"{where}: cannot read {part.strip()!r}; write METRIC < NUMBER "
                            f"UNIT, METRIC one of {', '.join(METRICS)}, UNIT us, ms or s, "
                            "conditions joined by 'and' (e.g. \"p99 < 1ms and p50 < 200us\")"])
        metric, _, number, unit = m.groups()
        limit = float(number) * UNITS_MS[unit]
        if not limit > 0:
            raise SpecError([f"{where}: {part.strip()!r}: the limit must be above 0"])
        out.append(Condition(metric, limit, f"{metric} < {float(number):.3g} {unit}"))
    if len({c.metric for c in out}) != len(out):
        raise SpecError([f"{where}: a metric appears twice in {text!r}"])
    return Slo(tuple(out))


DEFAULT_RESOLUTION = 0.05
DEFAULT_MAX_STEPS = 30


@dataclass(frozen=True)
class SearchSettings:
    slo: Slo
    resolution: float = DEFAULT_RESOLUTION
    max_steps: int = DEFAULT_MAX_STEPS


def settings_from(block: Any, cli_slo: str | None = None,
                  cli_resolution: float | None = None) -> SearchSettings | None:
    """The search asked for: the CLI's `--search` (and `--resolution`) over the spec's
    `search:` block ({slo, resolution, max_steps}); None when neither asks."""
    if block is None and cli_slo is None:
        return None
    if block is not None and not isinstance(block, Mapping):
        raise SpecError(["search: expected {slo: \"p99 < 1ms\", resolution: 0.05, max_steps: 30}"])
    block = dict(block or {})
    unknown = sorted(set(map(str, block)) - {"slo", "resolution", "max_steps"})
    if unknown:
        raise SpecError([f"search: unknown field(s) {unknown}; known: slo, resolution, "
                        "max_steps"])
    slo = parse_slo(cli_slo, "--search") if cli_slo is not None else parse_slo(
        block.get("slo"), "search.slo")
    res = cli_resolution if cli_resolution is not None else block.get(
        "resolution", DEFAULT_RESOLUTION)
    if isinstance(res, bool) or not isinstance(res, (int, float)) or not 0.001 <= res <= 1:
        raise SpecError(["search.resolution: a share from 0.001 to 1 (0.05: stop when the "
                        "bracket is within 5%)"])
    steps = block.get("max_steps", DEFAULT_MAX_STEPS)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 3 <= steps <= 200:
        raise SpecError(["search.max_steps: an integer from 3 to 200"])
    return SearchSettings(slo, float(res), steps)
