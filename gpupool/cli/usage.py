"""`gpupool usage SPEC --prometheus URL`: what tenants allocated and used over a time range, and its charge.

Formats: table (default), markdown, json (docs/explanation/monitoring.md) and csv (line items per tenant and pool).
Exit status: 0 = printed, 1 = invalid spec, Prometheus unreachable / refused a query / gave an unusable
answer, 2 = usage error (a flag, the URL, a credential file, a range too long), 3 = printed, but the figures
are not the whole truth (a period without data, a node's exporter silent while its pods held GPUs, requests
or MIG profiles with no weight): the report names each, and `-o json` says `"trusted": false`. Every failure
is raised as UsageError or CommandError, so that `-o json` prints a JSON error object (gpupool.cli.main).
"""

from __future__ import annotations

import os
import sys
import time

FORMATS = ("table", "json", "markdown", "csv")
# Unix seconds at or above this are milliseconds (year 5138 in seconds; Grafana's 13-digit ms are ~1.7e12).
MS_THRESHOLD = 1e11
MAX_TIMEOUT = 86400.0
UNTRUSTED = 3  # the exit status of a report printed with gaps (docs/explanation/monitoring.md)
WINDOWS = ("today", "yesterday", "week", "lastweek", "month", "lastmonth")


def register(sub) -> None:
    from gpupool.cli.common import add_output_format, add_spec_argument
    from gpupool.monitoring import prometheus as prom
    from gpupool.spec.input_limits import size_text

    p = sub.add_parser(
        "usage",
        help="measured usage per tenant, cost centre and pool from Prometheus, and its charge",
        description="Granted, allocated and used GPU-equivalents and GPU-hours per tenant and cost centre, "
        "efficiency, idle allocations and the charge (allocated GPU-hours x price); per pool the baseline "
        "utilisation and the capacity pooling could recover. Reads gpupool's monitoring series from "
        "Prometheus (docs/explanation/monitoring.md, also for credentials, TLS and the limits below).",
    )
    add_spec_argument(p)
    p.add_argument(
        "--prometheus",
        metavar="URL",
        default=os.environ.get("GPUPOOL_PROMETHEUS_URL"),
        help="Prometheus base URL, e.g. http://localhost:9090 or https://user:password@prom.example "
        "(default: $GPUPOOL_PROMETHEUS_URL); the password is sent as basic auth and never printed",
    )
    p.add_argument(
        "--since",
        metavar="DURATION",
        default="7d",
        help="length of the range, in Prometheus' duration syntax: 30m, 12h, 7d, 4w, 1h30m (default 7d)",
    )
    p.add_argument("--start", metavar="TIME", help="start of the range (RFC 3339 or unix seconds); overrides --since")
    p.add_argument("--end", metavar="TIME", help="end of the range (RFC 3339 or unix seconds; default now)")
    _add_range_flags(p)
    auth = p.add_argument_group("credentials and TLS (docs/explanation/monitoring.md, 'Connecting to Prometheus')")
    auth.add_argument(
        "--basic-auth-file",
        metavar="FILE",
        help="basic auth: FILE holds `user:password` (or the password alone, with --basic-auth-user)",
    )
    auth.add_argument(
        "--basic-auth-user", metavar="USER", help="the basic auth user; --basic-auth-file holds the password"
    )
    auth.add_argument("--bearer-token-file", metavar="FILE", help="send `Authorization: Bearer` with the token in FILE")
    auth.add_argument("--ca-file", metavar="FILE", help="trust the CA certificates (PEM) in FILE for an https:// URL")
    auth.add_argument(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not verify the server's certificate (if you must: anyone on the path can read the credentials)",
    )
    limits = p.add_argument_group("limits")
    limits.add_argument(
        "--timeout",
        metavar="DURATION",
        default=f"{int(prom.DEFAULT_TIMEOUT)}s",
        help=f"longest wait for one whole request, answer included (default {int(prom.DEFAULT_TIMEOUT)}s)",
    )
    limits.add_argument(
        "--max-response-size",
        metavar="SIZE",
        type=_size,
        default=prom.DEFAULT_MAX_RESPONSE,
        help=f"read no answer larger than this (default {size_text(prom.DEFAULT_MAX_RESPONSE)})",
    )
    limits.add_argument(
        "--max-points",
        metavar="N",
        type=_count,
        default=prom.DEFAULT_MAX_POINTS,
        help=f"refuse a range of more steps than this, before any request (default {prom.DEFAULT_MAX_POINTS:,}: "
        f"{prom.DEFAULT_MAX_POINTS // prom.POINTS_PER_REQUEST} requests of {prom.POINTS_PER_REQUEST:,} points per query)",
    )
    add_output_format(
        p, FORMATS, "table", help="table (default), json (docs/explanation/monitoring.md), markdown or csv"
    )
    p.set_defaults(func=run)


