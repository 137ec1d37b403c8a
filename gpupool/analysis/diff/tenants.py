"""Tenants added, removed (with what happens to their namespace) and changed: quota deltas, access, tier
raises and per-pod maximums lifted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from gpupool.analysis.diff.kind import Kind
from gpupool.model import platform as m
from gpupool.model.owners import Subject, parse_owner


class Namespace(StrEnum):
    """What happens to a removed tenant's namespace."""

    DELETED = "deleted"  # it was offboarded: Pulumi deletes the namespace and everything in it
    RETAINED = "retained"  # retainOnDelete: it stays in the cluster, unmanaged


class Aspect(StrEnum):
    """What about a tenant in both specs changed (one per detail line)."""

    OFFBOARDED = "offboarded"  # turned true: quota 0, the namespace loses its deletion protection
    RESTORED = "restored"  # offboarded turned false
    TIER = "tier"
    COST_CENTER = "costCenter"
    OWNERS = "owners"
    OWNER_ROLE = "ownerRole"
    COMPUTE = "compute"
    CONTAINER_DEFAULTS = "containerDefaults"
    LABELS = "labels"
    MAX_PER_POD = "maxPerPod"


# Aspects that change who may do what in the namespace, or whether it survives: shown first, never grouped.
ACCESS_ASPECTS = frozenset({Aspect.OWNERS, Aspect.OWNER_ROLE})
# Aspects that change nothing a workload or a person can do (billing, bookkeeping): grouped by aspect.
METADATA_ASPECTS = frozenset({Aspect.COST_CENTER, Aspect.LABELS})
ROLE_RANK = {"view": 0, "edit": 1, "admin": 2}  # Kubernetes' aggregated roles, each a superset of the last


@dataclass(frozen=True)
class QuotaDelta:
    resource: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True)
class Detail:
    aspect: Aspect
    text: str  # "tier standard → production", as every format shows it


@dataclass(frozen=True)
class TierRaise:
    """A tenant moved to a tier of higher priority: what its workloads gain."""

    tier_before: str
    tier_after: str
    priority_before: int
    priority_after: int
    # HEAD's tiers whose workloads its pods can now preempt (priority below its own, and not below it before)
    preempts: tuple[str, ...]
    preemption_policy: str  # the new tier's PriorityClass preemptionPolicy ("Never": it queues ahead, no eviction)
    queueing: bool = False  # HEAD has a `queueing:` block: Kueue admits and preempts by the same priority
    cohort_before: str | None = None  # its ClusterQueue's cohort (None: no queueing, or an isolated tier)
    cohort_after: str | None = None


@dataclass(frozen=True)
class LimitLift:
    """A per-pod GPU maximum that rises or goes (after None: no limit)."""

    resource: str
    before: int
    after: int | None


@dataclass(frozen=True)
class TenantChange:
    name: str
    kind: Kind
    quotas: tuple[QuotaDelta, ...] = ()
    details: tuple[Detail, ...] = ()  # changed tenants: what changed besides the quotas
    namespace: Namespace | None = None  # removed tenants: what happens to the namespace
    tier: str = ""
    cost_center: str | None = None
    offboarded: bool = False
    retained_objects: tuple[str, ...] = ()  # removed tenants: rendered files left in the cluster, unmanaged
    deleted_objects: tuple[str, ...] = ()  # removed tenants: rendered files Pulumi deletes
    stack: str = ""  # added tenants of a sharded HEAD: the role of the stack that creates it ("tenants-<k>")
    # Who is bound to the namespace's role (HEAD's, or BASE's for a removed tenant) and, when it changes, before.
    owners: tuple[str, ...] = ()
    owner_role: str = ""
    owners_before: tuple[str, ...] = ()
    owner_role_before: str = ""
    # Owners that are ServiceAccounts of another namespace (NAMESPACE/NAME): a workload elsewhere gets the role.
    foreign_service_accounts: tuple[str, ...] = ()
    tier_raise: TierRaise | None = None  # changed tenants: a tier of higher priority
    max_per_pod_lifts: tuple[LimitLift, ...] = ()  # changed tenants: per-pod maximums raised or removed

    @property
    def aspects(self) -> frozenset[Aspect]:
        return frozenset(x.aspect for x in self.details)

    @property
    def offboarding(self) -> bool:
        return Aspect.OFFBOARDED in self.aspects

    @property
    def access_changed(self) -> bool:
        return bool(self.aspects & ACCESS_ASPECTS)

    @property
    def escalates(self) -> bool:
        """More people or a stronger role in a namespace that already exists."""
        if self.kind != Kind.CHANGED or not self.access_changed:
            return False
        new = set(self.owners) - set(self.owners_before)
        return bool(new) or ROLE_RANK.get(self.owner_role, 0) > ROLE_RANK.get(self.owner_role_before, 0)

    @property
    def metadata_only(self) -> bool:
        """Only billing or bookkeeping changes: no quota, access, tier or lifecycle change."""
        return self.kind == Kind.CHANGED and not self.quotas and bool(self.details) and self.aspects <= METADATA_ASPECTS


