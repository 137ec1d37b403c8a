"""`gpupool usage` output: table (terminals), markdown (reports), json (docs/monitoring.md), csv (line items)."""

from __future__ import annotations

import csv
import io
import json

from gpupool.present.tables import md_table, text_table


def _h(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _eq(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _money(x: float | None) -> str:
    return "unpriced" if x is None else f"{x:,.2f}"


def sections(r) -> list[tuple[str, list[str], list[list[str]], tuple[int, ...]]]:
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
            ]
        )
    out = [
        (
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
            ],
            rows,
            tuple(range(2, 11)),
        ),
        (
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
        (
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
                    _money(p.money(p.capacity_hours)),
                    _money(p.money(p.unallocated_hours)),
                ]
                for p in r.pools
            ],
            tuple(range(1, 10)),
        ),
    ]
    return out


def _notes(r) -> list[str]:
    out = []
    if any(t.used_shared for t in r.tenants):
        out.append(
            "* includes an equal share of time-sliced/MPS devices: their activity is per device, so it is split "
            "among the pods on it (docs/monitoring.md)"
        )
    if r.unattributed_hours:
        out.append(f"{r.unattributed_hours:,.1f} GPU-hours on nodes of no known pool were not weighed or charged")
    return out


def _head(r) -> str:
    from gpupool.analysis.usage import to_json

    doc = to_json(r)
    return f"cluster {r.cluster}: {doc['start']} to {doc['end']} ({r.window.hours:,.1f} h, step {r.window.step:g}s)"


def format_table(r) -> str:
    parts = [f"GPU usage: {_head(r)}\n"]
    for title, headers, rows, right in sections(r):
        parts.append(f"{title}\n" + text_table(headers, rows, right))
    notes = _notes(r)
    if notes:
        parts.append("\n".join(notes) + "\n")
    return "\n".join(parts)


def format_markdown(r) -> str:
    parts = [f"## gpupool usage: {_head(r)}\n"]
    for title, headers, rows, right in sections(r):
        parts.append(f"### {title}\n\n" + md_table(headers, rows, right))
    notes = _notes(r)
    if notes:
        parts.append("\n".join(f"- {n}" for n in notes) + "\n")
    return "\n".join(parts)


def format_json(r) -> str:
    from gpupool.analysis.usage import to_json

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


def format_csv(r) -> str:
    """Line items: one row per tenant and pool, then per pool the other namespaces' and the unallocated
    GPU-hours; the charges of a pool's rows add up to what the pool cost over the range."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    pools = {p.name: p for p in r.pools}

    def dec(x, places=4):
        return "" if x is None else f"{x:.{places}f}"

    for t in sorted([*r.tenants, r.other], key=lambda t: (t.cost_center or "", t.name)):
        for pool, (a, u) in sorted(t.by_pool.items()):
            p = pools[pool]
            w.writerow([t.cost_center or "", t.name, pool, dec(a), dec(u), dec(p.price), dec(p.money(a), 2)])
    for p in r.pools:
        w.writerow(
            [
                "",
                "(unallocated)",
                p.name,
                dec(p.unallocated_hours),
                "",
                dec(p.price),
                dec(p.money(p.unallocated_hours), 2),
            ]
        )
    return buf.getvalue()


FORMATTERS = {"table": format_table, "json": format_json, "markdown": format_markdown, "csv": format_csv}