def _add_range_flags(p) -> None:
    p.add_argument(
        "--window",
        choices=WINDOWS,
        help="a calendar range in UTC instead of --since/--start/--end: today, yesterday, week (Monday to now), "
        "lastweek, month (the 1st to now), lastmonth",
    )
    p.add_argument(
        "--step",
        metavar="DURATION",
        default="5m",
        help="how the range is cut for peaks and days, a multiple of --resolution (default 5m); the totals do "
        "not depend on it",
    )
    p.add_argument(
        "--resolution",
        metavar="DURATION",
        default="1m",
        help="how often within each step allocation and use are sampled and added up (default 1m: "
        "Prometheus' usual scrape interval; pods shorter than it may be missed)",
    )
    p.add_argument(
        "--spread-idle",
        action="store_true",
        help="spread each pool's unallocated cost over the tenants (and other namespaces) that allocated in it, "
        "in proportion to their GPU-hours there (OpenCost's 'share idle')",
    )
    p.add_argument("--daily", action="store_true", help="add a per-day (UTC) breakdown to table, markdown and csv")


def _size(text: str) -> int:
    import argparse

    from gpupool.spec.input_limits import parse_size

    try:
        n = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1 byte")
    return n


def _count(text: str) -> int:
    import argparse

    if not text.isascii() or not text.isdigit() or len(text) > 12 or int(text) < 1:
        raise argparse.ArgumentTypeError("give a whole number of at least 1")
    return int(text)


def duration(text: str, flag: str) -> float:
    """TEXT in seconds, in Prometheus' duration grammar (gpupool.monitoring.duration); positive."""
    from gpupool.cli.common import UsageError
    from gpupool.monitoring.duration import DurationError, parse_seconds

    try:
        seconds = parse_seconds(text or "")
    except DurationError as exc:
        raise UsageError(f"{flag}: {exc}") from None
    if seconds <= 0:
        raise UsageError(f"{flag}: must be a positive duration such as 30m, 12h, 7d or 4w")
    return seconds


def instant(text: str, flag: str) -> float:
    """TEXT as unix seconds: a number of seconds or RFC 3339; non-finite, negative and millisecond values are
    refused (Grafana writes its URLs' from/to in milliseconds: 13 digits)."""
    from datetime import datetime

    from gpupool.cli.common import UsageError

    try:
        value = float(text)
        number = True
    except ValueError:
        number = False
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"{flag}: must be RFC 3339 (2026-12-01T00:00:00Z) or unix seconds") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UsageError(f"{flag}: must be a finite time: RFC 3339 (2026-12-01T00:00:00Z) or unix seconds")
    if number and abs(value) >= MS_THRESHOLD:
        raise UsageError(
            f"{flag}: looks like milliseconds (as Grafana writes them, 13 digits), not unix seconds: "
            "divide by 1000, or give RFC 3339 (2026-12-01T00:00:00Z)"
        )
    if value < 0:
        raise UsageError(f"{flag}: must not be before 1970 (unix seconds are counted from 1970-01-01)")
    return value


