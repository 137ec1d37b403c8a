"""`gpupool plan SPEC`: capacity, grants, headroom, GPU-equivalents per tenant and cost centre, chargeback.

Formats: table (terminals, at most 100 columns for realistic specs), markdown (pull-request comments),
json (scripts; docs/plan-json.md) and csv (chargeback line items: one row per tenant, resource and pool).
Exit status: 0 = printed and every resource has non-negative headroom, 1 = invalid spec, 2 = usage error.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from fractions import Fraction
from typing import Sequence

FORMATS = ("table", "json", "markdown", "csv")


def register(sub) -> None:
    p = sub.add_parser("plan", help="capacity plan: supply, grants, headroom, GPU-equivalents, chargeback",
                       description="Per pool and resource: capacity supplied, granted, headroom and oversubscription; "
                                   "per tenant and cost centre: GPU-equivalents, share of the cluster and, with "
                                   "pricePerGpuHour on pools, chargeback per hour and per 730-hour month.")
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--format", choices=FORMATS, default="table",
                   help="table (default), json (docs/plan-json.md), markdown or csv (chargeback line items)")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from gpupool import plan as planmod
    from gpupool.commands.common import valid_spec_or_report

    if not Path(args.spec).is_file():
        print(f"error: {args.spec}: no such file", file=sys.stderr)
        return 2
    spec = valid_spec_or_report(args.spec, "invalid, no plan")
    if spec is None:
        return 1
    plan = planmod.compute(spec)
    print(FORMATTERS[args.format](plan), end="")
    return 0 if plan.ok else 1


# -- number formatting ---------------------------------------------------------------------------

def units(x: Fraction | int) -> str:
    """Device counts: integers as such, attributed (fractional) counts with two decimals."""
    x = Fraction(x)
    return str(int(x)) if x.denominator == 1 else f"{float(x):.2f}"


def eq(x: Fraction) -> str:
    return f"{float(x):.2f}"


def pct(x: Fraction) -> str:
    return f"{float(x) * 100:.1f}%"


def money(x: Fraction | None) -> str:
    return "unpriced" if x is None else f"{float(x):,.2f}"


def ratio(x: Fraction | None) -> str:
    return "-" if x is None else f"{float(x):.2f}x"


def signed(n: int) -> str:
    return f"+{n}" if n > 0 else str(n)


# -- tables --------------------------------------------------------------------------------------

def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Aligned columns separated by two spaces; columns in `right` are right-aligned (numbers)."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()
    return "\n".join([line(headers)] + [line(r) for r in rows]) + "\n"


def md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    sep = ["---:" if i in right else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# -- the sections, shared by table and markdown ----------------------------------------------------

def sections(plan) -> list[tuple[str, list[str], list[list[str]], tuple[int, ...]]]:
    """(title, headers, rows, right-aligned columns) for every section of the plan."""
    from gpupool.plan import HOURS_PER_MONTH

    out = []
    out.append(("Pools", ["POOL", "GPU", "NODES", "GPUS", "SHARING", "PRICE/GPU-H"],
                [[p.name, p.gpu_model, str(p.nodes), str(p.gpus), p.sharing,
                  money(p.price) if p.price is not None else "unpriced"] for p in plan.pools], (2, 3, 5)))
    rows = []
    for p in plan.pools:
        for s in p.supplies:
            rows.append([p.name, s.resource, s.formula, str(s.capacity), units(s.granted),
                         eq(s.granted_gpu_equivalents)])
    out.append(("Capacity by pool (GPU-EQ = grants in GPUs; a resource from several pools is split by capacity)",
                ["POOL", "RESOURCE", "SUPPLY", "CAPACITY", "GRANTED", "GPU-EQ"], rows, (3, 4, 5)))
    out.append(("Headroom by resource (under the oversubscription policy)",
                ["RESOURCE", "CAPACITY", "MAX", "ALLOWED", "GRANTED", "HEADROOM", "RATIO"],
                [[r.resource, str(r.capacity), f"{float(r.max_ratio):g}x", str(r.allowed), str(r.granted),
                  str(r.headroom), ratio(r.ratio)] for r in plan.resources], (1, 2, 3, 4, 5, 6)))
    out.append((f"Tenants (share of the cluster's {plan.total_gpus} GPUs)",
                ["TENANT", "TIER", "COST CENTRE", "GPU-EQ", "SHARE"],
                [[t.name + (" (offboarded)" if t.offboarded else ""), t.tier, t.cost_center or "-",
                  eq(t.gpu_equivalents), pct(t.share)] for t in plan.tenants], (3, 4)))
    rows = []
    for t in plan.tenants:
        for r, n in t.grants.items():
            rows.append([t.name, r, str(n), eq(t.resource_gpu_equivalents(r))])
    out.append(("Grants (GPU-EQ: a MIG instance counts its compute slices, a shared replica 1/replicas)",
                ["TENANT", "RESOURCE", "GRANTED", "GPU-EQ"], rows, (2, 3)))
    out.append(("Cost centres", ["COST CENTRE", "TENANTS", "GPU-EQ", "SHARE"],
                [[c.name, ", ".join(c.tenants), eq(c.gpu_equivalents), pct(c.share)] for c in plan.cost_centers],
                (2, 3)))
    if plan.priced:
        rows = []
        for t in sorted(plan.tenants, key=lambda t: (t.cost_center or "", t.name)):
            rows.append([t.cost_center or "-", t.name, eq(t.cost.priced_gpu_equivalents), money(t.cost.per_hour),
                         money(t.cost.per_month), eq(t.cost.unpriced_gpu_equivalents)])
        out.append((f"Chargeback per tenant (GPU-equivalents × price per GPU-hour; month = {HOURS_PER_MONTH} h)",
                    ["COST CENTRE", "TENANT", "GPU-EQ", "PER HOUR", "PER MONTH", "UNPRICED GPU-EQ"], rows,
                    (2, 3, 4, 5)))
        rows = [[c.name, eq(c.cost.priced_gpu_equivalents), money(c.cost.per_hour), money(c.cost.per_month),
                 eq(c.cost.unpriced_gpu_equivalents)] for c in plan.cost_centers]
        rows.append(["TOTAL", eq(plan.total.priced_gpu_equivalents), money(plan.total.per_hour),
                     money(plan.total.per_month), eq(plan.total.unpriced_gpu_equivalents)])
        out.append(("Chargeback per cost centre",
                    ["COST CENTRE", "GPU-EQ", "PER HOUR", "PER MONTH", "UNPRICED GPU-EQ"], rows, (1, 2, 3, 4)))
    return out


def _summary(plan) -> str:
    granted = eq(plan.total.gpu_equivalents)
    return (f"{plan.total_gpus} GPUs in {len(plan.pools)} pools; {len(plan.tenants)} tenants granted "
            f"{granted} GPU-equivalents ({pct(plan.total.gpu_equivalents / plan.total_gpus) if plan.total_gpus else '-'}"
            " of the cluster)")


def _warnings(plan) -> list[str]:
    out = []
    for r in plan.over:
        out.append(f"⚠ {r.resource}: granted {r.granted} but the policy allows {r.allowed} "
                   f"(capacity {r.capacity} × {float(r.max_ratio):g}): headroom {r.headroom}")
    if not plan.priced:
        out.append("no pool has pricePerGpuHour: no chargeback")
    elif any(p.price is None for p in plan.pools):
        names = ", ".join(p.name for p in plan.pools if p.price is None)
        out.append(f"unpriced pools (GPU-equivalents counted, not charged): {names}")
    return out


def format_table(plan) -> str:
    parts = [f"Capacity plan: cluster {plan.cluster} ({plan.source})\n{_summary(plan)}\n"]
    for title, headers, rows, right in sections(plan):
        parts.append(f"{title}\n" + text_table(headers, rows, right))
    warnings = _warnings(plan)
    if warnings:
        parts.append("\n".join(warnings) + "\n")
    return "\n".join(parts)


def format_markdown(plan) -> str:
    parts = [f"## gpupool plan: cluster `{plan.cluster}`\n\n{_summary(plan)}.\n"]
    for title, headers, rows, right in sections(plan):
        parts.append(f"### {title}\n\n" + md_table(headers, rows, right))
    warnings = _warnings(plan)
    if warnings:
        parts.append("\n".join(f"- {w}" for w in warnings) + "\n")
    return "\n".join(parts)


def format_json(plan) -> str:
    from gpupool.plan import to_json

    return json.dumps(to_json(plan), indent=2, ensure_ascii=False) + "\n"


CSV_COLUMNS = ["cost_center", "tenant", "tier", "resource", "pool", "gpu", "units", "gpu_equivalents",
               "price_per_gpu_hour", "cost_per_hour", "cost_per_month"]


def format_csv(plan) -> str:
    """Chargeback line items: one row per tenant, resource and supplying pool (sums to the totals)."""
    from gpupool.plan import HOURS_PER_MONTH

    models = {p.name: p.gpu_model for p in plan.pools}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def dec(x, places=4):
        return "" if x is None else f"{float(x):.{places}f}"
    for t in sorted(plan.tenants, key=lambda t: (t.cost_center or "", t.name)):
        for a in t.allocations:
            cost = a.cost_per_hour
            w.writerow([t.cost_center or "", t.name, t.tier, a.resource, a.pool, models[a.pool], units(a.units),
                        dec(a.gpu_equivalents), dec(a.price), dec(cost),
                        dec(None if cost is None else cost * HOURS_PER_MONTH, 2)])
    return buf.getvalue()


FORMATTERS = {"table": format_table, "json": format_json, "markdown": format_markdown, "csv": format_csv}
