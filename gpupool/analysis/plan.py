"""The capacity plan of a validated spec: supply, grants, headroom, GPU-equivalents and chargeback.

Pure computation (no printing, no I/O): `compute(spec)` returns a `CapacityPlan`. Its presentations live in
gpupool.present: the tables for people in plan.py, the stable JSON document (docs/reference/plan-json.md) in plan_json.py.

Arithmetic is exact (`Fraction`) until formatting, so a MIG instance of 1/7 GPU times 7 is exactly one GPU
and sums of many small shares do not drift.

Attribution: a resource name (e.g. nvidia.com/gpu) may be supplied by several pools with different GPUs and
prices. A quota names only the resource, not the pool, so a grant of resource R is attributed to the pools
supplying R in proportion to their capacity of R: pool p carries grant x capacity_p(R) / capacity(R).

Chargeback reconciles (docs/explanation/chargeback.md): a unit weighs NodePool.unit_gpu_fraction (a MIG instance its
layout's share of the GPU, so a GPU's instances add up to one GPU), an oversubscribed resource is charged at
its capacity (every grant of it scaled by capacity / granted), and what no grant covers is reported per pool
as unallocated. So per pool: charged + unallocated GPU-equivalents = its GPUs, and the money likewise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property

from gpupool.k8s import rollout
from gpupool.model import grants as grant_model
from gpupool.model import platform as m
from gpupool.model import queues as queue_model

HOURS_PER_MONTH = 730
SCHEMA_VERSION = 1
NO_COST_CENTER = "(none)"


@dataclass(frozen=True)
class Supply:
    """What one pool supplies of one advertised resource."""

    pool: str
    resource: str  # advertised name (after renames)
    physical: str  # device name before sharing (nvidia.com/gpu or nvidia.com/mig-<profile>)
    nodes: int
    terms: tuple[tuple[int, int], ...]  # (GPUs per node in the group, devices per GPU)
    replicas: int
    capacity: int
    gpu_per_unit: Fraction  # one advertised unit in physical GPUs
    price: Fraction | None  # per GPU-hour
    granted: Fraction = Fraction(0)  # attributed share of the resource's total grant

    @property
    def formula(self) -> str:
        """nodes x GPUs x devices-per-GPU (x replicas), e.g. "4×4 GPUs × 7" or "2×8 GPUs × 2 × 2 replicas"."""

        def term(gpus: int, per: int) -> str:
            return f"{gpus} GPU{'s' if gpus != 1 else ''}" + (f" × {per}" if per != 1 else "")

        if len(self.terms) == 1:
            body = term(*self.terms[0])
        else:
            body = "(" + " + ".join(term(*t) for t in self.terms) + ")"
        text = f"{self.nodes}×{body}"
        if self.replicas != 1:
            text += f" × {self.replicas} replicas"
        return text

    @property
    def gpu_equivalents(self) -> Fraction:
        return self.capacity * self.gpu_per_unit

    @property
    def granted_gpu_equivalents(self) -> Fraction:
        """The grants as written, in GPUs: more than the pool has when the resource is oversubscribed."""
        return self.granted * self.gpu_per_unit

    @property
    def charge_factor(self) -> Fraction:
        """What one granted unit is charged of its weight: capacity / granted when oversubscribed, else 1."""
        return Fraction(self.capacity) / self.granted if self.granted > self.capacity else Fraction(1)

    @property
    def charged_gpu_equivalents(self) -> Fraction:
        return min(self.granted, Fraction(self.capacity)) * self.gpu_per_unit

    @property
    def unallocated_gpu_equivalents(self) -> Fraction:
        """Capacity no grant covers (the pool's cost nobody is charged for)."""
        return max(self.capacity - self.granted, Fraction(0)) * self.gpu_per_unit

    @property
    def oversubscribed_units(self) -> Fraction:
        return max(self.granted - self.capacity, Fraction(0))


@dataclass(frozen=True)
class PoolLine:
    name: str
    gpu_model: str
    nodes: int
    gpus_per_node: int
    gpus: int
    sharing: str
    replicas: int
    price: Fraction | None
    node_names: tuple[str, ...]
    node_selector: dict[str, str]
    supplies: tuple[Supply, ...]
    stranded_gpus: Fraction = Fraction(0)  # compute slices in no MIG instance (SM share), charged to instances
    allocation: str = m.DEVICE_PLUGIN  # or m.DRA: who hands the pool's devices to pods (docs/explanation/dra.md)

    @property
    def cost_per_hour(self) -> Fraction | None:
        return None if self.price is None else self.gpus * self.price

    @property
    def charged_gpu_equivalents(self) -> Fraction:
        return sum((s.charged_gpu_equivalents for s in self.supplies), Fraction(0))

    @property
    def unallocated_gpu_equivalents(self) -> Fraction:
        return sum((s.unallocated_gpu_equivalents for s in self.supplies), Fraction(0))

    @property
    def oversubscribed(self) -> bool:
        return any(s.oversubscribed_units for s in self.supplies)

    @property
    def reconciles(self) -> bool:
        """Charged + unallocated GPU-equivalents are exactly the pool's GPUs (so the money is its cost)."""
        return self.charged_gpu_equivalents + self.unallocated_gpu_equivalents == self.gpus

    def per_hour(self, gpu_equivalents: Fraction) -> Fraction | None:
        return None if self.price is None else gpu_equivalents * self.price


@dataclass(frozen=True)
class ResourceLine:
    """One advertised resource over all pools: the numbers the capacity check judges."""

    resource: str
    capacity: int
    granted: int
    max_ratio: Fraction
    pools: tuple[str, ...]
    allowed: int  # what the policy allows in total: Oversubscription.allowed, the one rule

    @property
    def headroom(self) -> int:
        """Units still grantable under the oversubscription policy (negative: over-granted)."""
        return self.allowed - self.granted

    @property
    def ratio(self) -> Fraction | None:
        """Granted / capacity: above 1 means oversubscribed."""
        return Fraction(self.granted, self.capacity) if self.capacity else None


@dataclass(frozen=True)
class Allocation:
    """The part of one tenant's grant of one resource attributed to one pool."""

    tenant: str
    resource: str
    pool: str
    units: Fraction
    gpu_equivalents: Fraction  # charged: the grant's weight, scaled down when the resource is oversubscribed
    price: Fraction | None
    granted_gpu_equivalents: Fraction = Fraction(0)  # the grant's weight as written

    @property
    def cost_per_hour(self) -> Fraction | None:
        return None if self.price is None else self.gpu_equivalents * self.price


@dataclass(frozen=True)
class Cost:
    """Charged GPU-equivalents split into priced and unpriced, what the priced part costs, and the grants'
    GPU-equivalents as written (more than charged where a resource is oversubscribed)."""

    gpu_equivalents: Fraction = Fraction(0)
    priced_gpu_equivalents: Fraction = Fraction(0)
    per_hour: Fraction = Fraction(0)
    granted_gpu_equivalents: Fraction = Fraction(0)

    @property
    def unpriced_gpu_equivalents(self) -> Fraction:
        return self.gpu_equivalents - self.priced_gpu_equivalents

    @property
    def per_month(self) -> Fraction:
        return self.per_hour * HOURS_PER_MONTH

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.gpu_equivalents + other.gpu_equivalents,
            self.priced_gpu_equivalents + other.priced_gpu_equivalents,
            self.per_hour + other.per_hour,
            self.granted_gpu_equivalents + other.granted_gpu_equivalents,
        )


