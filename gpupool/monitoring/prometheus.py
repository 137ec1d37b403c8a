"""A minimal Prometheus HTTP API client (GET /api/v1/query_range) for `gpupool usage`: range queries.

Plain urllib: a handful of range queries do not justify a dependency. The connection (URL, credentials, TLS) is
gpupool.monitoring.prom_connection's, one bounded request gpupool.monitoring.prom_http's; this module asks
the range and checks what comes back (docs/explanation/monitoring.md, "Connecting to Prometheus"):

- Range: long ranges are cut into requests of at most POINTS_PER_REQUEST steps (Prometheus refuses more
  than 11,000 points per series in one query: prometheus web/api/v1/api.go queryRange, "exceeded maximum
  resolution of 11,000 points per timeseries"), and a range of more than Limits.max_points steps is refused
  before any request.
- Answers: the matrix is checked (resultType, result, metric, values of [time, "value"] pairs); a value's
  sign and finiteness are gpupool.analysis.usage's to judge, which knows what each series means.
"""

from __future__ import annotations

import json
import math
from typing import Any

from gpupool.monitoring.prom_connection import (  # noqa: F401 (the client's public names, used by gpupool.cli.usage)
    DEFAULT_MAX_POINTS,
    DEFAULT_MAX_RESPONSE,
    DEFAULT_TIMEOUT,
    POINTS_PER_REQUEST,
    ConfigError,
    Connection,
    Limits,
    PrometheusError,
    connect,
)
from gpupool.monitoring.prom_http import get, shown
from gpupool.monitoring.series import Series, Window, series_name


def requests_for(window: Window, limits: Limits) -> list[tuple[float, float]]:
    """(first, last) evaluation times of each request WINDOW needs; ConfigError beyond Limits.max_points,
    before any request is sent."""
    steps, per = window.steps, limits.points_per_request
    if not math.isfinite(window.start) or not math.isfinite(window.end) or steps < 1:
        raise ConfigError("the range must be finite and at least one --step long")
    if steps > limits.max_points:
        need = -(-steps // per)
        wider = _duration_text(window.step * -(-steps // limits.max_points))
        raise ConfigError(
            f"the range is {steps:,} steps of {_duration_text(window.step)}, more than --max-points "
            f"{limits.max_points:,}: each query would take {need:,} requests of {per:,} points (Prometheus "
            f"returns at most 11,000 points per series per request); give --step {wider} or more, a shorter "
            "range, or raise --max-points"
        )
    return [
        (window.start + (i + 1) * window.step, window.start + min(i + per, steps) * window.step)
        for i in range(0, steps, per)
    ]


def _duration_text(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _seconds(x: float) -> str:
    """Unix seconds or a step in seconds as Prometheus reads them (every digit kept: `g` rounds 1234567)."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


def query_range(conn: Connection, query: str, window: Window) -> list[Series]:
    """QUERY evaluated at every step end in WINDOW; series of the same labels across requests are joined."""
    out: dict[tuple, dict[float, float]] = {}
    labels_of: dict[tuple, dict[str, str]] = {}
    for first, last in requests_for(window, conn.limits):
        data = get(
            conn,
            "/api/v1/query_range",
            {"query": query, "start": _seconds(first), "end": _seconds(last), "step": _seconds(window.step)},
        )
        for metric, values in _matrix(conn, data):
            key = tuple(sorted(metric.items()))
            labels_of[key] = metric
            out.setdefault(key, {}).update(values)
    return [Series(labels_of[k], tuple(sorted(v.items()))) for k, v in out.items()]


def _matrix(conn: Connection, data: dict) -> list[tuple[dict[str, str], dict[float, float]]]:
    """The series of a range query's data, each sample a finite time and a number (its value's sign and
    finiteness are gpupool.analysis.usage's to judge: it knows what the series means)."""
    where = conn.display

    def bad(what: str) -> PrometheusError:
        return PrometheusError(f"{where}: the answer is not a range query's matrix: {what}")

    if data.get("resultType") != "matrix":
        raise bad(f'resultType is {shown(json.dumps(data.get("resultType")), 40)}, not "matrix"')
    result = data.get("result")
    if not isinstance(result, list):
        raise bad("data.result is not a list")
    out = []
    for i, item in enumerate(result):
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            raise bad(f"result[{i}] is not an object with a metric object")
        metric = item.get("metric", {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
            raise bad(f"result[{i}].metric has a label that is not a string")
        values = item.get("values")
        if not isinstance(values, list):
            raise bad(f"result[{i}] ({series_name(metric)}) has no values list")
        samples: dict[float, float] = {}
        for pair in values:
            t = _time_of(pair)
            if t is None:
                raise bad(f'a sample of {series_name(metric)} is not a [unix time, "value"] pair')
            try:
                samples[t] = float(pair[1])
            except ValueError:
                raise PrometheusError(f"{where}: a sample of {series_name(metric)} is not a number") from None
        out.append((dict(metric), samples))
    return out


def _time_of(pair: Any) -> float | None:
    """The time of a [time, "value"] pair, or None when PAIR is no such pair (or its time is not finite)."""
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        return None
    if isinstance(pair[0], bool) or not isinstance(pair[0], int | float):
        return None
    try:
        t = float(pair[0])
    except OverflowError:  # an integer of hundreds of digits
        return None
    return t if math.isfinite(t) else None
