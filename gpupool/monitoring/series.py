"""What a Prometheus range query gives back, as gpupool reads it: a series (labels and samples) over a window
of evaluation steps. The Prometheus client (gpupool.monitoring.prometheus) makes them; `gpupool usage`'s
arithmetic (gpupool.analysis.usage) reads them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from gpupool.spec.diagnostics import printable


def series_name(labels: Mapping[str, str], limit: int = 300) -> str:
    """A series as PromQL writes it, `{namespace="a", node="n1"}`: label values escaped (they come from the
    server), the whole cut at LIMIT characters."""
    text = "{" + ", ".join(f"{printable(str(k))}={json.dumps(str(v))}" for k, v in sorted(labels.items())) + "}"
    text = printable(text)
    return text if len(text) <= limit else text[:limit] + "...}"


@dataclass(frozen=True)
class Series:
    """One range-query result: its labels and (timestamp, value) samples."""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Window:
    start: float  # unix seconds, exclusive: the first step ends at start + step
    end: float
    step: float

    @property
    def steps(self) -> int:
        return round((self.end - self.start) / self.step)

    @property
    def hours(self) -> float:
        return self.steps * self.step / 3600
