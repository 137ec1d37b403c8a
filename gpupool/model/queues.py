"""What Kueue is given, derived once from the model: nominal quota per tenant, flavor (pool) and resource, the
resource groups, and the most Kueue can admit for a tenant (which sizes its ResourceQuota).

The Kueue objects (gpupool.k8s.kueue), the GP52x/GP62x rules and `gpupool plan` all read these functions, so
every figure is computed in one place. Kueue semantics relied on (kueue v0.19.2,
apis/kueue/v1beta2/clusterqueue_types.go:305-342): a ClusterQueue may use nominalQuota + borrowingLimit of a
(flavor, resource) when its cohort has idle quota; a null borrowingLimit means "up to what the cohort can
lend"; a null lendingLimit lends all of the idle nominal quota; a Cohort's own nominalQuota is shared quota on
top of its members' (apis/kueue/v1beta2/cohort_types.go:45-50).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from gpupool.model import platform as m
from gpupool.model.queueing import Queueing

LOCAL_QUEUE = "default"  # Kueue's LocalQueueDefaulting gives unlabelled jobs the LocalQueue named "default"


@dataclass(frozen=True)
class Quota:
    """One (flavor, resource) entry of a tenant's ClusterQueue."""

    flavor: str  # the pool's ResourceFlavor
    resource: str
    nominal: int
    borrowing_limit: int | None  # None: Kueue's null (no limit)
    lending_limit: int | None

    @property
    def lendable(self) -> int:
        return self.nominal if self.lending_limit is None else min(self.lending_limit, self.nominal)


@dataclass(frozen=True)
class TenantQueue:
    tenant: str
    tier: str
    cohort: str | None  # None: isolated (no cohort)
    quotas: tuple[Quota, ...]
    stopped: bool = False  # an offboarded tenant: Kueue admits nothing more (stopPolicy Hold)

    def quota(self, flavor: str, resource: str) -> Quota | None:
        return next((q for q in self.quotas if q.flavor == flavor and q.resource == resource), None)


def flavor_name(pool: m.NodePool) -> str:
    """A pool's ResourceFlavor name: the pool name (cluster-scoped, and pool names are DNS labels)."""
    return pool.name


def guaranteed(spec: m.Spec, tenant: m.Tenant, resource: str) -> int:
    """The part of a grant Kueue guarantees as nominal quota. An oversubscribed resource (ratio above 1)
    promises more than exists: its nominal quota is the grant divided by the ratio, rounded down, and the
    rest comes from borrowing idle quota. Exact arithmetic, like Oversubscription.allowed."""
    grant = 0 if tenant.offboarded else tenant.gpus.get(resource, 0)
    ratio = spec.oversubscription.exact_ratio_for(resource)
    return math.floor(grant / ratio) if ratio > 1 else grant


def offered(spec: m.Spec, tenant: m.Tenant) -> list[tuple[m.NodePool, str]]:
    """The (pool, advertised resource) pairs a tenant's ClusterQueue lists: everything the cluster
    advertises (a nominal quota of 0 still lets it borrow), except software-shared resources for a
    dedicated tier (GP504 refuses granting those)."""
    tier = spec.tier(tenant.tier)
    dedicated = tier is not None and tier.isolation == "dedicated"
    return [
        (pool, resource)
        for pool in spec.pools
        if not (dedicated and pool.sharing.software_shared)
        for resource in pool.resources_per_node()
    ]


def _fill_order(spec: m.Spec) -> list[m.Tenant]:
    """Who is placed first when a resource comes from several pools: higher tiers, then by name."""
    priority = {t.name: t.priority for t in spec.tiers}
    return sorted(spec.active_tenants, key=lambda t: (-priority.get(t.tier, 0), t.name))


