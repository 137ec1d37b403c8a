"""`gpupool plan` output: table (terminals), markdown (PR comments), json (docs/reference/plan-json.md), csv (chargeback)."""

from __future__ import annotations

import csv
import io
import json
from fractions import Fraction

from gpupool.analysis.plan import HOURS_PER_MONTH, CapacityPlan, Cost, RolloutLine
from gpupool.model import platform as m
from gpupool.present.markdown import code, inline
from gpupool.present.numbers import eq, money, pct, ratio, units
from gpupool.present.plan_json import to_json
from gpupool.present.tables import Table
from gpupool.present.text import plural, safe

# Said wherever tiers are shown: the guard (gpupool.k8s.priority_guard) bounds a tenant's priority from above,
# nothing raises it. A pod without priorityClassName gets 0 (or the cluster's globalDefault class).
TIER_IS_A_CEILING = "tiers are ceilings: a pod without priorityClassName runs at priority 0"


def _pools(plan: CapacityPlan) -> Table:
    # ALLOCATION only where a pool uses DRA: every other platform's table stays as it was.
    dra = any(p.allocation != m.DEVICE_PLUGIN for p in plan.pools)
    rows = [
        [
            p.name,
            p.gpu_model,
            str(p.nodes),
            str(p.gpus),
            p.sharing,
            *([p.allocation] if dra else []),
            money(p.price) if p.price is not None else "unpriced",
        ]
        for p in plan.pools
    ]
    headers = ["POOL", "GPU", "NODES", "GPUS", "SHARING", *(["ALLOCATION"] if dra else []), "PRICE/GPU-H"]
    return Table("Pools", headers, rows, (2, 3, len(headers) - 1))


def _capacity(plan: CapacityPlan) -> Table:
    rows = [
        [p.name, s.resource, s.formula, str(s.capacity), units(s.granted), eq(s.granted_gpu_equivalents)]
        for p in plan.pools
        for s in p.supplies
    ]
    return Table(
        "Capacity by pool (GPU-EQ = grants in GPUs; a resource from several pools is split by capacity)",
        ["POOL", "RESOURCE", "SUPPLY", "CAPACITY", "GRANTED", "GPU-EQ"],
        rows,
        (3, 4, 5),
    )


def _headroom(plan: CapacityPlan) -> Table:
    rows = [
        [
            r.resource,
            str(r.capacity),
            f"{float(r.max_ratio):g}x",
            str(r.allowed),
            str(r.granted),
            str(r.headroom),
            ratio(r.ratio),
        ]
        for r in plan.resources
    ]
    return Table(
        "Headroom by resource (under the oversubscription policy)",
        ["RESOURCE", "CAPACITY", "MAX", "ALLOWED", "GRANTED", "HEADROOM", "RATIO"],
        rows,
        (1, 2, 3, 4, 5, 6),
    )


def _tenants(plan: CapacityPlan) -> Table:
    rows = [
        [
            t.name + (" (offboarded)" if t.offboarded else ""),
            t.tier,
            t.cost_center or "-",
            eq(t.gpu_equivalents),
            pct(t.share),
        ]
        for t in plan.tenants
    ]
    return Table(
        f"Tenants (share of {plural(plan.total_gpus, 'GPU')}; {TIER_IS_A_CEILING})",
        ["TENANT", "TIER", "COST CENTRE", "GPU-EQ", "SHARE"],
        rows,
        (3, 4),
    )


def _grants(plan: CapacityPlan) -> Table:
    nominal: dict[tuple[str, str], Fraction] = {}
    for t in plan.tenants:
        for a in t.allocations:
            key = (t.name, a.resource)
            nominal[key] = nominal.get(key, Fraction(0)) + a.granted_gpu_equivalents
    rows = [
        [t.name, r, str(n), eq(nominal.get((t.name, r), Fraction(0))), eq(t.resource_gpu_equivalents(r))]
        for t in plan.tenants
        for r, n in t.grants.items()
    ]
    return Table(
        "Grants (GPU-EQ as written; CHARGED: scaled down to capacity where oversubscribed)",
        ["TENANT", "RESOURCE", "GRANTED", "GPU-EQ", "CHARGED"],
        rows,
        (2, 3, 4),
    )