def effective(t: m.Tenant) -> dict[str, int]:
    """What the quota enforces: an offboarded tenant's quota is 0 everywhere."""
    return {} if t.offboarded else dict(t.gpus)


def _foreign_service_accounts(t: m.Tenant) -> tuple[str, ...]:
    subjects = (parse_owner(o) for o in t.owners)
    return tuple(
        f"{x.namespace}/{x.name}"
        for x in subjects
        if isinstance(x, Subject) and x.kind == "ServiceAccount" and x.namespace != t.namespace
    )


def _pairs(before: Mapping[str, object], after: Mapping[str, object]) -> str:
    return ", ".join(
        f"{k} {before.get(k, '-')} → {after.get(k, '-')}"
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    )


def _details(base: m.Spec, head: m.Spec, b: m.Tenant, a: m.Tenant) -> list[Detail]:
    out = []
    if b.offboarded != a.offboarded:
        out.append(
            Detail(
                Aspect.OFFBOARDED,
                "offboarded: quota set to 0, and the namespace loses its deletion protection (removing the tenant "
                "from the spec then DELETES namespace and everything in it)",
            )
            if a.offboarded
            else Detail(Aspect.RESTORED, "no longer offboarded: quota restored, namespace protected again")
        )
    if b.tier != a.tier:
        raised = tier_raise(base, head, b, a)
        out.append(Detail(Aspect.TIER, f"tier {b.tier} → {a.tier}" + (f" ({raise_text(raised)})" if raised else "")))
    if b.owner_role != a.owner_role:
        out.append(
            Detail(
                Aspect.OWNER_ROLE,
                f"ownerRole {b.owner_role} → {a.owner_role} (the owners' RoleBinding is replaced: "
                f"tenant-owners-{b.owner_role} → tenant-owners-{a.owner_role})",
            )
        )
    if tuple(b.owners) != tuple(a.owners):
        added = [o for o in a.owners if o not in b.owners]
        removed = [o for o in b.owners if o not in a.owners]
        out.append(Detail(Aspect.OWNERS, "owners " + ", ".join([f"+{o}" for o in added] + [f"-{o}" for o in removed])))
    if b.cost_center != a.cost_center:
        out.append(Detail(Aspect.COST_CENTER, f"cost centre {b.cost_center or '-'} → {a.cost_center or '-'}"))
    if dict(b.compute) != dict(a.compute):
        out.append(Detail(Aspect.COMPUTE, "compute quota " + _pairs(b.compute, a.compute)))
    if b.container_defaults != a.container_defaults:
        out.append(Detail(Aspect.CONTAINER_DEFAULTS, "container defaults changed"))
    if dict(b.labels) != dict(a.labels):
        out.append(Detail(Aspect.LABELS, "namespace labels changed"))
    mb, ma = base.max_per_pod(b), head.max_per_pod(a)
    if mb != ma:
        out.append(
            Detail(
                Aspect.MAX_PER_POD,
                "max per pod "
                + ", ".join(
                    f"{r} {_limit(mb.get(r))} → {_limit(ma.get(r))}"
                    for r in sorted(set(mb) | set(ma))
                    if mb.get(r) != ma.get(r)
                ),
            )
        )
    return out


def _limit(n: int | None) -> str:
    return "no limit" if n is None else f"{n:,}"


def tier_raise(base: m.Spec, head: m.Spec, b: m.Tenant, a: m.Tenant) -> TierRaise | None:
    """What a tenant gains by its tier change, if it is a raise: a higher priority, or workloads of more tiers
    it can preempt (pods preempt pods of strictly lower priority unless their PriorityClass says Never)."""
    tb, ta = base.tier(b.tier), head.tier(a.tier)
    if tb is None or ta is None or b.tier == a.tier:
        return None

    def preemptible(spec: m.Spec, tier: m.Tier) -> set[str]:
        if tier.preemption_policy == "Never":
            return set()
        return {t.name for t in spec.tiers if t.priority < tier.priority}

    gained = preemptible(head, ta) - preemptible(base, tb)
    if ta.priority <= tb.priority and not gained:
        return None
    order = {t.name: -t.priority for t in head.tiers}
    cohort_b = base.queueing.cohort_of(b.name, b.tier) if base.queueing else None
    cohort_a = head.queueing.cohort_of(a.name, a.tier) if head.queueing else None
    return TierRaise(
        tb.name,
        ta.name,
        tb.priority,
        ta.priority,
        tuple(sorted(gained, key=lambda n: (order.get(n, 0), n))),
        ta.preemption_policy,
        head.queueing is not None,
        cohort_b,
        cohort_a,
    )


