"""`gpupool usage SPEC --prometheus URL`: what tenants allocated and used over a time range, and its charge.

Formats: table (default), markdown, json (docs/monitoring.md) and csv (line items per tenant and pool).
Exit status: 0 = printed, 1 = invalid spec or Prometheus unreachable / refused a query, 2 = usage error.
"""

from __future__ import annotations

import os
import re
import time

FORMATS = ("table", "json", "markdown", "csv")
_DURATION = re.compile(r"^(\d+)(s|m|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def register(sub) -> None:
    p = sub.add_parser(
        "usage",
        help="measured usage per tenant, cost centre and pool from Prometheus, and its charge",
        description="Granted, allocated and used GPU-equivalents and GPU-hours per tenant and cost centre, "
        "efficiency, idle allocations and the charge (allocated GPU-hours x price); per pool the baseline "
        "utilisation and the capacity pooling could recover. Reads gpupool's monitoring series from "
        "Prometheus (docs/monitoring.md).",
    )
    from gpupool.cli.common import add_output_format, add_spec_argument

    add_spec_argument(p)
    p.add_argument(
        "--prometheus",
        metavar="URL",
        default=os.environ.get("GPUPOOL_PROMETHEUS_URL"),
        help="Prometheus base URL, e.g. http://localhost:9090 (default: $GPUPOOL_PROMETHEUS_URL)",
    )
    p.add_argument(
        "--since", metavar="DURATION", default="7d", help="length of the range: 30m, 12h, 7d, 4w (default 7d)"
    )
    p.add_argument("--start", metavar="TIME", help="start of the range (RFC 3339 or unix seconds); overrides --since")
    p.add_argument("--end", metavar="TIME", help="end of the range (RFC 3339 or unix seconds; default now)")
    p.add_argument("--step", metavar="DURATION", default="5m", help="resolution (default 5m)")
    add_output_format(p, FORMATS, "table", help="table (default), json (docs/monitoring.md), markdown or csv")
    p.set_defaults(func=run)


def duration(text: str, flag: str) -> int:
    from gpupool.cli.common import UsageError

    match = _DURATION.match(text or "")
    if not match or int(match.group(1)) == 0:
        raise UsageError(f"{flag}: must be a positive duration such as 30m, 12h, 7d or 4w")
    return int(match.group(1)) * _UNITS[match.group(2)]


def instant(text: str, flag: str) -> float:
    from datetime import datetime

    from gpupool.cli.common import UsageError

    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(f"{flag}: must be RFC 3339 (2026-12-01T00:00:00Z) or unix seconds") from None


def window(args):
    """The range: its length in whole steps, ending at --end as given, or at now rounded down to a step."""
    from gpupool.analysis.usage import Window
    from gpupool.cli.common import UsageError

    step = duration(args.step, "--step")
    end = instant(args.end, "--end") if args.end else time.time() // step * step
    start = instant(args.start, "--start") if args.start else end - duration(args.since, "--since")
    steps = int((end - start) // step)
    if steps < 1:
        raise UsageError("the range must be at least one --step long and --start before --end")
    return Window(end - steps * step, end, step)


def run(args) -> int:
    import sys

    from gpupool.analysis import usage
    from gpupool.cli.common import UsageError, spec_path, valid_spec_or_report
    from gpupool.monitoring import promql as q
    from gpupool.monitoring.prometheus import PrometheusError, query_range

    if not args.prometheus:
        raise UsageError("give --prometheus URL (or set GPUPOOL_PROMETHEUS_URL)")
    w = window(args)
    spec = valid_spec_or_report(spec_path(args), "invalid, no usage report")
    if spec is None:
        return 1
    try:
        results = {
            name: query_range(args.prometheus, query, w)
            for name, query in (
                ("allocated", q.usage_allocated()),
                ("used", q.usage_used()),
                ("devices", q.usage_devices()),
                ("pools", q.node_pool_from_labels()),
            )
        }
    except PrometheusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    report = usage.compute(
        spec, w, results["allocated"], results["used"], results["devices"], results["pools"], args.prometheus
    )
    from gpupool.present.usage import FORMATTERS

    print(FORMATTERS[args.output](report), end="")
    return 0