def _cost_centres(plan: CapacityPlan) -> Table:
    rows = [[c.name, ", ".join(c.tenants), eq(c.gpu_equivalents), pct(c.share)] for c in plan.cost_centers]
    return Table("Cost centres", ["COST CENTRE", "TENANTS", "GPU-EQ", "SHARE"], rows, (2, 3))


def _max_per_pod(plan: CapacityPlan) -> Table:
    return Table(
        "Per-pod maximums (a ValidatingAdmissionPolicy per tenant; nothing is injected)",
        ["TENANT", "RESOURCE", "MAX PER POD", "FROM", "QUOTA"],
        [[x.tenant, x.resource, str(x.limit), x.source, str(x.quota)] for x in plan.max_per_pod],
        (2, 4),
    )


def _rollouts(plan: CapacityPlan) -> Table:
    rows = []
    for r in plan.rollouts:
        drain = f"{r.drain_timeout_seconds}s" if r.drain_timeout_seconds else "no"
        head = [r.pool, str(r.at_once), "yes" if r.cordon else "no", drain, f"{r.node_timeout_seconds}s"]
        if not r.waves:
            rows.append(head + ["-", rollout_order(r)])
        for i, wave in enumerate(r.waves, 1):
            rows.append((head if i == 1 else [""] * len(head)) + [str(i), ", ".join(wave)])
    return Table(
        "MIG re-layout rollout (a wave starts when every node of the previous one reported success)",
        ["POOL", "AT ONCE", "CORDON", "DRAIN", "NODE TIMEOUT", "WAVE", "NODES"],
        rows,
        (1, 5),
    )


def _chargeback_pools(plan: CapacityPlan) -> Table:
    rows = [
        [
            p.name,
            str(p.gpus),
            money(p.cost_per_hour) if p.cost_per_hour is not None else "unpriced",
            eq(p.charged_gpu_equivalents),
            money(p.per_hour(p.charged_gpu_equivalents)) if p.price is not None else "-",
            eq(p.unallocated_gpu_equivalents),
            money(p.per_hour(p.unallocated_gpu_equivalents)) if p.price is not None else "-",
        ]
        for p in plan.pools
    ]
    return Table(
        "Chargeback per pool (charged + unallocated = the pool's GPUs and cost per hour)",
        ["POOL", "GPUS", "COST/H", "CHARGED GPU-EQ", "CHARGED/H", "UNALLOCATED GPU-EQ", "UNALLOCATED/H"],
        rows,
        (1, 2, 3, 4, 5, 6),
    )


def _chargeback_tenants(plan: CapacityPlan) -> Table:
    rows = [
        [
            t.cost_center or "-",
            t.name,
            eq(t.cost.priced_gpu_equivalents),
            money(t.cost.per_hour),
            money(t.cost.per_month),
            eq(t.cost.unpriced_gpu_equivalents),
        ]
        for t in sorted(plan.tenants, key=lambda t: (t.cost_center or "", t.name))
    ]
    return Table(
        f"Chargeback per tenant (GPU-equivalents × price per GPU-hour; month = {HOURS_PER_MONTH} h)",
        ["COST CENTRE", "TENANT", "GPU-EQ", "PER HOUR", "PER MONTH", "UNPRICED GPU-EQ"],
        rows,
        (2, 3, 4, 5),
    )


def _cost_row(name: str, cost: Cost) -> list[str]:
    return [
        name,
        eq(cost.priced_gpu_equivalents),
        money(cost.per_hour),
        money(cost.per_month),
        eq(cost.unpriced_gpu_equivalents),
    ]


