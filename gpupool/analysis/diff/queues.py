"""What a change does to the Kueue queues (docs/explanation/queueing.md), from the queue model of both sides.

Computed from gpupool.model.queues (the functions the ClusterQueues and ResourceQuotas are made from), never
from rendered YAML: queueing turned on or off; per tenant and (flavor, resource) the nominal quota, the
borrowing limit and what it lends, before and after; cohort membership; the tiers' preemption and lending
policy; cohorts and queues added or removed. Which of these put the tenants' workloads at more risk of
preemption is decided here (`TierPolicyChange.exposes`, `TenantQueueChange.reduced`);
gpupool.analysis.diff.result turns them into alerts. Kueue semantics relied on: kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go,
ResourceQuota (a ClusterQueue keeps nominalQuota - lendingLimit for its exclusive use; null lendingLimit lends
all of it) and ClusterQueuePreemption (reclaimWithinCohort, withinClusterQueue, borrowWithinCohort).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gpupool.model import queues as qm
from gpupool.model.queueing import Limit, Queueing, QueuePolicy

if TYPE_CHECKING:
    from gpupool.k8s.manifests import DesiredObjects
    from gpupool.model import platform as m


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class QuotaLine:
    """One (flavor, resource) of a tenant's ClusterQueue, before → after. Not listed on a side: all 0.
    borrowing None is Kueue's null (no limit); without a cohort nothing is borrowed or lent (0)."""

    flavor: str
    resource: str
    nominal_before: int = 0
    nominal_after: int = 0
    borrowing_before: int | None = 0
    borrowing_after: int | None = 0
    lendable_before: int = 0
    lendable_after: int = 0

    @property
    def reduced(self) -> bool:
        return self.nominal_after < self.nominal_before


@dataclass(frozen=True)
class Admitted:
    """The most Kueue can admit for a tenant per resource (its GPU ResourceQuota is sized to it)."""

    resource: str
    before: int
    after: int


@dataclass(frozen=True)
class TenantQueueChange:
    tenant: str
    kind: Change
    tier: str
    cohort_before: str | None = None  # None: no queue, or an isolated tier (no cohort)
    cohort_after: str | None = None
    quotas: tuple[QuotaLine, ...] = ()  # the entries that change (added/removed queues: those with quota)
    stopped: bool = False  # HEAD: an offboarded tenant's queue holds (admits nothing new)
    admitted: tuple[Admitted, ...] = ()  # changes only

    @property
    def cohort_changed(self) -> bool:
        return self.kind == Change.CHANGED and self.cohort_before != self.cohort_after

    @property
    def reduced(self) -> tuple[QuotaLine, ...]:
        """Entries whose guaranteed (nominal) quota shrinks, for a tenant that keeps its queue running: what
        it has admitted above the new nominal counts as borrowed, so its lenders can reclaim it by preemption.
        (An offboarded tenant's queue going to 0 is the offboarding's own alert.)"""
        if self.kind != Change.CHANGED or self.stopped:
            return ()
        return tuple(q for q in self.quotas if q.reduced)


class PolicyField(StrEnum):
    BORROWING_LIMIT = "borrowingLimit"
    LENDING_LIMIT = "lendingLimit"
    RECLAIM = "reclaim"
    WITHIN_QUEUE = "withinQueue"
    BORROW_WITHIN_COHORT = "borrowWithinCohort"
    WEIGHT = "weight"
    ISOLATED = "isolated"


@dataclass(frozen=True)
class TierPolicyChange:
    """One field of a tier's queue policy (defaults included: a tier not listed has Kueue's defaults)."""

    tier: str
    field: PolicyField
    before: Any
    after: Any
    exposes: str = ""  # why the tier's (or its cohort's) workloads are now preempted more; "" = routine


@dataclass(frozen=True)
class CohortQuota:
    flavor: str
    resource: str
    before: int
    after: int


@dataclass(frozen=True)
class CohortChange:
    name: str
    kind: Change
    parent_before: str | None = None
    parent_after: str | None = None
    quotas: tuple[CohortQuota, ...] = ()
    weight_before: float | None = None
    weight_after: float | None = None


@dataclass(frozen=True)
class FlavorChange:
    """One (flavor, resource) of `gpupool plan`'s "Kueue quota by flavor" (queues.flavor_lines), before →
    after: the tenants' nominal quotas together, what they lend, and what borrowing tenants can take."""

    flavor: str
    resource: str
    capacity_before: int
    capacity_after: int
    nominal_before: int
    nominal_after: int
    lendable_before: int
    lendable_after: int
    borrowable_before: int
    borrowable_after: int


