"""`gpupool usage` output: table (terminals), markdown (reports), json (docs/explanation/monitoring.md), csv (line items)."""

from __future__ import annotations

import csv
import io
import json

from gpupool.analysis.usage import UsageReport, duration_text, to_json
from gpupool.present.tables import Table


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _eq(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _money(x: float | None) -> str:
    return "unpriced" if x is None else f"{x:,.2f}"


def _tenant_rows(r: UsageReport) -> list[list[str]]:
    hours = r.window.hours
    rows = []
    for t in [*r.tenants, r.other]:
        if t is r.other and not t.allocated_hours:
            continue
        rows.append(
            [
                t.name,
                t.cost_center or "-",
                _eq(t.granted) if t is not r.other else "-",
                _eq(t.allocated_hours / hours if hours else 0),
                _eq(t.peak_allocated),
                _eq(t.used_hours / hours if hours else 0),
                _h(t.allocated_hours),
                _h(t.used_hours) + ("*" if t.used_shared else ""),
                _pct(t.efficiency),
                _h(t.idle_hours),
                _money(t.charge),
                *([_money(t.idle_charge)] if r.spread_idle else []),
            ]
        )
    return rows


def sections(r: UsageReport) -> list[Table]:
    rows = _tenant_rows(r)
    out = [
        Table(
            "Tenants (GPU-equivalents: granted, average and peak allocated, average used; then GPU-hours)",
            [
                "TENANT",
                "COST CENTRE",
                "GRANTED",
                "ALLOC",
                "PEAK",
                "USED",
                "ALLOC GPU-H",
                "USED GPU-H",
                "EFFIC.",
                "IDLE GPU-H",
                "CHARGE",
                *(["IDLE SHARE"] if r.spread_idle else []),
            ],
            rows,
            tuple(range(2, 12 if r.spread_idle else 11)),
        ),
        Table(
            "Cost centres",
            ["COST CENTRE", "TENANTS", "GRANTED", "ALLOC GPU-H", "USED GPU-H", "EFFIC.", "CHARGE"],
            [
                [
                    c.name,
                    ", ".join(c.tenants),
                    _eq(c.granted),
                    _h(c.allocated_hours),
                    _h(c.used_hours),
                    _pct(c.efficiency),
                    _money(c.charge),
                ]
                for c in r.cost_centers
            ],
            (2, 3, 4, 5, 6),
        ),
        Table(
            "Pools (baseline utilisation = used / capacity; recoverable = capacity - used)",
            [
                "POOL",
                "GPUS",
                "CAPACITY GPU-H",
                "ALLOC GPU-H",
                "USED GPU-H",
                "UTIL.",
                "UNALLOC GPU-H",
                "RECOVERABLE GPU-H",
                "COST",
                "UNALLOC COST",
            ],
            [
                [
                    p.name,
                    str(p.gpus),
                    _h(p.capacity_hours),
                    _h(p.allocated_hours),
                    _h(p.used_hours),
                    _pct(p.utilisation),
                    _h(p.unallocated_hours),
                    _h(p.recoverable_hours),
                    _money(p.cost),
                    _money(p.unallocated_cost),
                ]
                for p in r.pools
            ],
            tuple(range(1, 10)),
        ),
    ]
    return out


def day_section(r: UsageReport) -> Table:
    rows = []
    for d in r.days:
        for name, (a, u, c) in d.tenants.items():
            rows.append([d.date, name, _h(a), _h(u), _money(c)])
    return Table("Per day (UTC)", ["DAY", "TENANT", "ALLOC GPU-H", "USED GPU-H", "CHARGE"], rows, (2, 3, 4))


def _when(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


GAP_WHAT = {
    "no-data": "no data (no kube-state-metrics series: before the data, past it, or an outage)",
    "exporter": "DCGM exporter silent while pods held GPUs (their use is unknown)",
    "history": "priced with the spec (no recorded weights, prices or GPUs)",
    "labels": "node pools from the spec's node lists (no gpupool.dev/pool label)",
}


def _notes(r: UsageReport) -> list[str]:
    out = []
    for g in r.gaps:
        where = f" on {g.node}" if g.node else ""
        out.append(
            f"gap: {GAP_WHAT.get(g.kind, g.kind)}{where}, {_when(g.start)} to {_when(g.end)} UTC: "
            f"{duration_text(g.seconds)}"
        )
    for (node, ns, res), h in sorted(r.outside_pools.items()):
        out.append(
            f"outside every pool: {ns} held {h:,.2f} unit-hours of {res} on node {node}: not weighed, not charged"
        )
    for (pool, res, ns), h in sorted(r.unweighed.items()):
        out.append(
            f"no weight: {ns} held {h:,.2f} unit-hours of {res} in pool {pool}, which neither the recorded history "
            "nor the spec weighs (a retired MIG profile?): not charged"
        )
    for profile, h in sorted(r.unknown_profiles.items()):
        out.append(f"unknown MIG profile {profile}: {h:,.2f} device-hours of activity not weighed")
    for node, per in sorted(r.node_pools.items()):
        if len(per) > 1:
            out.append(
                f"node {node} moved between pools: " + ", ".join(f"{p} {h:,.1f} h" for p, h in sorted(per.items()))
            )
    if any(t.used_shared for t in r.tenants):
        out.append(
            "* includes an equal share of time-sliced/MPS devices: their activity is per device, so it is split "
            "among the pods on it (docs/explanation/monitoring.md)"
        )
    if r.spread_idle:
        out.append("IDLE SHARE: each pool's unallocated cost spread over its allocators by their GPU-hours there")
    return out


def _head(r: UsageReport) -> str:
    doc = to_json(r)
    return f"cluster {r.cluster}: {doc['start']} to {doc['end']} ({r.window.hours:,.1f} h, step {r.window.step:g}s)"


def _all(r: UsageReport, daily: bool) -> list[Table]:
    return [*sections(r), *([day_section(r)] if daily else [])]


def format_table(r: UsageReport, daily: bool = False) -> str:
    parts = [f"GPU usage: {_head(r)}\n"]
    parts += [table.text() for table in _all(r, daily)]
    notes = _notes(r)
    if notes:
        parts.append("\n".join(notes) + "\n")
    return "\n".join(parts)


def format_markdown(r: UsageReport, daily: bool = False) -> str:
    parts = [f"## gpupool usage: {_head(r)}\n"]
    parts += [table.markdown() for table in _all(r, daily)]
    notes = _notes(r)
    if notes:
        parts.append("\n".join(f"- {n}" for n in notes) + "\n")
    return "\n".join(parts)


def format_json(r: UsageReport, daily: bool = False) -> str:  # days are always in the JSON
    return json.dumps(to_json(r), indent=2, ensure_ascii=False, allow_nan=False) + "\n"  # never NaN or Infinity


CSV_COLUMNS = [
    "cost_center",
    "tenant",
    "pool",
    "allocated_gpu_hours",
    "used_gpu_hours",
    "price_per_gpu_hour",
    "charge",
]


def format_csv(r: UsageReport, daily: bool = False) -> str:
    """Line items: one row per tenant and pool, then per pool the other namespaces' and the unallocated
    GPU-hours; the charges of a pool's rows add up to what the pool cost over the range. With --spread-idle a
    pool's spread idle cost is in `idle_share` and its (unallocated) row keeps only what nobody allocated.
    With --daily, one row per UTC day and tenant instead (`date` first, no pool)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")

    def dec(x: float | None, places: int = 4) -> str:
        return "" if x is None else f"{x:.{places}f}"

    if daily:
        w.writerow(["date", "tenant", "allocated_gpu_hours", "used_gpu_hours", "charge"])
        for d in r.days:
            for name, (a, u, c) in d.tenants.items():
                w.writerow([d.date, name, dec(a), dec(u), dec(c, 2)])
        return buf.getvalue()
    w.writerow([*CSV_COLUMNS, *(["idle_share"] if r.spread_idle else [])])
    pools = {p.name: p for p in r.pools}
    for t in sorted([*r.tenants, r.other], key=lambda t: (t.cost_center or "", t.name)):
        for pool, (a, u, c) in sorted(t.by_pool.items()):
            p = pools[pool]
            share = p.idle_spread * a / p.allocated_hours if r.spread_idle and p.allocated_hours else 0.0
            priced = p.cost is not None
            row = [t.cost_center or "", t.name, pool, dec(a), dec(u), dec(p.price), dec(c if priced else None, 2)]
            w.writerow(row + ([dec(share if priced else None, 2)] if r.spread_idle else []))
    for p in r.pools:
        left = None if p.unallocated_cost is None else p.unallocated_cost - (p.idle_spread if r.spread_idle else 0.0)
        row = ["", "(unallocated)", p.name, dec(p.unallocated_hours), "", dec(p.price), dec(left, 2)]
        w.writerow(row + ([""] if r.spread_idle else []))
    return buf.getvalue()


FORMATTERS = {"table": format_table, "json": format_json, "markdown": format_markdown, "csv": format_csv}