@dataclass(frozen=True)
class TenantLine:
    name: str
    tier: str
    cost_center: str | None
    offboarded: bool
    grants: dict[str, int]  # what the quota grants (empty when offboarded: its quota is 0)
    cost: Cost
    share: Fraction  # GPU-equivalents / the cluster's physical GPUs
    by_resource: dict[str, Fraction] = field(default_factory=dict)  # GPU-equivalents per granted resource
    _supplies: dict[str, tuple[Supply, ...]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def gpu_equivalents(self) -> Fraction:
        return self.cost.gpu_equivalents

    def resource_gpu_equivalents(self, resource: str) -> Fraction:
        return self.by_resource.get(resource, Fraction(0))

    @cached_property
    def allocations(self) -> tuple[Allocation, ...]:
        """The grant split over the supplying pools (line items); computed on first use."""
        out = []
        for r, n in self.grants.items():
            sups = self._supplies.get(r, ())
            total = sum(s.capacity for s in sups)
            for s in sups:
                units = Fraction(n * s.capacity, total) if total else Fraction(0)
                eq = units * s.gpu_per_unit
                out.append(Allocation(self.name, r, s.pool, units, eq * s.charge_factor, s.price, eq))
        return tuple(out)


@dataclass(frozen=True)
class CostCenterLine:
    name: str
    tenants: tuple[str, ...]
    cost: Cost
    share: Fraction

    @property
    def gpu_equivalents(self) -> Fraction:
        return self.cost.gpu_equivalents


@dataclass(frozen=True)
class RolloutLine:
    """How a MIG layout change rolls over one MIG-capable pool (gpupool.k8s.rollout)."""

    pool: str
    max_unavailable: int  # as configured
    at_once: int  # nodes unavailable at once: min(maxUnavailable, nodes)
    cordon: bool
    node_timeout_seconds: int
    waves: tuple[tuple[str, ...], ...]  # named nodes in order; empty for a selector-based pool
    node_selector: dict[str, str]
    drain_timeout_seconds: int = 0  # 0: the pool does not drain (rollout.drain off, or no cordon)


@dataclass(frozen=True)
class MaxPerPodLine:
    tenant: str
    resource: str
    limit: int
    source: str  # "tenant" or "tier <name>"
    quota: int


@dataclass(frozen=True)
class CapacityPlan:
    cluster: str
    source: str
    total_gpus: int
    pools: tuple[PoolLine, ...]
    resources: tuple[ResourceLine, ...]
    tenants: tuple[TenantLine, ...]
    cost_centers: tuple[CostCenterLine, ...]
    total: Cost = field(default_factory=Cost)
    rollouts: tuple[RolloutLine, ...] = ()
    max_per_pod: tuple[MaxPerPodLine, ...] = ()
    queues: tuple[queue_model.FlavorLine, ...] = ()  # Kueue quotas per flavor (only with `queueing:`)
    # Per tenant and resource: grant, nominal, the most through Kueue and the ceiling outside it (`queueing:`)
    queue_ceilings: tuple[queue_model.Ceiling, ...] = ()

    @property
    def priced(self) -> bool:
        return any(p.price is not None for p in self.pools)

    @property
    def ok(self) -> bool:
        return all(r.headroom >= 0 for r in self.resources)

    @property
    def over(self) -> tuple[ResourceLine, ...]:
        return tuple(r for r in self.resources if r.headroom < 0)

    def resource(self, name: str) -> ResourceLine | None:
        return next((r for r in self.resources if r.resource == name), None)

    def tenant(self, name: str) -> TenantLine | None:
        return next((t for t in self.tenants if t.name == name), None)

    def cost_center(self, name: str) -> CostCenterLine | None:
        return next((c for c in self.cost_centers if c.name == name), None)

    @property
    def unallocated(self) -> Cost:
        """Capacity no grant covers, over all pools: with `total` it makes up what the pools cost."""
        out = Cost()
        for p in self.pools:
            u = p.unallocated_gpu_equivalents
            out = out + Cost(u, u if p.price is not None else Fraction(0), p.per_hour(u) or Fraction(0), u)
        return out

    @property
    def pools_cost_per_hour(self) -> Fraction:
        return sum((p.cost_per_hour for p in self.pools if p.cost_per_hour is not None), Fraction(0))

    def supply(self, pool: str, resource: str) -> Supply | None:
        for p in self.pools:
            if p.name == pool:
                return next((s for s in p.supplies if s.resource == resource), None)
        return None


def _price(pool: m.NodePool) -> Fraction | None:
    return None if pool.price_per_gpu_hour is None else Fraction(str(pool.price_per_gpu_hour))


def _supplies(pool: m.NodePool) -> list[Supply]:
    out = []
    terms = pool.physical_terms()
    per_node = pool.resources_per_node()
    for physical in sorted(terms):
        advertised = pool.advertised_name(physical)
        out.append(
            Supply(
                pool.name,
                advertised,
                physical,
                pool.node_count,
                tuple(terms[physical]),
                pool.sharing.replicas,
                per_node[advertised] * pool.node_count,
                pool.unit_gpu_fraction(advertised),
                _price(pool),
            )
        )
    return out


def _pool_line(pool: m.NodePool, shares: tuple[Supply, ...]) -> PoolLine:
    return PoolLine(
        pool.name,
        pool.gpu_model,
        pool.node_count,
        pool.gpus_per_node,
        pool.total_gpus,
        pool.sharing.kind,
        pool.sharing.replicas,
        _price(pool),
        tuple(pool.nodes),
        dict(pool.node_selector),
        shares,
        pool.stranded_gpus() * pool.node_count,
        pool.allocation,
    )


Unit = tuple[Fraction, Fraction, Fraction]  # one granted unit: charged GPU-equivalents, priced ones, cost per hour


def _per_unit(
    by_resource: dict[str, list[Supply]],
    capacity: dict[str, int],
    granted: dict[str, int],
    weights: dict[str, Fraction],
) -> dict[str, Unit]:
    """Per resource, one granted unit's charged GPU-equivalents, priced GPU-equivalents and cost, averaged over
    the supplying pools by capacity; an oversubscribed resource is scaled down by its oversubscription."""
    per_unit: dict[str, Unit] = {}
    for r, sups in by_resource.items():
        c = capacity[r]
        factor = Fraction(c, granted[r]) if granted.get(r, 0) > c else Fraction(1)
        priced = sum((s.capacity * s.gpu_per_unit for s in sups if s.price is not None), Fraction(0))
        cost = sum((s.capacity * s.gpu_per_unit * s.price for s in sups if s.price is not None), Fraction(0))
        per_unit[r] = (weights[r] * factor, priced * factor / c, cost * factor / c) if c else (Fraction(0),) * 3
    return per_unit


def _tenant_line(
    t: m.Tenant,
    per_unit: dict[str, Unit],
    supplies_of: dict[str, tuple[Supply, ...]],
    nominal: Fraction,
    share: Callable[[Fraction], Fraction],
) -> TenantLine:
    grants = grant_model.tenant_grants(t)
    eq_by_r = {}
    eq = priced = per_hour = Fraction(0)
    for r, n in grants.items():
        ue, up, uc = per_unit.get(r, (Fraction(0),) * 3)
        eq_by_r[r] = n * ue
        eq += n * ue
        priced += n * up
        per_hour += n * uc
    cost = Cost(eq, priced, per_hour, nominal)
    supplies = {r: supplies_of.get(r, ()) for r in grants}
    return TenantLine(t.name, t.tier, t.cost_center, t.offboarded, grants, cost, share(eq), eq_by_r, supplies)


def _cost_centers(tenants: list[TenantLine], share: Callable[[Fraction], Fraction]) -> list[CostCenterLine]:
    centers: dict[str, list[TenantLine]] = {}
    for line in tenants:
        centers.setdefault(line.cost_center or NO_COST_CENTER, []).append(line)
    out = []
    for name in sorted(centers):
        cost = sum((line.cost for line in centers[name]), Cost())
        out.append(CostCenterLine(name, tuple(line.name for line in centers[name]), cost, share(cost.gpu_equivalents)))
    return out


def compute(spec: m.Spec) -> CapacityPlan:
    granted = spec.granted()
    supplies_by_pool = {pool.name: _supplies(pool) for pool in spec.pools}
    by_resource: dict[str, list[Supply]] = {}
    for sups in supplies_by_pool.values():
        for s in sups:
            by_resource.setdefault(s.resource, []).append(s)
    capacity = {r: sum(s.capacity for s in sups) for r, sups in by_resource.items()}

    # Attribute the total grant of each resource to its pools, in proportion to their capacity.
    attributed: dict[tuple[str, str], Fraction] = {}
    for r, sups in by_resource.items():
        for s in sups:
            attributed[(s.pool, r)] = (
                Fraction(granted.get(r, 0) * s.capacity, capacity[r]) if capacity[r] else Fraction(0)
            )
    pools = [
        _pool_line(
            pool, tuple(replace(s, granted=attributed[(s.pool, s.resource)]) for s in supplies_by_pool[pool.name])
        )
        for pool in spec.pools
    ]
    total_gpus = sum(p.total_gpus for p in spec.pools)

    resources = resource_lines(spec)

    def share(x: Fraction) -> Fraction:
        return x / total_gpus if total_gpus else Fraction(0)

    # A tenant's numbers are one multiplication per granted resource (_per_unit). What a unit weighs as granted is
    # the model's fact (gpupool.model.grants); attribution is by capacity, so an oversubscribed resource is
    # oversubscribed by the same factor in each of its pools.
    weights = grant_model.unit_weights(spec)
    per_unit = _per_unit(by_resource, capacity, granted, weights)
    supplies_of: dict[str, tuple[Supply, ...]] = {}
    for pool_line in pools:  # the supplies with their attributed grants (and so their charge factors)
        for s in pool_line.supplies:
            supplies_of[s.resource] = supplies_of.get(s.resource, ()) + (s,)
    nominal = grant_model.granted_gpu_equivalents(spec, weights)
    tenants = [_tenant_line(t, per_unit, supplies_of, nominal[t.name], share) for t in spec.tenants]
    cost_centers = _cost_centers(tenants, share)
    total = sum((t.cost for t in tenants), Cost())
    return CapacityPlan(
        spec.cluster.name,
        spec.source_path,
        total_gpus,
        tuple(pools),
        tuple(resources),
        tuple(tenants),
        tuple(cost_centers),
        total,
        rollouts(spec),
        max_per_pod(spec),
        tuple(queue_model.flavor_lines(spec, spec.queueing)) if spec.queueing else (),
        tuple(queue_model.ceilings(spec, spec.queueing)) if spec.queueing else (),
    )


def resource_lines(spec: m.Spec) -> tuple[ResourceLine, ...]:
    """Per advertised or granted resource: capacity, grants and what the oversubscription policy allows. The
    part of the plan the stack outputs carry; it needs no pool's supply lines, MIG configs or tenants' costs."""
    granted = spec.granted()
    capacity: dict[str, int] = {}
    pools: dict[str, tuple[str, ...]] = {}
    for pool in spec.pools:  # as compute() lists the supplies: pool by pool, devices by name
        terms, per_node = pool.physical_terms(), pool.resources_per_node()
        for physical in sorted(terms):
            r = pool.advertised_name(physical)
            capacity[r] = capacity.get(r, 0) + per_node[r] * pool.node_count
            pools[r] = pools.get(r, ()) + (pool.name,)
    return tuple(
        ResourceLine(
            r,
            capacity.get(r, 0),
            granted.get(r, 0),
            spec.oversubscription.exact_ratio_for(r),
            pools.get(r, ()),
            spec.oversubscription.allowed(r, capacity.get(r, 0)),
        )
        for r in sorted(set(capacity) | set(granted))
    )


def rollouts(spec: m.Spec) -> tuple[RolloutLine, ...]:
    """The rollout of every MIG-capable pool (a MIG layout, or a GPU MIG Manager may be told to lay out: the
    pools the MIG config maps, gpupool.k8s.manifests.mig_configs): the same waves the program chains
    (gpupool.k8s.rollout)."""
    out = []
    for pool in spec.pools:
        if not pool.mig_capable:
            continue
        r = pool.rollout
        out.append(
            RolloutLine(
                pool.name,
                r.max_unavailable,
                min(r.max_unavailable, pool.node_count),
                r.cordon,
                r.node_timeout_seconds,
                tuple(rollout.waves(pool)),
                dict(pool.node_selector),
                r.drain_timeout_seconds if r.drains else 0,
            )
        )
    return tuple(out)


def max_per_pod(spec: m.Spec) -> tuple[MaxPerPodLine, ...]:
    out = []
    for t in spec.tenants:
        for resource, limit in spec.max_per_pod(t).items():
            source = "tenant" if resource in t.max_per_pod else f"tier {t.tier}"
            out.append(MaxPerPodLine(t.name, resource, limit, source, t.gpus.get(resource, 0)))
    return tuple(out)


# -- JSON ----------------------------------------------------------------------------------------