@dataclass
class QueueDiff:
    enabled_before: bool = False
    enabled_after: bool = False
    tenants: list[TenantQueueChange] = field(default_factory=list)
    tiers: list[TierPolicyChange] = field(default_factory=list)
    cohorts: list[CohortChange] = field(default_factory=list)
    flavors: list[FlavorChange] = field(default_factory=list)
    counts_after: tuple[int, int, int] = (0, 0, 0)  # HEAD: flavors, cohorts, ClusterQueues
    # HEAD: tenant -> resource -> the most it can take outside Kueue (gpupool.model.queues.ceilings)
    outside_after: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def turned_on(self) -> bool:
        return self.enabled_after and not self.enabled_before

    @property
    def turned_off(self) -> bool:
        return self.enabled_before and not self.enabled_after

    @property
    def empty(self) -> bool:
        return self.enabled_before == self.enabled_after and not (
            self.tenants or self.tiers or self.cohorts or self.flavors
        )

    @property
    def exposing(self) -> list[TierPolicyChange]:
        return [t for t in self.tiers if t.exposes]


# -- tiers: which policy edits expose workloads to more preemption ------------------------------------

# Stronger protection first-to-last: how far a tenant within its nominal quota takes lent quota back...
_RECLAIM = {"Never": 0, "LowerPriority": 1, "Any": 2}
# ...and how readily a workload preempts others (of its own queue; of the cohort while borrowing).
_WITHIN = {"Never": 0, "LowerPriority": 1, "LowerOrNewerEqualPriority": 2}
_BORROW = {"Never": 0, "LowerPriority": 1}


def _lends_more(before: Limit, after: Limit) -> bool:
    """Whether some resource's lendingLimit grows (None: no limit, all idle nominal quota is lent)."""

    def of(limit: Limit, r: str | None) -> float:
        v = QueuePolicy._limit(limit, r) if r is not None else (limit if isinstance(limit, int) else None)
        return float("inf") if v is None else v

    names = {k for lim in (before, after) if isinstance(lim, dict) for k in lim}
    probes: list[str | None] = sorted(names) + [None] if names else [None]
    # A mapping leaves the resources it does not list unlimited (the probe None stands for those).
    return any(of(after, r) > of(before, r) for r in probes)


def _policy_changes(tier: str, b: QueuePolicy, a: QueuePolicy) -> list[TierPolicyChange]:
    out = []

    def add(f: PolicyField, vb: Any, va: Any, exposes: str = "") -> None:
        if vb != va:
            out.append(TierPolicyChange(tier, f, vb, va, exposes))

    lending = ""
    if not a.isolated and _lends_more(b.lending_limit, a.lending_limit):
        lending = (
            "its tenants now lend more of their idle nominal quota: when they need it back, the borrowers must be "
            "preempted first, so their workloads wait for that"
            + (" (it lent nothing before: its guaranteed capacity was always free)" if b.lending_limit == 0 else "")
        )
    add(PolicyField.LENDING_LIMIT, b.lending_limit, a.lending_limit, lending)
    add(PolicyField.BORROWING_LIMIT, b.borrowing_limit, a.borrowing_limit)
    add(
        PolicyField.RECLAIM,
        b.reclaim,
        a.reclaim,
        "its tenants can no longer take all of their lent quota back by preemption (reclaimWithinCohort)"
        if _RECLAIM.get(a.reclaim, 0) < _RECLAIM.get(b.reclaim, 0)
        else "",
    )
    add(
        PolicyField.WITHIN_QUEUE,
        b.within_queue,
        a.within_queue,
        "a tenant's admitted workloads can now be preempted by more of its own (withinClusterQueue)"
        if _WITHIN.get(a.within_queue, 0) > _WITHIN.get(b.within_queue, 0)
        else "",
    )
    add(
        PolicyField.BORROW_WITHIN_COHORT,
        b.borrow_within_cohort,
        a.borrow_within_cohort,
        "its borrowing workloads may now preempt lower-priority workloads of other tenants in the cohort"
        if _BORROW.get(a.borrow_within_cohort, 0) > _BORROW.get(b.borrow_within_cohort, 0)
        else "",
    )
    add(PolicyField.WEIGHT, b.weight, a.weight)
    add(
        PolicyField.ISOLATED,
        b.isolated,
        a.isolated,
        "its tenants join the cohort and lend their idle nominal quota: when they need it back, the borrowers "
        "must be preempted first"
        if b.isolated and not a.isolated and a.lending_limit != 0
        else "",
    )
    return out


# -- tenants ------------------------------------------------------------------------------------------


def _entry(q: qm.TenantQueue, e: qm.Quota | None) -> tuple[int, int | None, int]:
    """(nominal, borrowing limit, lendable) as Kueue applies them: without a cohort, neither."""
    if e is None:
        return 0, 0, 0
    if q.cohort is None:
        return e.nominal, 0, 0
    return e.nominal, e.borrowing_limit, e.lendable


def _lines(b: qm.TenantQueue | None, a: qm.TenantQueue | None) -> tuple[QuotaLine, ...]:
    keys: list[tuple[str, str]] = []
    for q in (b, a):
        for e in q.quotas if q else ():
            if (e.flavor, e.resource) not in keys:
                keys.append((e.flavor, e.resource))
    out = []
    for flavor, r in keys:
        vb = _entry(b, b.quota(flavor, r)) if b else (0, 0, 0)
        va = _entry(a, a.quota(flavor, r)) if a else (0, 0, 0)
        if vb != va:
            out.append(QuotaLine(flavor, r, vb[0], va[0], vb[1], va[1], vb[2], va[2]))
    return tuple(out)


