"""`gpupool usage`: what tenants allocated and used over a time range, and what it costs.

Pure computation over Prometheus range-query results (gpupool.monitoring.prometheus fetches them; the
queries are gpupool.monitoring.promql's, the joins the recording rules make live). Weights are the
chargeback's: NodePool.unit_gpu_fraction for a requested unit, device_gpu_fraction for a device's activity.

Time: the range is cut into steps; the value at each step's end stands for the whole step (a week at the
default 5m step is 2,016 samples per series). GPU-hours = sum over steps of GPU-equivalents x step.

Charge: allocated GPU-hours x the pool's price. What running pods held is what nobody else could use;
activity is reported beside it (efficiency) rather than billed, since a pod cannot give back the idle part
of a GPU it holds. Per pool, the tenants' charges + other namespaces' + the unallocated remainder = what the
pool cost over the range.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC

from gpupool.analysis.plan import NO_COST_CENTER
from gpupool.model import grants
from gpupool.model import platform as m
from gpupool.monitoring import promql as q
from gpupool.monitoring.series import Series, Window, series_name
from gpupool.spec.diagnostics import printable

SCHEMA_VERSION = 1
OTHER = "(other namespaces)"  # GPU pods outside gpupool's tenants: charged, not to a tenant
UNKNOWN_POOL = "(unknown pool)"


class UsageDataError(ValueError):
    """Prometheus' series cannot be turned into a report: a sample that is not a finite, non-negative number,
    a total that overflows, or a MIG profile the spec's pool no longer has. The message names the series."""


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
    by_pool: dict[str, tuple[float, float]] = field(default_factory=dict)  # pool -> (allocated h, used h)
    used_shared: bool = False  # part of `used` is an equal share of a time-sliced/MPS device

    @property
    def idle_hours(self) -> float:
        return max(self.allocated_hours - self.used_hours, 0.0)

    @property
    def efficiency(self) -> float | None:
        return self.used_hours / self.allocated_hours if self.allocated_hours else None


@dataclass
class PoolUsage:
    name: str
    gpus: int
    price: float | None
    sharing: str
    capacity_hours: float = 0.0
    allocated_hours: float = 0.0
    used_hours: float = 0.0

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

    def money(self, hours: float) -> float | None:
        return None if self.price is None else hours * self.price


@dataclass
class CostCenterUsage:
    name: str
    tenants: list[str]
    granted: float = 0.0
    allocated_hours: float = 0.0
    used_hours: float = 0.0
    charge: float | None = None

    @property
    def efficiency(self) -> float | None:
        return self.used_hours / self.allocated_hours if self.allocated_hours else None


@dataclass
class UsageReport:
    cluster: str
    prometheus: str
    window: Window
    tenants: list[TenantUsage]
    pools: list[PoolUsage]
    cost_centers: list[CostCenterUsage]
    other: TenantUsage  # GPU pods in namespaces that are no tenant of the spec
    unattributed_hours: float = 0.0  # allocations on nodes of no known pool (weight unknown)


class Weights:
    """node -> pool, and the chargeback's weights of a requested unit and of a device's activity."""

    def __init__(self, spec: m.Spec, node_pools: Mapping[str, str]):
        self.pools = {p.name: p for p in spec.pools}
        self.node_pool = {n: p.name for p in spec.pools for n in p.nodes}
        self.node_pool.update({n: p for n, p in node_pools.items() if p in self.pools})
        self._unit: dict[tuple[str, str], float] = {}
        self._suppliers: dict[str, list[str]] = {}
        for p in spec.pools:
            for adv in p.resources_per_node():
                self._unit[(p.name, q.ksm_resource(adv))] = float(p.unit_gpu_fraction(adv))
                self._suppliers.setdefault(q.ksm_resource(adv), []).append(p.name)

    def pool_of(self, node: str, resource: str | None = None) -> str | None:
        pool = self.node_pool.get(node)
        if pool is None and resource is not None and len(self._suppliers.get(resource, [])) == 1:
            pool = self._suppliers[resource][0]  # one pool advertises it: the node must be one of its nodes
        return pool

    def unit(self, pool: str, resource: str) -> float | None:
        return self._unit.get((pool, resource))

    def device(self, pool: str, profile: str, series: Series | None = None) -> float:
        if not profile:
            return 1.0
        p = self.pools[pool]
        if profile not in {name for group in p.sharing.mig for name in group.layout}:
            # A MIG layout changed within the range: its old instances have no weight in the spec as it is now
            # (pricing across a re-layout needs the layout's history).
            raise UsageDataError(
                f"Prometheus' series {series_name(series.labels) if series else '(unnamed)'}: MIG profile "
                f"{json.dumps(printable(profile))[:80]} is not in pool {p.name}'s layout in the spec; was the "
                "pool re-laid out within the range? gpupool weighs usage with the spec's current layout: give a "
                "--start after the re-layout"
            )
        return float(p.device_gpu_fraction(m.mig_resource(profile)))

    def shared(self, pool: str) -> bool:
        return self.pools[pool].sharing.software_shared


