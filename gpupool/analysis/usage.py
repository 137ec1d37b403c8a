"""`gpupool usage`: what tenants allocated and used over a time range, what it cost, and how far to trust it.

Pure computation over a UsageSource (gpupool.analysis.usage_source: Prometheus, or a fake in the tests),
whose every figure is already integrated over each step at a fixed resolution and weighed and priced as it
was at each moment (gpupool.monitoring.usage_queries). This module adds the steps up per tenant, cost
centre, pool and UTC day, prices them, optionally spreads each pool's idle cost over its allocators, and
turns the coverage series into gaps: a period without kube-state-metrics data (an empty window, a window
past the data), a node whose exporter was silent while its pods held GPUs, and the periods priced with the
spec because the recorded history was missing.

Charge: allocated GPU-hours x the pool's price at that moment. What running pods held is what nobody else
could use; activity is reported beside it (efficiency) rather than billed. Per pool, the tenants' charges +
other namespaces' + the unallocated remainder = what the pool cost over the range. GPU requests on a node of
no pool are reported apart (outsidePools) and charged to no pool.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpupool.analysis.plan import NO_COST_CENTER
from gpupool.analysis.usage_source import METHODS, UsageSource
from gpupool.model import grants
from gpupool.model import platform as m
from gpupool.monitoring.series import Series, Window, series_name

SCHEMA_VERSION = 2
OTHER = "(other namespaces)"  # GPU pods outside gpupool's tenants: charged, not to a tenant
TRUST_GAPS = ("no-data", "exporter")  # gap kinds after which the figures are not the whole truth


class UsageDataError(ValueError):
    """The source's series cannot be turned into a report: a sample that is not a finite, non-negative number
    or a total that overflows. The message names the series."""


@dataclass
class TenantUsage:
    name: str
    namespace: str
    cost_center: str | None
    tier: str | None
    granted: float  # GPU-equivalents as written (gpupool plan)
    allocated_hours: float = 0.0
    used_hours: float = 0.0
    peak_allocated: float = 0.0
    charge: float | None = None
    idle_charge: float = 0.0  # its share of its pools' unallocated cost (--spread-idle)
    by_pool: dict[str, list[float]] = field(default_factory=dict)  # pool -> [allocated h, used h, charge]
    used_shared: bool = False  # part of `used` is an equal share of a time-sliced/MPS device

    @property
    def idle_hours(self) -> float:
        return max(self.allocated_hours - self.used_hours, 0.0)

    @property
    def efficiency(self) -> float | None:
        return self.used_hours / self.allocated_hours if self.allocated_hours else None

    @property
    def total_charge(self) -> float | None:
        return None if self.charge is None else self.charge + self.idle_charge

    def pool(self, name: str) -> list[float]:
        return self.by_pool.setdefault(name, [0.0, 0.0, 0.0])


@dataclass
class PoolUsage:
    name: str
    gpus: int
    price: float | None  # the spec's price now; the history's prices are in cost and charged
    sharing: str
    capacity_hours: float = 0.0
    allocated_hours: float = 0.0
    used_hours: float = 0.0
    cost: float | None = None  # capacity x price at each moment; None when never priced
    charged: float = 0.0  # what its allocators were charged
    idle_spread: float = 0.0  # the part of the unallocated cost spread over its allocators

    @property
    def utilisation(self) -> float | None:
        return self.used_hours / self.capacity_hours if self.capacity_hours else None

    @property
    def allocation(self) -> float | None:
        return self.allocated_hours / self.capacity_hours if self.capacity_hours else None

    @property
    def unallocated_hours(self) -> float:
        return max(self.capacity_hours - self.allocated_hours, 0.0)

    @property
    def idle_allocated_hours(self) -> float:
        return max(self.allocated_hours - self.used_hours, 0.0)

    @property
    def recoverable_hours(self) -> float:
        """GPU-hours not used: idle allocations plus unallocated capacity, what pooling could hand out."""
        return max(self.capacity_hours - self.used_hours, 0.0)

    @property
    def unallocated_cost(self) -> float | None:
        return None if self.cost is None else max(self.cost - self.charged, 0.0)


@dataclass
class CostCenterUsage:
    name: str
    tenants: list[str]
    granted: float = 0.0
    allocated_hours: float = 0.0
    used_hours: float = 0.0
    charge: float | None = None
    idle_charge: float = 0.0

    @property
    def efficiency(self) -> float | None:
        return self.used_hours / self.allocated_hours if self.allocated_hours else None


@dataclass(frozen=True)
class Gap:
    """A period the figures do not fully cover. KIND: no-data (no kube-state-metrics series: before the data,
    past it, an outage), exporter (NODE's pods held GPUs, its DCGM exporter reported nothing: use unknown),
    history (weights, prices, GPUs from the spec: nothing recorded), labels (node pools from the spec's node
    lists: no gpupool.dev/pool label). SECONDS is what is missing within [start, end]."""

    kind: str
    start: float
    end: float
    seconds: float
    node: str = ""


@dataclass
class DayUsage:
    date: str  # YYYY-MM-DD, UTC: a step counts on the day its last second falls in
    tenants: dict[str, list[float]] = field(default_factory=dict)  # name -> [allocated h, used h, charge]
    pools: dict[str, list[float]] = field(default_factory=dict)  # name -> [capacity h, allocated h, used h, cost]


@dataclass
class UsageReport:
    cluster: str
    prometheus: str
    window: Window
    tenants: list[TenantUsage]
    pools: list[PoolUsage]
    cost_centers: list[CostCenterUsage]
    other: TenantUsage  # GPU pods in namespaces that are no tenant of the spec
    resolution: float = 60.0
    days: list[DayUsage] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    outside_pools: dict[tuple[str, str, str], float] = field(default_factory=dict)  # (node, ns, resource) -> unit-h
    unweighed: dict[tuple[str, str, str], float] = field(default_factory=dict)  # (pool, resource, ns) -> unit-h
    unknown_profiles: dict[str, float] = field(default_factory=dict)  # MIG profile -> device-hours
    node_pools: dict[str, dict[str, float]] = field(default_factory=dict)  # node -> pool -> hours in it
    spread_idle: bool = False

    @property
    def untrusted(self) -> list[str]:
        """Why the figures are not the whole truth (empty: they are)."""
        out = []
        for kind in TRUST_GAPS:
            missing = sum(g.seconds for g in self.gaps if g.kind == kind)
            if missing:
                what = "no data" if kind == "no-data" else "a node's DCGM exporter reported nothing"
                out.append(f"{what} for {duration_text(missing)} of the range")
        if self.unweighed:
            out.append("GPU requests of a resource no weight is known for were not weighed or charged")
        if self.unknown_profiles:
            out.append("MIG activity of a profile gpupool's catalog does not know was not weighed")
        return out


def duration_text(seconds: float) -> str:
    """1d 2h 5m; seconds below a minute as 30s."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    d, rest = divmod(s // 60, 1440)
    h, mins = divmod(rest, 60)
    parts = [f"{d}d"] if d else []
    parts += [f"{h}h"] if h else []
    parts += [f"{mins}m"] if mins or not parts else []
    return " ".join(parts)


def _day(t: float) -> str:
    return datetime.fromtimestamp(t - 1e-3, UTC).strftime("%Y-%m-%d")


class _Totals:
    """The report being added up: accounts, pools and days, created on first sight."""

    def __init__(self, spec: m.Spec, window: Window):
        self.spec, self.window = spec, window
        self.spec_pools = {p.name: p for p in spec.pools}
        granted = grants.granted_gpu_equivalents(spec)  # as `gpupool plan` prints it
        self.tenants = {
            t.namespace: TenantUsage(t.name, t.namespace, t.cost_center, t.tier, float(granted[t.name]))
            for t in spec.tenants
        }
        self.other = TenantUsage(OTHER, "", None, None, 0.0)
        self.pools: dict[str, PoolUsage] = {}
        for p in spec.pools:
            self.pool(p.name)
        self.days: dict[str, DayUsage] = {}

    def account(self, ns: str) -> TenantUsage:
        return self.tenants.get(ns, self.other)

    def pool(self, name: str) -> PoolUsage:
        if name not in self.pools:
            sp = self.spec_pools.get(name)
            self.pools[name] = (
                PoolUsage(name, sp.total_gpus, sp.price_per_gpu_hour, sp.sharing.kind)
                if sp
                else PoolUsage(name, 0, None, "(not in the spec)")
            )
        return self.pools[name]

    def day(self, t: float) -> DayUsage:
        key = _day(t)
        return self.days.setdefault(key, DayUsage(key))

    def in_window(self, s: Series) -> Iterator[tuple[float, float]]:
        w = self.window
        return ((t, v) for t, v in s.samples if w.start < t <= w.end + 1e-6)


def _add(row: list[float], i: int, x: float) -> None:
    row[i] += x


def compute(
    spec: m.Spec, window: Window, source: UsageSource, prometheus: str = "", spread_idle: bool = False
) -> UsageReport:
    data = {name: checked(name, list(getattr(source, name)(window))) for name in METHODS}
    tot = _Totals(spec, window)
    _allocation(tot, data)
    _use(tot, data, spec.cluster.operator.namespace)
    _pools(tot, data)
    report = UsageReport(
        spec.cluster.name,
        prometheus,
        window,
        list(tot.tenants.values()),
        list(tot.pools.values()),
        [],
        tot.other,
        resolution=getattr(source, "resolution", window.step),
        days=[tot.days[k] for k in sorted(tot.days)],
        gaps=gaps(window, data["coverage"]),
        spread_idle=spread_idle,
    )
    _apart(report, tot, data)
    _charges(report, tot, spread_idle)
    overflowed = not_finite(to_json(report))
    if overflowed:
        raise UsageDataError(
            f"the report's {overflowed} is not a finite number: the samples are each finite, but too large to "
            "add up or to price; no GPU request or activity has such values"
        )
    return report


def _allocation(tot: _Totals, data: dict[str, list[Series]]) -> None:
    for s in data["allocated"]:
        acc, pool = tot.account(s.labels.get("namespace", "")), tot.pool(s.labels.get("pool", ""))
        for t, v in tot.in_window(s):
            h = finite(s, v / 3600)
            acc.allocated_hours += h
            _add(acc.pool(pool.name), 0, h)
            pool.allocated_hours += h
            _add(tot.day(t).tenants.setdefault(acc.name, [0.0, 0.0, 0.0]), 0, h)
            _add(tot.day(t).pools.setdefault(pool.name, [0.0, 0.0, 0.0, 0.0]), 1, h)
    for s in data["charged"]:
        acc, pool = tot.account(s.labels.get("namespace", "")), tot.pool(s.labels.get("pool", ""))
        for t, v in tot.in_window(s):
            money = finite(s, v / 3600)
            _add(acc.pool(pool.name), 2, money)
            pool.charged += money
            _add(tot.day(t).tenants.setdefault(acc.name, [0.0, 0.0, 0.0]), 2, money)
    for s in data["peak"]:
        acc = tot.account(s.labels.get("namespace", ""))
        acc.peak_allocated = max([acc.peak_allocated, *(v for _, v in tot.in_window(s))])


def _use(tot: _Totals, data: dict[str, list[Series]], operator_ns: str) -> None:
    for s in data["used"]:
        ns = s.labels.get("namespace", "")
        if not ns or ns == operator_ns:
            continue  # a device no pod holds: its series keeps the exporter's own namespace (honorLabels)
        acc, pool = tot.account(ns), tot.pool(s.labels.get("pool", ""))
        shared = pool.name in tot.spec_pools and tot.spec_pools[pool.name].sharing.software_shared
        for t, v in tot.in_window(s):
            h = finite(s, v / 3600)
            acc.used_hours += h
            _add(acc.pool(pool.name), 1, h)
            acc.used_shared = acc.used_shared or (shared and h > 0)
            _add(tot.day(t).tenants.setdefault(acc.name, [0.0, 0.0, 0.0]), 1, h)
    for s in data["devices"]:
        pool = tot.pool(s.labels.get("pool", ""))
        for t, v in tot.in_window(s):
            h = finite(s, v / 3600)
            pool.used_hours += h
            _add(tot.day(t).pools.setdefault(pool.name, [0.0, 0.0, 0.0, 0.0]), 2, h)


def _pools(tot: _Totals, data: dict[str, list[Series]]) -> None:
    for s in data["capacity"]:
        pool, what = tot.pool(s.labels.get("pool", "")), s.labels.get("what", "")
        for t, v in tot.in_window(s):
            x = finite(s, v / 3600)
            row = tot.day(t).pools.setdefault(pool.name, [0.0, 0.0, 0.0, 0.0])
            if what == "gpus":
                pool.capacity_hours += x
                row[0] += x
            elif what == "cost":
                pool.cost = (pool.cost or 0.0) + x
                row[3] += x
    for p in tot.pools.values():
        if p.name not in tot.spec_pools and tot.window.hours:  # a pool of the history only
            p.gpus = round(p.capacity_hours / tot.window.hours)
        if p.cost is None and p.price is not None and not p.capacity_hours:
            p.cost = 0.0


def _apart(report: UsageReport, tot: _Totals, data: dict[str, list[Series]]) -> None:
    """What is reported beside the figures: requests outside pools, unweighed ones, unknown MIG profiles and
    which pools each node was in."""

    def hours(s: Series) -> float:
        return finite(s, sum(v for _, v in tot.in_window(s)) / 3600)

    for s in data["outside_pools"]:
        key = (s.labels.get("node", ""), s.labels.get("namespace", ""), s.labels.get("resource", ""))
        report.outside_pools[key] = report.outside_pools.get(key, 0.0) + hours(s)
    for s in data["unweighed"]:
        key = (s.labels.get("pool", ""), s.labels.get("resource", ""), s.labels.get("namespace", ""))
        report.unweighed[key] = report.unweighed.get(key, 0.0) + hours(s)
    for s in data["unknown_profiles"]:
        name = s.labels.get("GPU_I_PROFILE", "")
        report.unknown_profiles[name] = report.unknown_profiles.get(name, 0.0) + hours(s)
    for s in data["nodes"]:
        node, pool = s.labels.get("node", ""), s.labels.get("pool", "")
        per = report.node_pools.setdefault(node, {})
        per[pool] = per.get(pool, 0.0) + hours(s)
    report.outside_pools = {k: v for k, v in report.outside_pools.items() if v > 0}
    report.unweighed = {k: v for k, v in report.unweighed.items() if v > 0}
    report.unknown_profiles = {k: v for k, v in report.unknown_profiles.items() if v > 0}


def _charges(report: UsageReport, tot: _Totals, spread_idle: bool) -> None:
    accounts = [*tot.tenants.values(), tot.other]
    for acc in accounts:
        priced = [p for p in acc.by_pool if tot.pools[p].cost is not None]
        acc.charge = sum(acc.by_pool[p][2] for p in priced) if priced else (None if acc.by_pool else 0.0)
    if spread_idle:  # OpenCost's "share idle": each pool's unallocated cost by the allocators' GPU-hours there
        for p in tot.pools.values():
            idle = p.unallocated_cost
            if not idle or not p.allocated_hours:
                continue
            p.idle_spread = idle
            for acc in accounts:
                a = acc.by_pool.get(p.name, [0.0])[0]
                acc.idle_charge += idle * a / p.allocated_hours
    centers: dict[str, CostCenterUsage] = {}
    for acc in tot.tenants.values():
        name = acc.cost_center or NO_COST_CENTER
        c = centers.setdefault(name, CostCenterUsage(name, []))
        c.tenants.append(acc.name)
        c.granted += acc.granted
        c.allocated_hours += acc.allocated_hours
        c.used_hours += acc.used_hours
        c.idle_charge += acc.idle_charge
        if acc.charge is not None:
            c.charge = (c.charge or 0.0) + acc.charge
    report.cost_centers = [centers[k] for k in sorted(centers)]


def gaps(window: Window, coverage: Iterable[Series]) -> list[Gap]:
    """The periods the coverage series show missing, consecutive short steps merged into one period."""
    ends = [window.start + (k + 1) * window.step for k in range(window.steps)]
    seen: dict[tuple[str, str], dict[float, float]] = {}
    for s in coverage:
        key = (s.labels.get("what", ""), s.labels.get("node", ""))
        row = seen.setdefault(key, {})
        for t, v in s.samples:
            row[round(t, 3)] = row.get(round(t, 3), 0.0) + v
    data = seen.get(("data", ""), {})

    def missing(kind: str, node: str, t: float) -> float:
        have = data.get(round(t, 3), 0.0)
        if kind == "no-data":
            return max(window.step - have, 0.0)
        if kind == "exporter":
            return seen[(kind, node)].get(round(t, 3), 0.0)
        return max(have - seen.get((kind, ""), {}).get(round(t, 3), 0.0), 0.0)  # within the data only

    kinds = [("no-data", ""), ("history", ""), ("labels", "")]
    kinds += sorted(k for k in seen if k[0] == "exporter")
    out: list[Gap] = []
    for kind, node in kinds:
        run: list[tuple[float, float]] = []
        for i in range(len(ends) + 1):
            t = ends[i] if i < len(ends) else math.inf
            x = missing(kind, node, t) if i < len(ends) else 0.0
            if x > 1e-6:
                run.append((t, x))
            elif run:
                out.append(Gap(kind, run[0][0] - window.step, run[-1][0], sum(x for _, x in run), node))
                run = []
    return out


def checked(what: str, series: list[Series]) -> list[Series]:
    """SERIES, every sample a finite, non-negative number (GPU requests and engine activity cannot be
    anything else); UsageDataError naming the first series with another."""
    for s in series:
        for t, v in s.samples:
            kind = _unusable(t, v)
            if kind:
                raise UsageDataError(
                    f"Prometheus answered a {kind} sample for the {what} series {series_name(s.labels)}: "
                    "GPU requests and activity are finite and never negative, so no usage is reported from it"
                )
    return series


def _unusable(t: float, v: float) -> str | None:
    """What is wrong with the sample (T, V), or None."""
    if v != v:
        return "NaN"
    if not math.isfinite(v):
        return "infinite"
    if v < 0:
        return "negative"
    return None if math.isfinite(t) else "timeless"


def finite(series: Series, x: float) -> float:
    """X, a series' total; UsageDataError naming the series when its samples overflow."""
    if not math.isfinite(x):
        raise UsageDataError(
            f"the samples of {series_name(series.labels)} add up to more than a number can hold: "
            "Prometheus answered values no GPU request or activity has"
        )
    return x


def not_finite(doc: object, path: str = "") -> str | None:
    """The path of the first figure of DOC (to_json's document) that is not a finite number, or None."""
    if isinstance(doc, float):
        return None if math.isfinite(doc) else path or "figure"
    if isinstance(doc, dict):
        items: Iterable[tuple[str, object]] = ((f"{path}.{k}" if path else str(k), v) for k, v in doc.items())
    elif isinstance(doc, list):  # a tenant, pool or cost centre by its name (from the spec), else its index
        items = (
            (f"{path}[{v['name'] if isinstance(v, dict) and isinstance(v.get('name'), str) else i}]", v)
            for i, v in enumerate(doc)
        )
    else:
        return None
    for p, v in items:
        found = not_finite(v, p)
        if found:
            return found
    return None


# -- JSON (docs/explanation/monitoring.md "gpupool usage -o json") ------------------------------------------------------


def _r(x: float | None, places: int = 4) -> float | None:
    return None if x is None else round(x, places)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tenant_json(t: TenantUsage, hours: float) -> dict:
    return {
        "name": t.name,
        "namespace": t.namespace or None,
        "costCenter": t.cost_center,
        "tier": t.tier,
        "grantedGpuEquivalents": _r(t.granted),
        "grantedGpuHours": _r(t.granted * hours),
        "allocatedGpuHours": _r(t.allocated_hours),
        "allocatedAverage": _r(t.allocated_hours / hours if hours else 0.0),
        "allocatedPeak": _r(t.peak_allocated),
        "usedGpuHours": _r(t.used_hours),
        "usedAverage": _r(t.used_hours / hours if hours else 0.0),
        "efficiency": _r(t.efficiency),
        "idleGpuHours": _r(t.idle_hours),
        "usedIncludesSharedDevices": t.used_shared,
        "charge": _r(t.charge, 2),
        "idleCharge": _r(t.idle_charge, 2),
        "totalCharge": _r(t.total_charge, 2),
        "pools": [
            {"pool": p, "allocatedGpuHours": _r(a), "usedGpuHours": _r(u), "charge": _r(c, 2)}
            for p, (a, u, c) in sorted(t.by_pool.items())
        ],
    }


def _pool_json(p: PoolUsage) -> dict:
    return {
        "name": p.name,
        "gpus": p.gpus,
        "sharing": p.sharing,
        "pricePerGpuHour": p.price,
        "capacityGpuHours": _r(p.capacity_hours),
        "allocatedGpuHours": _r(p.allocated_hours),
        "usedGpuHours": _r(p.used_hours),
        "utilisation": _r(p.utilisation),
        "allocation": _r(p.allocation),
        "unallocatedGpuHours": _r(p.unallocated_hours),
        "idleAllocatedGpuHours": _r(p.idle_allocated_hours),
        "recoverableGpuHours": _r(p.recoverable_hours),
        "cost": _r(p.cost, 2),
        "charged": _r(p.charged if p.cost is not None else None, 2),
        "unallocatedCost": _r(p.unallocated_cost, 2),
        "idleSpread": _r(p.idle_spread, 2),
    }


def to_json(r: UsageReport) -> dict:
    """The report as docs/explanation/monitoring.md "JSON" documents it (schemaVersion 2)."""
    hours = r.window.hours
    return {
        "schemaVersion": SCHEMA_VERSION,
        "cluster": r.cluster,
        "prometheus": r.prometheus,
        "start": _iso(r.window.start),
        "end": _iso(r.window.end),
        "stepSeconds": r.window.step,
        "resolutionSeconds": r.resolution,
        "hours": _r(hours),
        "trusted": not r.untrusted,
        "untrusted": r.untrusted,
        "spreadIdle": r.spread_idle,
        "gaps": [
            {"kind": g.kind, "start": _iso(g.start), "end": _iso(g.end), "seconds": _r(g.seconds, 1)}
            | ({"node": g.node} if g.node else {})
            for g in r.gaps
        ],
        "tenants": [_tenant_json(t, hours) for t in r.tenants],
        "otherNamespaces": _tenant_json(r.other, hours),
        "outsidePools": [
            {"node": n, "namespace": ns, "resource": res, "unitHours": _r(h)}
            for (n, ns, res), h in sorted(r.outside_pools.items())
        ],
        "unweighed": [
            {"pool": p, "resource": res, "namespace": ns, "unitHours": _r(h)}
            for (p, res, ns), h in sorted(r.unweighed.items())
        ],
        "unknownMigProfiles": [{"profile": k, "deviceHours": _r(h)} for k, h in sorted(r.unknown_profiles.items())],
        "nodes": [
            {"node": n, "pools": [{"pool": p, "hours": _r(h)} for p, h in sorted(per.items())]}
            for n, per in sorted(r.node_pools.items())
        ],
        "costCenters": [
            {
                "name": c.name,
                "tenants": list(c.tenants),
                "grantedGpuEquivalents": _r(c.granted),
                "allocatedGpuHours": _r(c.allocated_hours),
                "usedGpuHours": _r(c.used_hours),
                "efficiency": _r(c.efficiency),
                "charge": _r(c.charge, 2),
                "idleCharge": _r(c.idle_charge, 2),
            }
            for c in r.cost_centers
        ],
        "pools": [_pool_json(p) for p in r.pools],
        "days": [
            {
                "date": d.date,
                "tenants": [
                    {"name": k, "allocatedGpuHours": _r(a), "usedGpuHours": _r(u), "charge": _r(c, 2)}
                    for k, (a, u, c) in d.tenants.items()
                ],
                "pools": [
                    {"name": k, "capacityGpuHours": _r(cap), "allocatedGpuHours": _r(a), "usedGpuHours": _r(u),
                     "cost": _r(cost, 2)}
                    for k, (cap, a, u, cost) in d.pools.items()
                ],
            }
            for d in r.days
        ],
    }  # fmt: skip