def calendar(name: str, now: float) -> tuple[float, float]:
    """(start, end) of the calendar window NAME in UTC, NOW being the current unix time."""
    from datetime import UTC, datetime, timedelta

    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    previous_first = (first - timedelta(days=1)).replace(day=1)
    ranges = {
        "today": (today, None),
        "yesterday": (today - timedelta(days=1), today),
        "week": (monday, None),
        "lastweek": (monday - timedelta(days=7), monday),
        "month": (first, None),
        "lastmonth": (previous_first, first),
    }
    start, end = ranges[name]
    return start.timestamp(), (now if end is None else end.timestamp())


def resolution(args, step: float) -> float:
    from gpupool.cli.common import UsageError

    res = min(duration(args.resolution, "--resolution"), step)
    if res < 1 or res != int(res):
        raise UsageError("--resolution: must be a whole number of seconds, at least 1s")
    if step % res:
        raise UsageError(f"--step: must be a multiple of --resolution ({res:g}s), so that the steps tile the range")
    return res


def window(args):
    """The range: whole steps ending at --end (or the --window's end, or now) rounded down to the resolution
    (to a step for now), so that every step's samples sit on multiples of the resolution."""
    from gpupool.cli.common import UsageError
    from gpupool.monitoring.series import Window

    step = duration(args.step, "--step")
    if step < 1:
        raise UsageError("--step: must be at least 1s")
    res = resolution(args, step)
    if getattr(args, "window", None):
        if args.start or args.end:
            raise UsageError("--window: give it or --start/--end, not both")
        start, end = calendar(args.window, time.time())
        end = end // res * res
        if end - start < step:
            raise UsageError(f"--window {args.window}: the range so far is shorter than one --step")
        steps = int((end - start) // step)
        return Window(end - steps * step, end, step)
    end = instant(args.end, "--end") // res * res if args.end else time.time() // step * step
    start = instant(args.start, "--start") if args.start else end - duration(args.since, "--since")
    if start < 0:
        raise UsageError("--since: the range would start before 1970")
    steps = int((end - start) // step)
    if steps < 1:
        raise UsageError("the range must be at least one --step long and --start before --end")
    return Window(end - steps * step, end, step)


def run(args) -> int:
    from gpupool.analysis import usage
    from gpupool.analysis.usage_source import PrometheusSource
    from gpupool.cli.common import CommandError, UsageError, spec_path, valid_spec_or_report
    from gpupool.monitoring.prometheus import ConfigError, Limits, PrometheusError, connect, requests_for

    if not args.prometheus:
        raise UsageError("give --prometheus URL (or set GPUPOOL_PROMETHEUS_URL)")
    w = window(args)
    timeout = duration(args.timeout, "--timeout")
    if timeout > MAX_TIMEOUT:  # no range query takes a day: a longer one is a typo
        raise UsageError("--timeout: at most 24h")
    limits = Limits(
        timeout=timeout,
        max_response_bytes=args.max_response_size,
        max_points=args.max_points,
    )
    try:
        requests_for(w, limits)  # a range too long is refused before any request, and before reading files
        conn = connect(
            args.prometheus,
            basic_auth_file=args.basic_auth_file,
            basic_auth_user=args.basic_auth_user,
            bearer_token_file=args.bearer_token_file,
            ca_file=args.ca_file,
            insecure_skip_tls_verify=args.insecure_skip_tls_verify,
            limits=limits,
        )
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    spec = valid_spec_or_report(spec_path(args), "invalid, no usage report")
    if spec is None:
        raise CommandError("the spec is invalid: no usage report (the diagnostics are above)")
    source = PrometheusSource(conn, spec, resolution(args, w.step))
    try:
        report = usage.compute(spec, w, source, conn.display, spread_idle=args.spread_idle)
    except (PrometheusError, usage.UsageDataError) as exc:
        raise CommandError(str(exc)) from None
    from gpupool.present.usage import FORMATTERS

    try:
        text = FORMATTERS[args.output](report, daily=args.daily)
    except ValueError:  # format_json's allow_nan=False: the last guard, compute() checks every figure first
        raise CommandError("the report holds a figure that is not a finite number; no report printed") from None
    print(text, end="")
    if report.untrusted:
        for why in report.untrusted:
            print(f"gpupool usage: not the whole truth: {why} (the report names each)", file=sys.stderr)
        return UNTRUSTED
    return 0