def _chargeback_cost_centres(plan: CapacityPlan) -> Table:
    rows = [_cost_row(c.name, c.cost) for c in plan.cost_centers]
    rows.append(_cost_row("(unallocated)", plan.unallocated))
    rows.append(_cost_row("TOTAL (= the pools' cost)", plan.total + plan.unallocated))
    return Table(
        "Chargeback per cost centre",
        ["COST CENTRE", "GPU-EQ", "PER HOUR", "PER MONTH", "UNPRICED GPU-EQ"],
        rows,
        (1, 2, 3, 4),
    )


def _kueue_flavors(plan: CapacityPlan) -> Table:
    rows = [
        [
            x.flavor,
            x.resource,
            str(x.capacity),
            str(x.nominal),
            str(x.cohort_quota),
            str(x.lendable),
            str(x.borrowable),
        ]
        for x in plan.queues
    ]
    return Table(
        "Kueue quota by flavor (NOMINAL guaranteed; LENDABLE lent when idle; BORROWABLE + cohort quota)",
        ["FLAVOR", "RESOURCE", "CAPACITY", "NOMINAL", "COHORT", "LENDABLE", "BORROWABLE"],
        rows,
        (2, 3, 4, 5, 6),
    )


def _kueue_tenants(plan: CapacityPlan) -> Table:
    granted = [x for x in plan.queue_ceilings if x.grant or x.outside_kueue]
    return Table(
        "Kueue per tenant, granted resources (THROUGH KUEUE = its ResourceQuota; OUTSIDE: without Kueue)",
        ["TENANT", "RESOURCE", "GRANT", "NOMINAL", "THROUGH KUEUE", "OUTSIDE KUEUE"],
        [
            [x.tenant, x.resource, str(x.grant), str(x.nominal), str(x.through_kueue), str(x.outside_kueue)]
            for x in granted
        ],
        (2, 3, 4, 5),
    )


def sections(plan: CapacityPlan) -> list[Table]:
    """Every table of the plan, in order; the optional ones when the spec has what they show."""
    out = [_pools(plan), _capacity(plan), _headroom(plan), _tenants(plan), _grants(plan), _cost_centres(plan)]
    if plan.max_per_pod:
        out.append(_max_per_pod(plan))
    if plan.rollouts:
        out.append(_rollouts(plan))
    if plan.priced:
        out += [_chargeback_pools(plan), _chargeback_tenants(plan), _chargeback_cost_centres(plan)]
    if plan.queues:
        out.append(_kueue_flavors(plan))
    if plan.queue_ceilings:
        out.append(_kueue_tenants(plan))
    return out


def _pool_notes(plan: CapacityPlan) -> list[str]:
    """What makes a pool's charges differ from grants x SM share: oversubscription and stranded slices."""
    out = []
    for p in plan.pools:
        for s in p.supplies:
            if s.oversubscribed_units:
                out.append(
                    f"{p.name}: {s.resource} oversubscribed {ratio(s.granted / s.capacity)} "
                    f"({units(s.granted)} on {s.capacity}): grants charged × {float(s.charge_factor):.4g}"
                )
        if p.stranded_gpus:
            out.append(
                f"{p.name}: the MIG layout strands {eq(p.stranded_gpus)} GPUs of compute; its instances carry them"
            )
    return out


def rollout_order(r: RolloutLine) -> str:
    """ "n1, n2 → n3, n4": waves separated by arrows; a selector pool's nodes cannot be named."""
    if not r.waves:
        return "selector pool: node-group tooling rolls it"
    return " → ".join(", ".join(w) for w in r.waves)


def _summary(plan: CapacityPlan) -> str:
    granted = eq(plan.total.gpu_equivalents)
    text = (
        f"{plural(plan.total_gpus, 'GPU')} in {plural(len(plan.pools), 'pool')}; "
        f"{plural(len(plan.tenants), 'tenant')} granted "
        f"{granted} GPU-equivalents ({pct(plan.total.gpu_equivalents / plan.total_gpus) if plan.total_gpus else '-'}"
        " of the cluster)"
    )
    if plan.total.granted_gpu_equivalents != plan.total.gpu_equivalents:
        text += f"\n(as written the grants add up to {eq(plan.total.granted_gpu_equivalents)}: oversubscribed)"
    return text