def node_pools(series: Iterable[Series]) -> dict[str, str]:
    """node -> pool from the gpupool.dev/pool label series (the last one seen wins)."""
    out: dict[str, str] = {}
    for s in series:
        node, pool = s.labels.get("node"), s.labels.get("pool") or s.labels.get(q.NODE_POOL_LABEL)
        if node and pool:
            out[node] = pool
    return out


def compute(
    spec: m.Spec,
    window: Window,
    allocated: Iterable[Series],
    used: Iterable[Series],
    devices: Iterable[Series],
    pool_labels: Iterable[Series] = (),
    prometheus: str = "",
) -> UsageReport:
    allocated, used, devices = (
        checked(what, list(ss)) for what, ss in (("allocated", allocated), ("used", used), ("devices", devices))
    )
    w = Weights(spec, node_pools(pool_labels))
    granted = grants.granted_gpu_equivalents(spec)  # as `gpupool plan` prints it
    hours_per_step = window.step / 3600
    tenants: dict[str, TenantUsage] = {}
    for t in spec.tenants:
        tenants[t.namespace] = TenantUsage(t.name, t.namespace, t.cost_center, t.tier, float(granted[t.name]))
    other = TenantUsage(OTHER, "", None, None, 0.0)
    pools = {
        p.name: PoolUsage(
            p.name, p.total_gpus, None if p.price_per_gpu_hour is None else p.price_per_gpu_hour, p.sharing.kind
        )
        for p in spec.pools
    }
    for p in pools.values():
        p.capacity_hours = p.gpus * window.hours

    def account(ns: str) -> TenantUsage:
        return tenants.get(ns, other)

    def in_window(samples: Iterable[tuple[float, float]]) -> Iterable[tuple[float, float]]:
        return ((t, v) for t, v in samples if window.start < t <= window.end + 1e-6)

    # Allocation: per namespace, GPU-equivalents at each step (for the peak) and GPU-hours per pool.
    per_step: dict[str, dict[float, float]] = {}
    unattributed = 0.0
    for s in allocated:
        ns, node, resource = s.labels.get("namespace", ""), s.labels.get("node", ""), s.labels.get("resource", "")
        pool = w.pool_of(node, resource)
        weight = w.unit(pool, resource) if pool else None
        if pool is None or weight is None:
            unattributed += finite(s, sum(v for _, v in in_window(s.samples)) * hours_per_step)
            continue
        acc = account(ns)
        steps = per_step.setdefault(acc.namespace or OTHER, {})
        total = 0.0
        for ts, v in in_window(s.samples):
            steps[ts] = steps.get(ts, 0.0) + v * weight
            total += v * weight
        hours = finite(s, total * hours_per_step)
        acc.allocated_hours += hours
        a, u = acc.by_pool.get(pool, (0.0, 0.0))
        acc.by_pool[pool] = (a + hours, u)
        pools[pool].allocated_hours += hours
    for key, steps in per_step.items():
        acc = other if key == OTHER else tenants[key]
        acc.peak_allocated = max(acc.peak_allocated, max(steps.values(), default=0.0))

    # Use: each namespace's share of its devices' activity (only namespaces holding devices report any).
    for s in used:
        ns, node, profile = s.labels.get("namespace", ""), s.labels.get("node", ""), s.labels.get("GPU_I_PROFILE", "")
        pool = w.pool_of(node)
        if pool is None:
            continue
        if ns == spec.cluster.operator.namespace or not ns:
            continue  # a device no pod holds: its series keeps the exporter's own namespace (honorLabels)
        held = tenants.get(ns, other)
        hours = finite(s, sum(v for _, v in in_window(s.samples)) * w.device(pool, profile, s) * hours_per_step)
        held.used_hours += hours
        a, u = held.by_pool.get(pool, (0.0, 0.0))
        held.by_pool[pool] = (a, u + hours)
        held.used_shared = held.used_shared or (w.shared(pool) and hours > 0)
    for s in devices:
        pool = w.pool_of(s.labels.get("node", ""))
        if pool is None:
            continue
        profile = s.labels.get("GPU_I_PROFILE", "")
        pools[pool].used_hours += finite(
            s, sum(v for _, v in in_window(s.samples)) * w.device(pool, profile, s) * hours_per_step
        )

    def charge(acc: TenantUsage) -> float | None:
        money = [pools[p].money(a) for p, (a, _) in acc.by_pool.items() if p in pools]
        priced = [x for x in money if x is not None]
        return sum(priced) if priced else (None if money else 0.0)

    for acc in [*tenants.values(), other]:
        acc.charge = charge(acc)
    centers: dict[str, CostCenterUsage] = {}
    for acc in tenants.values():
        name = acc.cost_center or NO_COST_CENTER
        c = centers.setdefault(name, CostCenterUsage(name, []))
        c.tenants.append(acc.name)
        c.granted += acc.granted
        c.allocated_hours += acc.allocated_hours
        c.used_hours += acc.used_hours
        if acc.charge is not None:
            c.charge = (c.charge or 0.0) + acc.charge
    report = UsageReport(
        spec.cluster.name,
        prometheus,
        window,
        list(tenants.values()),
        list(pools.values()),
        [centers[k] for k in sorted(centers)],
        other,
        unattributed,
    )
    overflowed = not_finite(to_json(report))
    if overflowed:
        raise UsageDataError(
            f"the report's {overflowed} is not a finite number: Prometheus' samples are each finite, but too "
            "large to add up or to price; no GPU request or activity has such values"
        )
    return report


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