def nominal_split(spec: m.Spec, queueing: Queueing) -> dict[tuple[str, str, str], int]:
    """(tenant, pool, resource) -> nominal quota. A grant of a resource several pools advertise fills the
    pools in spec order (what a cohort reserves comes off first), tenants of higher tiers first; what does
    not fit lands on the last pool, where GP620 reports it."""
    left = {(p.name, r): c for p in spec.pools for r, c in p.capacity().items()}
    for cohort in queueing.cohorts:
        for reserved_on, resources in cohort.quota.items():
            for r, n in resources.items():
                if (reserved_on, r) in left:
                    left[(reserved_on, r)] -= n
    out: dict[tuple[str, str, str], int] = {}
    for tenant in _fill_order(spec):
        pools_of: dict[str, list[str]] = {}
        for pool, r in offered(spec, tenant):
            pools_of.setdefault(r, []).append(pool.name)
        for r, pools in pools_of.items():
            need = guaranteed(spec, tenant, r)
            for i, name in enumerate(pools):
                take = need if i == len(pools) - 1 else min(need, max(left[(name, r)], 0))
                out[(tenant.name, name, r)] = take
                left[(name, r)] -= take
                need -= take
    return out


def tenant_queues(spec: m.Spec, queueing: Queueing) -> dict[str, TenantQueue]:
    """A ClusterQueue per tenant. An offboarded tenant's keeps no quota, borrows nothing and admits nothing
    new (like its ResourceQuota of 0), and goes away with the tenant."""
    split = nominal_split(spec, queueing)
    out: dict[str, TenantQueue] = {}
    for tenant in spec.tenants:
        policy = queueing.policy(tenant.tier)
        cohort = queueing.cohort_of(tenant.name, tenant.tier)
        quotas = tuple(
            Quota(
                flavor_name(pool),
                r,
                split.get((tenant.name, pool.name, r), 0),
                0 if tenant.offboarded and cohort is not None else policy.borrowing(r),
                policy.lending(r),
            )
            for pool, r in offered(spec, tenant)
        )
        out[tenant.name] = TenantQueue(tenant.name, tenant.tier, cohort, quotas, tenant.offboarded)
    return out


def resource_groups(quotas: Iterable[Quota]) -> list[tuple[list[str], list[str]]]:
    """Kueue resource groups as (coveredResources, flavors): each resource and each flavor in exactly one
    group, and every flavor of a group lists every covered resource (the CEL rule of
    apis/kueue/v1beta2/clusterqueue_types.go:254; the webhook's duplicate check, pkg/webhooks/
    clusterqueue_webhook.go:302-329). So a group is a connected set of flavors sharing resources: pools
    with the same resource names (two whole-GPU pools) form one group, a MIG pool with its own profiles
    another. Ordered as the pools are."""
    flavors: dict[str, list[str]] = {}
    for q in quotas:
        flavors.setdefault(q.flavor, []).append(q.resource)
    groups: list[tuple[list[str], list[str]]] = []
    for flavor, resources in flavors.items():
        joined = [g for g in groups if set(g[0]) & set(resources)]
        covered = [r for g in joined for r in g[0]] + [r for r in resources if not any(r in g[0] for g in joined)]
        members = [f for g in joined for f in g[1]] + [flavor]
        groups = [g for g in groups if g not in joined] + [(sorted(set(covered)), members)]
    return groups


def _tree(queueing: Queueing, cohort: str | None) -> str | None:
    """The root of a cohort's tree (None on a cycle or for no cohort)."""
    parents = {c.name: c.parent for c in queueing.all_cohorts()}
    seen: set[str] = set()
    while cohort is not None and cohort in parents and parents[cohort] is not None:
        if cohort in seen:
            return None
        seen.add(cohort)
        cohort = parents[cohort]
    return cohort


def max_admitted(spec: m.Spec, queueing: Queueing) -> dict[str, dict[str, int]]:
    """Per tenant and resource, the most Kueue can admit at once: its nominal quota plus what it can borrow
    (its borrowingLimit, else everything the rest of its cohort tree lends plus the cohorts' own quota),
    summed over the flavors. The tenant's ResourceQuota is sized to exactly this, so no pod of an admitted
    job is ever refused by it (Kueue does not read ResourceQuotas: kubernetes-sigs/kueue#696, #1403)."""
    queues = tenant_queues(spec, queueing)
    shared: dict[tuple[str | None, str, str], int] = {}  # (tree, flavor, resource) -> cohort quota
    for cohort in queueing.cohorts:
        for pool, resources in cohort.quota.items():
            for r, n in resources.items():
                key = (_tree(queueing, cohort.name), pool, r)
                shared[key] = shared.get(key, 0) + n
    lent: dict[tuple[str | None, str, str], int] = {}
    for q in queues.values():
        tree = _tree(queueing, q.cohort)
        for quota in q.quotas:
            if q.cohort is not None:
                key = (tree, quota.flavor, quota.resource)
                lent[key] = lent.get(key, 0) + quota.lendable
    out: dict[str, dict[str, int]] = {}
    for q in queues.values():
        tree = _tree(queueing, q.cohort)
        total: dict[str, int] = {}
        for quota in q.quotas:
            most = quota.nominal
            if q.cohort is not None:
                key = (tree, quota.flavor, quota.resource)
                available = lent.get(key, 0) - quota.lendable + shared.get(key, 0)
                limit = quota.borrowing_limit
                most += available if limit is None else min(limit, available)
            total[quota.resource] = total.get(quota.resource, 0) + most
        out[q.tenant] = total
    return out