def raise_text(r: TierRaise) -> str:
    """What the tenant gains, in words every format shows."""
    parts = [f"priority {r.priority_before:,} → {r.priority_after:,}"]
    if r.preempts:
        which = "tier" if len(r.preempts) == 1 else "tiers"
        parts.append(f"its pods can now preempt the workloads of {which} {', '.join(r.preempts)}")
    elif r.preemption_policy == "Never":
        parts.append("its pods are scheduled ahead of lower tiers' (preemptionPolicy Never: they evict nothing)")
    parts.append(f"it may use PriorityClass {r.tier_after}")
    if r.queueing:
        parts.append(
            f"Kueue: its Jobs may use WorkloadPriorityClass {r.tier_after}, its ClusterQueue takes tier "
            f"{r.tier_after}'s queue policy, and its nominal quota is placed before lower tiers' (theirs can shrink)"
        )
        if r.cohort_before != r.cohort_after:
            parts.append(f"its ClusterQueue moves from {_cohort(r.cohort_before)} to {_cohort(r.cohort_after)}")
    return "; ".join(parts)


def _cohort(name: str | None) -> str:
    return "no cohort (isolated)" if name is None else f"cohort {name}"


def max_per_pod_lifts(base: m.Spec, head: m.Spec, b: m.Tenant, a: m.Tenant) -> tuple[LimitLift, ...]:
    """Per-pod maximums that rise or go: the tenant's own, its tier's default (a tier changed, or its tier's
    maxPerPod changed), or its own removed so that a higher tier default or none applies. An offboarded
    tenant has no maximum but no quota either: not a lift."""
    if a.offboarded:
        return ()
    mb, ma = base.max_per_pod(b), head.max_per_pod(a)
    return tuple(LimitLift(r, n, ma.get(r)) for r, n in sorted(mb.items()) if ma.get(r) is None or ma[r] > n)


def _change(t: m.Tenant, kind: Kind, quotas: tuple[QuotaDelta, ...]) -> TenantChange:
    """A change as TENANT reads on one side (HEAD's, BASE's for a removed tenant): who may act in its namespace."""
    return TenantChange(
        name=t.name,
        kind=kind,
        quotas=quotas,
        tier=t.tier,
        cost_center=t.cost_center,
        offboarded=t.offboarded,
        owners=tuple(t.owners),
        owner_role=t.owner_role,
        foreign_service_accounts=_foreign_service_accounts(t),
    )


def _changed(base: m.Spec, head: m.Spec, b: m.Tenant, a: m.Tenant) -> TenantChange | None:
    eb, ea = effective(b), effective(a)
    quotas = tuple(
        QuotaDelta(r, eb.get(r, 0), ea.get(r, 0)) for r in sorted(set(eb) | set(ea)) if eb.get(r, 0) != ea.get(r, 0)
    )
    details = _details(base, head, b, a)
    if not quotas and not details:
        return None
    return replace(
        _change(a, Kind.CHANGED, quotas),
        details=tuple(details),
        owners_before=tuple(b.owners),
        owner_role_before=b.owner_role,
        tier_raise=tier_raise(base, head, b, a),
        max_per_pod_lifts=max_per_pod_lifts(base, head, b, a),
    )


def tenant_changes(base: m.Spec | None, head: m.Spec | None) -> list[TenantChange]:
    before = {t.name: t for t in (base.tenants if base else ())}
    after = {t.name: t for t in (head.tenants if head else ())}
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if b is None:
            assert a is not None  # every name comes from one side or the other
            out.append(_change(a, Kind.ADDED, tuple(QuotaDelta(r, 0, n) for r, n in sorted(effective(a).items()))))
        elif a is None:
            quotas = tuple(QuotaDelta(r, n, 0) for r, n in sorted(effective(b).items()) if n)
            namespace = Namespace.DELETED if b.offboarded else Namespace.RETAINED
            out.append(replace(_change(b, Kind.REMOVED, quotas), namespace=namespace))
        else:
            assert base is not None and head is not None  # b and a are tenants of these
            changed = _changed(base, head, b, a)
            if changed is not None:
                out.append(changed)
    return out