# -- JSON (docs/monitoring.md "gpupool usage -o json") ------------------------------------------------------


def _r(x: float | None, places: int = 4) -> float | None:
    return None if x is None else round(x, places)


def to_json(r: UsageReport) -> dict:
    from datetime import datetime

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def tenant(t: TenantUsage) -> dict:
        hours = r.window.hours
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
            "pools": [
                {"pool": p, "allocatedGpuHours": _r(a), "usedGpuHours": _r(u)}
                for p, (a, u) in sorted(t.by_pool.items())
            ],
        }

    return {
        "schemaVersion": SCHEMA_VERSION,
        "cluster": r.cluster,
        "prometheus": r.prometheus,
        "start": iso(r.window.start),
        "end": iso(r.window.end),
        "stepSeconds": r.window.step,
        "hours": _r(r.window.hours),
        "tenants": [tenant(t) for t in r.tenants],
        "otherNamespaces": tenant(r.other),
        "unattributedGpuHours": _r(r.unattributed_hours),
        "costCenters": [
            {
                "name": c.name,
                "tenants": list(c.tenants),
                "grantedGpuEquivalents": _r(c.granted),
                "allocatedGpuHours": _r(c.allocated_hours),
                "usedGpuHours": _r(c.used_hours),
                "efficiency": _r(c.efficiency),
                "charge": _r(c.charge, 2),
            }
            for c in r.cost_centers
        ],
        "pools": [
            {
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
                "cost": _r(p.money(p.capacity_hours), 2),
                "charged": _r(p.money(p.allocated_hours), 2),
                "unallocatedCost": _r(p.money(p.unallocated_hours), 2),
            }
            for p in r.pools
        ],
    }