def _tenant_changes(
    qb: dict[str, qm.TenantQueue],
    qa: dict[str, qm.TenantQueue],
    adm_b: dict[str, dict[str, int]],
    adm_a: dict[str, dict[str, int]],
) -> list[TenantQueueChange]:
    out = []
    for name in sorted(set(qb) | set(qa)):
        b, a = qb.get(name), qa.get(name)
        if a is None:
            assert b is not None
            out.append(TenantQueueChange(name, Change.REMOVED, b.tier, b.cohort, None, _lines(b, None)))
            continue
        if b is None:
            out.append(TenantQueueChange(name, Change.ADDED, a.tier, None, a.cohort, _lines(None, a), a.stopped))
            continue
        lines = _lines(b, a)
        ab, aa = adm_b.get(name, {}), adm_a.get(name, {})
        admitted = tuple(
            Admitted(r, ab.get(r, 0), aa.get(r, 0)) for r in sorted(set(ab) | set(aa)) if ab.get(r, 0) != aa.get(r, 0)
        )
        if lines or b.cohort != a.cohort or admitted:
            out.append(TenantQueueChange(name, Change.CHANGED, a.tier, b.cohort, a.cohort, lines, a.stopped, admitted))
    return out


# -- cohorts ------------------------------------------------------------------------------------------


def _cohort_changes(qb: Queueing | None, qa: Queueing | None) -> list[CohortChange]:
    cb = {c.name: c for c in qb.all_cohorts()} if qb else {}
    ca = {c.name: c for c in qa.all_cohorts()} if qa else {}
    out = []
    for name in [*ca, *(n for n in cb if n not in ca)]:
        b, a = cb.get(name), ca.get(name)

        def quota(c) -> dict[tuple[str, str], int]:
            return {(p, r): n for p, rs in (c.quota.items() if c else ()) for r, n in rs.items()}

        qtb, qta = quota(b), quota(a)
        quotas = tuple(
            CohortQuota(p, r, qtb.get((p, r), 0), qta.get((p, r), 0))
            for p, r in sorted(set(qtb) | set(qta))
            if qtb.get((p, r), 0) != qta.get((p, r), 0)
        )
        if a is None:
            assert b is not None
            out.append(CohortChange(name, Change.REMOVED, b.parent, None, quotas, b.weight, None))
        elif b is None:
            out.append(CohortChange(name, Change.ADDED, None, a.parent, quotas, None, a.weight))
        elif b.parent != a.parent or quotas or b.weight != a.weight:
            out.append(CohortChange(name, Change.CHANGED, b.parent, a.parent, quotas, b.weight, a.weight))
    return out


def _flavor_changes(before: list[qm.FlavorLine], after: list[qm.FlavorLine]) -> list[FlavorChange]:
    b = {(x.flavor, x.resource): x for x in before}
    out = []
    for x in after:
        y = b.get((x.flavor, x.resource))
        if y is None:
            continue  # a new pool: its flavor is in the pools section and the tenants' rows
        values = (y.capacity, x.capacity, y.nominal, x.nominal, y.lendable, x.lendable, y.borrowable, x.borrowable)
        if values[0::2] != values[1::2]:
            out.append(FlavorChange(x.flavor, x.resource, *values))
    return out


# -- all of it ----------------------------------------------------------------------------------------


def compute(
    base: m.Spec | None,
    head: m.Spec | None,
    built_b: DesiredObjects | None = None,
    built_a: DesiredObjects | None = None,
) -> QueueDiff:
    """The queue changes; BUILT_B/BUILT_A are the sides' builds when the caller has them (their queue model
    is reused, not computed again)."""
    qb = base.queueing if base else None
    qa = head.queueing if head else None
    d = QueueDiff(qb is not None, qa is not None)
    if qb is None and qa is None:
        return d

    def model(spec: m.Spec | None, qs: Queueing | None, built: DesiredObjects | None):
        if spec is None or qs is None:
            return {}, {}
        if built is not None and built.queues is not None:
            return built.queues.queues, built.queues.admitted
        return qm.tenant_queues(spec, qs), qm.max_admitted(spec, qs)

    queues_b, adm_b = model(base, qb, built_b)
    queues_a, adm_a = model(head, qa, built_a)
    d.tenants = _tenant_changes(queues_b, queues_a, adm_b, adm_a)
    d.cohorts = _cohort_changes(qb, qa)
    if base and head and qb and qa:
        tiers_a = {t.name for t in head.tiers}
        for t in base.tiers:
            if t.name in tiers_a:
                d.tiers.extend(_policy_changes(t.name, qb.policy(t.name), qa.policy(t.name)))
    if base and head and qb and qa:
        d.flavors = _flavor_changes(qm.flavor_lines(base, qb), qm.flavor_lines(head, qa))
    if head and qa:
        d.counts_after = (len(head.pools), len(qa.all_cohorts()), len(queues_a))
        for c in qm.ceilings(head, qa):
            d.outside_after.setdefault(c.tenant, {})[c.resource] = c.outside_kueue
    return d