@dataclass(frozen=True)
class FlavorLine:
    """One (flavor, resource) of `gpupool plan`'s queue table."""

    flavor: str
    resource: str
    capacity: int  # what the pool places (MIG: instances of its layouts; shared: replicas)
    nominal: int  # the tenants' nominal quotas together
    cohort_quota: int  # what cohorts add on top
    lendable: int  # of the nominal quota, what tenants lend to their cohorts
    borrowable: int  # what borrowing tenants can take beyond their own nominal quota: lendable + cohort quota

    @property
    def reserved(self) -> int:
        """Nominal quota its owners never lend."""
        return self.nominal - self.lendable


def flavor_lines(spec: m.Spec, queueing: Queueing) -> list[FlavorLine]:
    queues = tenant_queues(spec, queueing)
    out = []
    for pool in spec.pools:
        for r, capacity in pool.capacity().items():
            entries = [(q, q.quota(flavor_name(pool), r)) for q in queues.values()]
            nominal = sum(e.nominal for _, e in entries if e)
            lendable = sum(e.lendable for q, e in entries if e and q.cohort is not None)
            cohort_quota = sum(c.quota.get(pool.name, {}).get(r, 0) for c in queueing.cohorts)
            out.append(
                FlavorLine(flavor_name(pool), r, capacity, nominal, cohort_quota, lendable, lendable + cohort_quota)
            )
    return out


def gated_resources(spec: m.Spec) -> list[str]:
    """The resource names a pod in a tenant namespace may ask for only through Kueue (the queue policy,
    gpupool.k8s.kueue_policy, also covers every other `nvidia.com/` name): every resource the cluster
    advertises and `nvidia.com/gpu`, i.e. every resource the tenants' GPU ResourceQuotas list."""
    return sorted(set(spec.advertised_resources()) | {m.GPU})


@dataclass(frozen=True)
class Ceiling:
    """What one tenant can hold of one resource, and by which path (`gpupool plan`'s per-tenant Kueue table)."""

    tenant: str
    resource: str
    grant: int
    nominal: int  # its own nominal quota, summed over the flavors
    through_kueue: int  # the most Kueue can admit for it (its ResourceQuota's size)
    outside_kueue: int  # the most it can take without Kueue admitting it


def ceilings(spec: m.Spec, queueing: Queueing) -> list[Ceiling]:
    """Per tenant and resource it is granted or may be admitted. Outside Kueue: 0 for a resource the queue
    policy gates (a GPU pod is refused unless Kueue holds it or the job controller makes it for a Job that
    is itself Kueue's), else what the ResourceQuota leaves, at most the grant."""
    gated = set(gated_resources(spec))
    most = max_admitted(spec, queueing)
    tenants = {t.name: t for t in spec.tenants}
    out = []
    for name, queue in tenant_queues(spec, queueing).items():
        grants = {} if tenants[name].offboarded else tenants[name].gpus
        nominal: dict[str, int] = {}
        for x in queue.quotas:
            nominal[x.resource] = nominal.get(x.resource, 0) + x.nominal
        for r in sorted(set(grants) | {r for r, n in most.get(name, {}).items() if n}):
            through = most.get(name, {}).get(r, 0)
            outside = 0 if r in gated else min(through, grants.get(r, 0))
            out.append(Ceiling(name, r, grants.get(r, 0), nominal.get(r, 0), through, outside))
    return out