def _warnings(plan: CapacityPlan) -> list[str]:
    out = []
    for r in plan.over:
        out.append(
            f"⚠ {r.resource}: granted {r.granted} but the policy allows {r.allowed} "
            f"(capacity {r.capacity} × {float(r.max_ratio):g}): headroom {r.headroom}"
        )
    out.extend(_pool_notes(plan))
    if not plan.priced:
        out.append("no pool has pricePerGpuHour: no chargeback")
    elif any(p.price is None for p in plan.pools):
        names = ", ".join(p.name for p in plan.pools if p.price is None)
        out.append(f"unpriced pools (GPU-equivalents counted, not charged): {names}")
    return out


def format_table(plan: CapacityPlan) -> str:
    # Names and the spec's path come from files: each is shown through safe() (text_table does so for cells),
    # so that no newline of theirs adds a line and no escape sequence reaches the terminal.
    parts = [f"Capacity plan: cluster {safe(plan.cluster)} ({safe(plan.source)})\n{_summary(plan)}\n"]
    parts += [table.text() for table in sections(plan)]
    warnings = _warnings(plan)
    if warnings:
        parts.append("\n".join(safe(w) for w in warnings) + "\n")
    return "\n".join(parts)


def format_markdown(plan: CapacityPlan) -> str:
    parts = [f"## gpupool plan: cluster {code(plan.cluster)}\n\n{_summary(plan)}.\n"]
    parts += [table.markdown() for table in sections(plan)]
    warnings = _warnings(plan)
    if warnings:
        parts.append("\n".join(f"- {inline(w)}" for w in warnings) + "\n")
    return "\n".join(parts)


def format_json(plan: CapacityPlan) -> str:
    return json.dumps(to_json(plan), indent=2, ensure_ascii=False) + "\n"


CSV_COLUMNS = [
    "cost_center",
    "tenant",
    "tier",
    "resource",
    "pool",
    "gpu",
    "units",
    "gpu_equivalents",
    "price_per_gpu_hour",
    "cost_per_hour",
    "cost_per_month",
    "granted_gpu_equivalents",
]
UNALLOCATED = "(unallocated)"  # the tenant column of a pool's capacity no grant covers (not a valid tenant name)


def format_csv(plan: CapacityPlan) -> str:
    """Chargeback line items: one row per tenant, resource and supplying pool, then one `(unallocated)` row per
    pool and resource with capacity no grant covers: the rows add up to what the pools cost."""
    models = {p.name: p.gpu_model for p in plan.pools}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def dec(x: Fraction | None, places: int = 4) -> str:
        return "" if x is None else f"{float(x):.{places}f}"

    for t in sorted(plan.tenants, key=lambda t: (t.cost_center or "", t.name)):
        for a in t.allocations:
            cost = a.cost_per_hour
            w.writerow(
                [
                    t.cost_center or "",
                    t.name,
                    t.tier,
                    a.resource,
                    a.pool,
                    models[a.pool],
                    units(a.units),
                    dec(a.gpu_equivalents),
                    dec(a.price),
                    dec(cost),
                    dec(None if cost is None else cost * HOURS_PER_MONTH, 2),
                    dec(a.granted_gpu_equivalents),
                ]
            )
    for p in plan.pools:
        for s in p.supplies:
            if not s.unallocated_gpu_equivalents:
                continue
            cost = p.per_hour(s.unallocated_gpu_equivalents)
            w.writerow(
                [
                    "",
                    UNALLOCATED,
                    "",
                    s.resource,
                    p.name,
                    p.gpu_model,
                    units(s.capacity - s.granted),
                    dec(s.unallocated_gpu_equivalents),
                    dec(p.price),
                    dec(cost),
                    dec(None if cost is None else cost * HOURS_PER_MONTH, 2),
                    dec(s.unallocated_gpu_equivalents),
                ]
            )
    return buf.getvalue()


FORMATTERS = {"table": format_table, "json": format_json, "markdown": format_markdown, "csv": format_csv}
