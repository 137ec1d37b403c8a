"""A minimal Prometheus HTTP API client (GET /api/v1/query_range) for `gpupool usage`.

Plain urllib: three range queries do not justify a dependency. Long ranges are cut into requests of at most
MAX_POINTS steps (Prometheus refuses more than 11,000 points per series in one query).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from gpupool.analysis.usage import Series, Window

MAX_POINTS = 10_000
TIMEOUT = 120


class PrometheusError(Exception):
    """Prometheus could not be reached or refused a query: reported as `error: ...`, exit 1."""


def _get(base: str, path: str, params: dict[str, str]) -> dict:
    url = base.rstrip("/") + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:  # noqa: S310 (the user's Prometheus URL)
            body = json.loads(resp.read().decode())
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read().decode()).get("error", "")
        except (ValueError, OSError):
            detail = ""
        raise PrometheusError(f"{base}: HTTP {exc.code}{': ' + detail if detail else ''}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PrometheusError(f"cannot query Prometheus at {base}: {reason}") from None
    if body.get("status") != "success":
        raise PrometheusError(f"{base}: {body.get('errorType', 'error')}: {body.get('error', '')}")
    return body["data"]


def query_range(base: str, query: str, window: Window) -> list[Series]:
    """QUERY evaluated at every step end in WINDOW; series of the same labels across requests are joined."""
    out: dict[tuple, dict[float, float]] = {}
    labels_of: dict[tuple, dict[str, str]] = {}
    first = window.start + window.step
    while first <= window.end + 1e-6:
        last = min(first + (MAX_POINTS - 1) * window.step, window.end)
        data = _get(
            base,
            "/api/v1/query_range",
            {"query": query, "start": f"{first:.3f}", "end": f"{last:.3f}", "step": f"{window.step:g}"},
        )
        for item in data.get("result", []):
            metric = dict(item.get("metric", {}))
            key = tuple(sorted(metric.items()))
            labels_of[key] = metric
            samples = out.setdefault(key, {})
            for t, v in item.get("values", []):
                samples[float(t)] = float(v)
        first = last + window.step
    return [Series(labels_of[k], tuple(sorted(v.items()))) for k, v in out.items()]
