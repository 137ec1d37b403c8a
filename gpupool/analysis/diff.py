"""What a change to a spec does, tenant first: pure computation from two models (no I/O, no printing).

`compute(base, head)` compares two validated specs (either may be None: a new stack, or a side that did not
validate) and returns a `SpecDiff`:
- tenants added, removed (with what happens to their namespace) and changed, with quota deltas;
- headroom per resource before and after (gpupool.analysis.plan);
- pools whose MIG layout changes, and the nodes MIG Manager will reconfigure (evicting their GPU workloads);
- device-plugin ConfigMap keys added, removed or changed (replicas before and after);
- the rendered Kubernetes objects (gpupool render) added, changed and removed, with a field-level summary;
- per pool, unified diffs of its MIG Manager and device-plugin config entries.

When a side is invalid, only what the valid parts of both sides support is compared (`reconcile`): an item
that one side could not read is taken from the other side on both, so it shows no change, and is listed
in `SpecDiff.unknown` instead (a tenant whose file failed to load is "unreadable", never "removed").
Formatting lives in gpupool.present.diff.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from gpupool.analysis import plan as planmod
from gpupool.analysis import queue_diff as qd
from gpupool.k8s import manifests, render, rollout
from gpupool.model import platform as m
from gpupool.model import sharding
from gpupool.model.owners import Subject, parse_owner

if TYPE_CHECKING:
    from gpupool.analysis.sides import Gaps, Side


# -- result types --------------------------------------------------------------------------------
# Kinds are StrEnums: they equal their JSON value ("added"), which json.dumps writes.


class Kind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


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


class UnknownCause(StrEnum):
    INVALID = "invalid"  # the item is there but failed validation
    FILE_UNREADABLE = "fileUnreadable"  # its tenant file could not be read
    MAYBE_UNREADABLE = "maybeUnreadable"  # absent, and the side has unreadable items it may be among
    NEW_INVALID = "newInvalid"  # only in HEAD, and invalid there
    GONE_INVALID = "goneInvalid"  # only in BASE, invalid there


class MigKind(StrEnum):
    CHANGED = "changed"  # the pool's layout changes
    ADDED = "added"  # a new MIG pool
    NODES_ADDED = "nodes-added"  # the layout is unchanged; nodes join the pool (or move from another one)


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


@dataclass(frozen=True)
class Headroom:
    resource: str
    capacity_before: int | None
    capacity_after: int | None
    granted_before: int | None
    granted_after: int | None
    headroom_before: int | None
    headroom_after: int | None
    allowed_before: int | None = None  # what the oversubscription policy allows in total (capacity × ratio)
    allowed_after: int | None = None
    retained_after: int = 0  # of granted_after: quotas of tenants removed without offboarding (still in force)

    @property
    def changed(self) -> bool:
        return (self.capacity_before, self.granted_before, self.headroom_before) != (
            self.capacity_after,
            self.granted_after,
            self.headroom_after,
        )


@dataclass(frozen=True)
class MigChange:
    pool: str
    kind: MigKind
    config_before: str | None
    config_after: str | None
    layout_before: str
    layout_after: str
    nodes: tuple[str, ...]  # named nodes MIG Manager reconfigures
    node_selector: dict[str, str]  # for selector pools: every node matching it
    node_count: int
    reboot: bool
    gpu_model: str = ""
    gpu_model_before: str = ""
    # (GPU indices, profile -> count per GPU) per MIG group; () when MIG is off. For the slice maps.
    groups_before: tuple[tuple[tuple[int, ...], tuple[tuple[str, int], ...]], ...] = ()
    groups_after: tuple[tuple[tuple[int, ...], tuple[tuple[str, int], ...]], ...] = ()
    # The rollout (gpupool.k8s.rollout): nodes already in a pool before roll in waves of `at_once`, each wave
    # after the previous one reported success; new nodes (in no pool before) are labelled at once, in no wave
    # (gpupool.k8s.mig_step still restarts and waits for a MIG Manager already running on one).
    waves: tuple[tuple[str, ...], ...] = ()
    new_nodes: tuple[str, ...] = ()
    at_once: int = 0
    cordon: bool = False
    node_timeout_seconds: int = 0
    drain_timeout_seconds: int = 0  # 0: the pool does not drain before the relabel
    tenants: tuple[str, ...] = ()  # tenants granted a resource this pool supplies (before or after): evicted
    tiers: tuple[str, ...] = ()  # their tiers

    @property
    def evicted_nodes(self) -> tuple[str, ...]:
        """Named nodes that had a MIG config before and get another one: their GPU workloads are evicted."""
        return tuple(n for n in self.nodes if n not in self.new_nodes)

    @property
    def evicts(self) -> bool:
        """Does MIG Manager evict anything? Not when every node it configures is new (no workloads yet)."""
        return bool(self.evicted_nodes) or (not self.nodes and self.kind != MigKind.NODES_ADDED)

    @property
    def worst_case_seconds(self) -> int:
        """Each wave waits at most the node timeout twice before the next starts: for its MIG Manager to restart
        with the new config (gpupool.k8s.rollout step 1b), then for its success; and the drain timeout between."""
        return len(self.waves) * (2 * self.node_timeout_seconds + self.drain_timeout_seconds)


@dataclass(frozen=True)
class PluginChange:
    key: str
    kind: Kind
    sharing_before: str | None
    sharing_after: str | None
    replicas_before: int | None
    replicas_after: int | None
    pools_before: tuple[str, ...]
    pools_after: tuple[str, ...]


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any


@dataclass(frozen=True)
class ObjectChange:
    file: str
    kind: Kind
    object_kind: str
    object_name: str  # namespace/name or name
    fields: tuple[FieldChange, ...] = ()
    retained: bool = False  # removed but retainOnDelete: stays in the cluster, unmanaged
    patch: bool = False
    # its name changes (an ownerRole change renames the RoleBinding), or a field the API server never updates
    # (Desired.replace_on_changes: a tier's PriorityClass value): deleted and created
    replaced: bool = False


@dataclass(frozen=True)
class ConfigDiff:
    """A unified diff of one pool's entry in the MIG Manager or device-plugin ConfigMap."""

    pool: str
    config: str  # "mig" (MIG Manager, mig-parted) | "device-plugin"
    name_before: str | None  # the entry's key in its ConfigMap
    name_after: str | None
    unified: str  # difflib.unified_diff text


@dataclass(frozen=True)
class StackMove:
    """A tenant in both specs that another Pulumi stack holds in HEAD (sharding.tenantShards changed)."""

    tenant: str
    before: str  # the stack role: "platform" or "tenants-<k>"
    after: str


@dataclass(frozen=True)
class PoolChange:
    """A node pool added or removed, or nodes joining or leaving one (named nodes, or a selector's count)."""

    pool: str
    kind: Kind
    nodes_added: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    count_before: int = 0
    count_after: int = 0
    gpu_model: str = ""


class Risk(StrEnum):
    """What makes an applicable change more than routine: each is an alert, counted, and puts ⚠ on the verdict."""

    NAMESPACE_DELETED = "namespaceDeleted"  # an offboarded tenant removed: its namespace and all in it go
    DELETION_PROTECTION_LOST = "deletionProtectionLost"  # offboarding: the next removal deletes the namespace
    NAMESPACE_UNMANAGED = "namespaceUnmanaged"  # removed without offboarding: retained, no longer managed
    ACCESS_CHANGED = "accessChanged"  # owners or ownerRole of an existing tenant
    FOREIGN_SERVICE_ACCOUNT = "foreignServiceAccount"  # an owner is a ServiceAccount of another namespace
    EVICTION = "eviction"  # MIG Manager evicts GPU workloads
    REBOOT = "reboot"  # ... and reboots the nodes
    STACK_MOVE = "stackMove"  # tenants move between Pulumi stacks (two-pass run)
    NODES_REMOVED = "nodesRemoved"  # nodes leave the platform (their GPUs no longer count)
    QUEUEING_ON = "queueingOn"  # Kueue queueing turned on: every tenant's Jobs must go through Kueue
    QUEUEING_OFF = "queueingOff"  # turned off: the queues go, ResourceQuotas shrink back to the grants
    NOMINAL_REDUCED = "nominalReduced"  # a tenant's guaranteed Kueue quota shrinks on some flavor
    PREEMPTION_EXPOSED = "preemptionExposed"  # a tier's queue policy lets its (or others') workloads be preempted more
    TIER_RAISED = "tierRaised"  # a tenant moves to a tier of higher priority: it can preempt more workloads
    MAX_PER_POD_LIFTED = "maxPerPodLifted"  # a tenant's per-pod GPU maximum rises or goes


@dataclass(frozen=True)
class Alert:
    risk: Risk
    names: tuple[str, ...]  # tenants, nodes or pools it concerns
    count: int  # how many (nodes of a selector pool count without a name)


@dataclass(frozen=True)
class Unknown:
    """An item one side could not read: compared as the other side has it, so it shows no change."""

    section: str  # "tenant" | "tier" | "pool" | "oversubscription" | "queueing"
    name: str
    side: str  # "BASE" | "HEAD"
    reason: str
    cause: UnknownCause = UnknownCause.INVALID

    @property
    def unreadable(self) -> bool:
        return self.cause in (UnknownCause.FILE_UNREADABLE, UnknownCause.MAYBE_UNREADABLE)


@dataclass
class SpecDiff:
    tenants: list[TenantChange] = field(default_factory=list)
    headroom: list[Headroom] = field(default_factory=list)
    mig: list[MigChange] = field(default_factory=list)
    plugin: list[PluginChange] = field(default_factory=list)
    pool_plugin_keys: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # pool, key before/after
    objects: list[ObjectChange] = field(default_factory=list)
    configs: list[ConfigDiff] = field(default_factory=list)
    unknown: list[Unknown] = field(default_factory=list)
    stack_moves: list[StackMove] = field(default_factory=list)
    tenant_shards: tuple[int, int] = (0, 0)  # sharding.tenantShards before, after (0 = not sharded)
    pools: list[PoolChange] = field(default_factory=list)
    queues: qd.QueueDiff = field(default_factory=qd.QueueDiff)  # Kueue (only with `queueing:` on a side)
    comparable: bool = True  # False: a side that exists has no model at all; nothing was compared
    head_ok: bool = True  # every resource has non-negative headroom in HEAD

    def summary(self) -> dict[str, int]:
        """The counts of the terraform-style summary line."""
        offboarding = [t for t in self.tenants if t.kind == Kind.CHANGED and t.offboarding]
        return {
            "tenantsOnboarded": sum(t.kind == Kind.ADDED for t in self.tenants),
            "tenantsChanged": sum(t.kind == Kind.CHANGED for t in self.tenants) - len(offboarding),
            "tenantsOffboarded": len(offboarding),
            "tenantsRemoved": sum(t.kind == Kind.REMOVED for t in self.tenants),
            "tenantsUnknown": sum(u.section == "tenant" for u in self.unknown),
            "tenantsMovingStack": len(self.stack_moves),
            "objectsToAdd": sum(o.kind == Kind.ADDED for o in self.objects),
            "objectsToChange": sum(o.kind == Kind.CHANGED for o in self.objects),
            "objectsToDelete": sum(o.kind == Kind.REMOVED and not o.retained for o in self.objects),
            "objectsToRetain": sum(o.kind == Kind.REMOVED and o.retained for o in self.objects),
            "poolsRelaidOut": len(self.evicting),
            "poolsNotCompared": sum(u.section == "pool" for u in self.unknown),
            "nodesJoining": sum(len(p.nodes_added) + max(0, p.count_after - p.count_before) for p in self.pools),
            "nodesLeaving": sum(len(p.nodes_removed) + max(0, p.count_before - p.count_after) for p in self.pools),
            "headroomChanges": sum(h.changed for h in self.headroom),
            "negativeHeadroom": sum(h.headroom_after is not None and h.headroom_after < 0 for h in self.headroom),
            "queuesAdded": sum(q.kind == qd.Change.ADDED for q in self.queues.tenants),
            "queuesChanged": sum(q.kind == qd.Change.CHANGED for q in self.queues.tenants),
            "queuesRemoved": sum(q.kind == qd.Change.REMOVED for q in self.queues.tenants),
            "queuePolicyChanges": len(self.queues.tiers) + len(self.queues.cohorts),
        }

    @property
    def evicting(self) -> list[MigChange]:
        """The MIG changes that evict GPU workloads (re-layouts of nodes that had one)."""
        return [c for c in self.mig if c.evicts]

    def alerts(self) -> list[Alert]:
        """Everything a reviewer must see without expanding anything, by risk, in this order."""
        t = self.tenants
        found = [
            (
                Risk.NAMESPACE_DELETED,
                [x.name for x in t if x.kind == Kind.REMOVED and x.namespace == Namespace.DELETED],
            ),
            (Risk.DELETION_PROTECTION_LOST, [x.name for x in t if x.offboarding]),
            (Risk.NAMESPACE_UNMANAGED, [x.name for x in self.retained_namespaces]),
            (Risk.ACCESS_CHANGED, [x.name for x in t if x.kind == Kind.CHANGED and x.access_changed]),
            (
                Risk.FOREIGN_SERVICE_ACCOUNT,
                [x.name for x in t if x.kind != Kind.REMOVED and x.foreign_service_accounts],
            ),
            (Risk.EVICTION, [n for c in self.evicting for n in (c.evicted_nodes or (f"pool {c.pool}",))]),
            (Risk.REBOOT, [c.pool for c in self.evicting if c.reboot]),
            (Risk.STACK_MOVE, [mv.tenant for mv in self.stack_moves]),
            (Risk.NODES_REMOVED, [n for p in self.pools for n in p.nodes_removed]),
            (Risk.QUEUEING_ON, [q.tenant for q in self.queues.tenants] if self.queues.turned_on else []),
            (Risk.QUEUEING_OFF, [q.tenant for q in self.queues.tenants] if self.queues.turned_off else []),
            (Risk.NOMINAL_REDUCED, [q.tenant for q in self.queues.tenants if q.reduced]),
            (Risk.PREEMPTION_EXPOSED, list(dict.fromkeys(t.tier for t in self.queues.exposing))),
            (Risk.TIER_RAISED, [x.name for x in t if x.kind == Kind.CHANGED and x.tier_raise]),
            (Risk.MAX_PER_POD_LIFTED, [x.name for x in t if x.kind == Kind.CHANGED and x.max_per_pod_lifts]),
        ]
        out = [Alert(risk, tuple(names), len(names)) for risk, names in found if names]
        unnamed = sum(c.node_count for c in self.evicting if not c.nodes)
        if unnamed:  # selector pools: the nodes are not named, their expected count is known
            out = [
                Alert(a.risk, a.names, len(a.names) - sum(1 for c in self.evicting if not c.nodes) + unnamed)
                if a.risk == Risk.EVICTION
                else a
                for a in out
            ]
        return out

    @property
    def retained_namespaces(self) -> list[TenantChange]:
        return [t for t in self.tenants if t.kind == Kind.REMOVED and t.namespace == Namespace.RETAINED]

    @property
    def empty(self) -> bool:
        return not (
            self.tenants
            or self.mig
            or self.plugin
            or self.objects
            or self.pool_plugin_keys
            or self.configs
            or self.stack_moves
            or self.pools
            or not self.queues.empty
            or self.tenant_shards[0] != self.tenant_shards[1]
            or any(h.changed for h in self.headroom)
        )


# -- tenants -------------------------------------------------------------------------------------


def _effective(t: m.Tenant) -> dict[str, int]:
    """What the quota enforces: an offboarded tenant's quota is 0 everywhere."""
    return {} if t.offboarded else dict(t.gpus)


def _foreign_service_accounts(t: m.Tenant) -> tuple[str, ...]:
    subjects = (parse_owner(o) for o in t.owners)
    return tuple(
        f"{x.namespace}/{x.name}"
        for x in subjects
        if isinstance(x, Subject) and x.kind == "ServiceAccount" and x.namespace != t.namespace
    )


def _access(t: m.Tenant) -> dict:
    return {
        "owners": tuple(t.owners),
        "owner_role": t.owner_role,
        "foreign_service_accounts": _foreign_service_accounts(t),
    }


def _pairs(before: Mapping, after: Mapping) -> str:
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


def tenant_changes(base: m.Spec | None, head: m.Spec | None) -> list[TenantChange]:
    before = {t.name: t for t in (base.tenants if base else ())}
    after = {t.name: t for t in (head.tenants if head else ())}
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if b is None:
            assert a is not None  # every name comes from one side or the other
            quotas = tuple(QuotaDelta(r, 0, n) for r, n in sorted(_effective(a).items()))
            out.append(
                TenantChange(
                    name,
                    Kind.ADDED,
                    quotas,
                    tier=a.tier,
                    cost_center=a.cost_center,
                    offboarded=a.offboarded,
                    **_access(a),
                )
            )
        elif a is None:
            quotas = tuple(QuotaDelta(r, n, 0) for r, n in sorted(_effective(b).items()) if n)
            out.append(
                TenantChange(
                    name,
                    Kind.REMOVED,
                    quotas,
                    namespace=Namespace.DELETED if b.offboarded else Namespace.RETAINED,
                    tier=b.tier,
                    cost_center=b.cost_center,
                    offboarded=b.offboarded,
                    **_access(b),
                )
            )
        else:
            eb, ea = _effective(b), _effective(a)
            quotas = tuple(
                QuotaDelta(r, eb.get(r, 0), ea.get(r, 0))
                for r in sorted(set(eb) | set(ea))
                if eb.get(r, 0) != ea.get(r, 0)
            )
            assert base is not None and head is not None  # b and a are tenants of these
            details = _details(base, head, b, a)
            if quotas or details:
                out.append(
                    TenantChange(
                        name,
                        Kind.CHANGED,
                        quotas,
                        tuple(details),
                        tier=a.tier,
                        cost_center=a.cost_center,
                        offboarded=a.offboarded,
                        owners_before=tuple(b.owners),
                        owner_role_before=b.owner_role,
                        **_access(a),
                        tier_raise=tier_raise(base, head, b, a),
                        max_per_pod_lifts=max_per_pod_lifts(base, head, b, a),
                    )
                )
    return out


# -- headroom ------------------------------------------------------------------------------------


def headroom_changes(base_plan: planmod.CapacityPlan | None, head_plan: planmod.CapacityPlan | None) -> list[Headroom]:
    b = {r.resource: r for r in (base_plan.resources if base_plan else ())}
    a = {r.resource: r for r in (head_plan.resources if head_plan else ())}
    out = []
    for name in sorted(set(b) | set(a)):
        rb, ra = b.get(name), a.get(name)
        out.append(
            Headroom(
                name,
                rb.capacity if rb else None,
                ra.capacity if ra else None,
                rb.granted if rb else None,
                ra.granted if ra else None,
                rb.headroom if rb else None,
                ra.headroom if ra else None,
                rb.allowed if rb else None,
                ra.allowed if ra else None,
            )
        )
    return out


# -- MIG -----------------------------------------------------------------------------------------


def layout_text(pool: m.NodePool | None) -> str:
    if pool is None or not pool.sharing.mig:
        return "MIG disabled"
    parts = []
    for g in pool.sharing.mig:
        body = g.preset or " + ".join(f"{p}×{n}" for p, n in sorted(g.layout.items()))
        if len(g.gpus) == pool.gpus_per_node:
            parts.append(body)
        else:
            word = "GPU" if len(g.gpus) == 1 else "GPUs"
            parts.append(f"{word} {manifests.gpu_ranges(g.gpus).replace('+', ',')}: {body}")
    return "; ".join(parts)


def _groups(pool: m.NodePool | None) -> tuple:
    if pool is None:
        return ()
    return tuple((tuple(g.gpus), tuple(sorted(g.layout.items()))) for g in pool.sharing.mig)


def _mig_by_pool(built: manifests.Plan | None) -> dict[str, str]:
    """pool -> mig-parted config name (MIG-capable pools only), as manifests.build derived it."""
    if built is None:
        return {}
    return {pool: c["migConfig"] for pool, c in built.pool_configs.items() if c["migConfig"]}


def _plugin_by_pool(built: manifests.Plan | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(device-plugin config per ConfigMap key, as data; pool -> key), as manifests.build derived them."""
    if built is None:
        return {}, {}
    return built.plugin_configs, {pool: c["devicePluginConfig"] for pool, c in built.pool_configs.items()}


def mig_changes(
    base: m.Spec | None, head: m.Spec | None, built_b: manifests.Plan | None, built_a: manifests.Plan | None
) -> list[MigChange]:
    if head is None:
        return []
    cfg_a = _mig_by_pool(built_a)
    cfg_b = _mig_by_pool(built_b)
    pools_b = {p.name: p for p in (base.pools if base else ())}
    # What each named node was configured as before, whichever pool it was in.
    node_cfg_b: dict[str, str | None] = {}
    for p in base.pools if base else ():
        for n in p.nodes:
            node_cfg_b[n] = cfg_b.get(p.name)
    reboot = head.cluster.operator.mig_reboot
    out = []
    for pool in head.pools:
        after = cfg_a.get(pool.name)
        if after is None:
            continue  # not MIG-capable: MIG Manager does not touch it
        old = pools_b.get(pool.name)
        before = cfg_b.get(pool.name) if old else None
        if pool.nodes:
            nodes = tuple(n for n in pool.nodes if node_cfg_b.get(n, "<new>") != after)
            if not nodes:
                continue
            if old is not None and before == after:
                kind = MigKind.NODES_ADDED
            else:
                kind = MigKind.ADDED if old is None else MigKind.CHANGED
            if kind == MigKind.ADDED and after == manifests.MIG_DISABLED and all(n not in node_cfg_b for n in nodes):
                continue  # a new non-MIG pool of new nodes: MIG stays off, nothing to reconfigure
            new_nodes = tuple(n for n in nodes if n not in node_cfg_b)
            # The program chains every node in waves; a node whose config is unchanged passes at once, so what
            # really waits is each wave's changed nodes, in order.
            rolled = tuple(
                w
                for w in (tuple(n for n in wave if n in nodes and n not in new_nodes) for wave in rollout.waves(pool))
                if w
            )
            out.append(
                MigChange(
                    pool.name,
                    kind,
                    before,
                    after,
                    layout_text(old),
                    layout_text(pool),
                    nodes,
                    {},
                    len(nodes),
                    reboot,
                    pool.gpu_model,
                    old.gpu_model if old else "",
                    _groups(old),
                    _groups(pool),
                    rolled,
                    new_nodes,
                    max((len(w) for w in rolled), default=0),
                    pool.rollout.cordon,
                    pool.rollout.node_timeout_seconds,
                    pool.rollout.drain_timeout_seconds if pool.rollout.drains else 0,
                )
            )
        else:
            if old is not None and before == after:
                continue
            if old is None and after == manifests.MIG_DISABLED:
                continue
            out.append(
                MigChange(
                    pool.name,
                    MigKind.ADDED if old is None else MigKind.CHANGED,
                    before,
                    after,
                    layout_text(old),
                    layout_text(pool),
                    (),
                    dict(pool.node_selector),
                    pool.node_count,
                    reboot,
                    pool.gpu_model,
                    old.gpu_model if old else "",
                    _groups(old),
                    _groups(pool),
                )
            )
    return out


# -- device plugin -------------------------------------------------------------------------------


def _plugin_summary(doc: Mapping[str, Any] | None) -> tuple[str | None, int | None]:
    """(sharing, replicas) of one device-plugin config (manifests._plugin_config builds it)."""
    if doc is None:
        return None, None
    sharing = doc.get("sharing") or {}
    for kind, label in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        if kind in sharing:
            res = sharing[kind].get("resources") or []
            return label, (res[0].get("replicas") if res else None)
    return "exclusive", 1


def plugin_changes(
    built_b: manifests.Plan | None, built_a: manifests.Plan | None
) -> tuple[list[PluginChange], list[tuple]]:
    data_b, by_pool_b = _plugin_by_pool(built_b)
    data_a, by_pool_a = _plugin_by_pool(built_a)
    out = []
    for key in sorted(set(data_b) | set(data_a)):
        tb, ta = data_b.get(key), data_a.get(key)
        if tb == ta:
            continue
        kind = Kind.ADDED if tb is None else Kind.REMOVED if ta is None else Kind.CHANGED
        sb, rb = _plugin_summary(tb)
        sa, ra = _plugin_summary(ta)
        out.append(
            PluginChange(
                key,
                kind,
                sb,
                sa,
                rb,
                ra,
                tuple(sorted(p for p, k in by_pool_b.items() if k == key)),
                tuple(sorted(p for p, k in by_pool_a.items() if k == key)),
            )
        )
    moved = [
        (p, by_pool_b.get(p), by_pool_a.get(p))
        for p in sorted(set(by_pool_b) & set(by_pool_a))
        if by_pool_b.get(p) != by_pool_a.get(p)
    ]
    return out, moved


# -- config entries, as unified diffs -----------------------------------------------------------


def _mig_entries_text(built: manifests.Plan | None) -> dict[str, str]:
    """mig-parted config name -> that entry as YAML, dumped from the entries the MIG Manager ConfigMap's
    config.yaml is dumped from (the build holds them as data)."""
    if built is None:
        return {}
    return {name: manifests.dump_yaml({name: entries}) for name, entries in built.mig_configs.items()}


def _plugin_entries_text(built: manifests.Plan | None) -> dict[str, str]:
    """device-plugin ConfigMap key -> its config as the ConfigMap holds it (the same dump of the same data)."""
    if built is None:
        return {}
    return {key: manifests.dump_yaml(doc) for key, doc in built.plugin_configs.items()}


def _unified(before: str | None, after: str | None, label_b: str, label_a: str) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        label_b if before is not None else "/dev/null",
        label_a if after is not None else "/dev/null",
        n=3,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def config_diffs(built_b: manifests.Plan | None, built_a: manifests.Plan | None) -> list[ConfigDiff]:
    """Per pool present on both sides or new, the MIG Manager and device-plugin entries it uses that change."""
    if built_a is None:
        return []
    mig_b, mig_a = _mig_entries_text(built_b), _mig_entries_text(built_a)
    cfg_b, cfg_a = _mig_by_pool(built_b), _mig_by_pool(built_a)
    data_b, data_a = _plugin_entries_text(built_b), _plugin_entries_text(built_a)
    key_b, key_a = _plugin_by_pool(built_b)[1], _plugin_by_pool(built_a)[1]
    out = []
    for pool in sorted(built_a.pool_configs):
        nb, na = cfg_b.get(pool), cfg_a.get(pool)
        tb, ta = mig_b.get(nb) if nb else None, mig_a.get(na) if na else None
        if (tb or ta) and tb != ta:
            out.append(
                ConfigDiff(
                    pool,
                    "mig",
                    nb,
                    na,
                    _unified(tb, ta, f"BASE {manifests.MIG_CONFIGMAP}: {nb}", f"HEAD {manifests.MIG_CONFIGMAP}: {na}"),
                )
            )
        kb, ka = key_b.get(pool), key_a.get(pool)
        tb, ta = data_b.get(kb) if kb else None, data_a.get(ka) if ka else None
        if tb != ta:
            out.append(
                ConfigDiff(
                    pool,
                    "device-plugin",
                    kb,
                    ka,
                    _unified(
                        tb, ta, f"BASE {manifests.PLUGIN_CONFIGMAP}: {kb}", f"HEAD {manifests.PLUGIN_CONFIGMAP}: {ka}"
                    ),
                )
            )
    return out


# -- rendered objects ----------------------------------------------------------------------------


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            plain = key.replace("-", "").replace("_", "").isalnum()
            out.update(_flatten(v, f"{prefix}.{key}" if plain and prefix else key if plain else f'{prefix}["{key}"]'))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def field_changes(before: dict, after: dict) -> tuple[FieldChange, ...]:
    fb, fa = _flatten(before), _flatten(after)
    return tuple(FieldChange(p, fb.get(p), fa.get(p)) for p in sorted(set(fb) | set(fa)) if fb.get(p) != fa.get(p))


def _header_changes(ob: manifests.Desired, oa: manifests.Desired) -> tuple[FieldChange, ...]:
    """What changes in how gpupool manages the object, not in the object: offboarding turns retainOnDelete
    off (the namespace loses its deletion protection)."""
    out = []
    if ob.retain_on_delete != oa.retain_on_delete:
        out.append(FieldChange("(gpupool) retainOnDelete", ob.retain_on_delete, oa.retain_on_delete))
    if ob.component != oa.component:
        out.append(FieldChange("(gpupool) component", ob.component, oa.component))
    if ob.patch != oa.patch:
        out.append(FieldChange("(gpupool) patch", ob.patch, oa.patch))
    return tuple(out)


def _object_name(manifest: dict) -> str:
    meta = manifest.get("metadata", {})
    return f"{meta['namespace']}/{meta.get('name', '')}" if meta.get("namespace") else meta.get("name", "")


def object_changes(base_objects: list[manifests.Desired], head_objects: list[manifests.Desired]) -> list[ObjectChange]:
    objs_b = {render.file_name(o): o for o in base_objects}
    objs_a = {render.file_name(o): o for o in head_objects}

    # A rendered file is its header (component, patch, retain flags) plus the dumped manifest, and the dump is
    # deterministic: comparing those inputs says whether the file changes, without dumping 10,000s of YAML docs.
    def same(x, y) -> bool:
        return (x.component, x.patch, x.retain_on_delete, x.manifest) == (
            y.component,
            y.patch,
            y.retain_on_delete,
            y.manifest,
        )

    out = []
    for name in sorted(set(objs_b) | set(objs_a)):
        ob, oa = objs_b.get(name), objs_a.get(name)
        if oa is None:
            assert ob is not None  # every name comes from one side or the other
            out.append(
                ObjectChange(
                    name, Kind.REMOVED, ob.kind, _object_name(ob.manifest), retained=ob.retain_on_delete, patch=ob.patch
                )
            )
        elif ob is None:
            out.append(ObjectChange(name, Kind.ADDED, oa.kind, _object_name(oa.manifest), patch=oa.patch))
        elif not same(ob, oa):
            fields = _header_changes(ob, oa) + field_changes(ob.manifest, oa.manifest)
            out.append(
                ObjectChange(
                    name,
                    Kind.CHANGED,
                    oa.kind,
                    _object_name(oa.manifest),
                    fields,
                    patch=oa.patch,
                    replaced=_object_name(ob.manifest) != _object_name(oa.manifest)
                    or any(f.path in oa.replace_on_changes for f in fields),
                )
            )
    return out


# -- invalid sides: compare only what both sides support -----------------------------------------


def _missing_reason(
    section: str, name: str, item, spec: m.Spec, gaps: Gaps, side: str
) -> tuple[UnknownCause, str] | None:
    """Why an item of the other side may be hidden in this side's gaps (None: it is really absent)."""
    from gpupool.analysis.sides import spec_relative

    if name in gaps.named(section):
        return UnknownCause.INVALID, f"invalid in {side}"
    if section == "tenants" and item.source_file and item.source_file != spec.source_path and gaps.tenant_files:
        if spec_relative(spec.source_path, item.source_file) in gaps.tenant_files:
            return UnknownCause.FILE_UNREADABLE, f"its tenant file could not be read in {side}"
    if section in gaps.unnamed or (section == "tenants" and gaps.tenant_files):
        what = {"tenants": "tenant files or entries", "tiers": "tiers", "pools": "node pools"}[section]
        return (
            UnknownCause.MAYBE_UNREADABLE,
            f"not found among {side}'s readable items, and {side} has unreadable {what}",
        )
    return None


def _insert(own: tuple, added: list, other: tuple) -> tuple:
    """own plus items taken from other, each placed after the item that precedes it in other (order
    matters: configs are rendered in spec order, and a reordering must not show up as a change)."""
    out = list(own)
    for item in added:
        i = [x.name for x in other].index(item.name)
        before = {x.name for x in other[:i]}
        at = max((k + 1 for k, x in enumerate(out) if x.name in before), default=0)
        out.insert(at, item)
    return tuple(out)


def reconcile(
    base: m.Spec | None, head: m.Spec | None, base_gaps: Gaps | None, head_gaps: Gaps | None
) -> tuple[m.Spec | None, m.Spec | None, list[Unknown]]:
    """(base', head', unknown): an item one side could not read takes the other side's value on both sides."""
    if (
        base is None
        or head is None
        or ((base_gaps is None or base_gaps.empty) and (head_gaps is None or head_gaps.empty))
    ):
        return base, head, []
    from gpupool.analysis.sides import Gaps

    gb, ga = base_gaps or Gaps(), head_gaps or Gaps()
    unknown: list[Unknown] = []
    fields = {}
    for section, label in (("tenants", "tenant"), ("tiers", "tier"), ("pools", "pool")):
        items_b = {x.name: x for x in getattr(base, section)}
        items_a = {x.name: x for x in getattr(head, section)}
        add_b, add_a = [], []
        for name, item in items_b.items():
            if name not in items_a:
                why = _missing_reason(section, name, item, base, ga, "HEAD")
                if why:
                    add_a.append(item)
                    unknown.append(Unknown(label, name, "HEAD", why[1], why[0]))
        for name, item in items_a.items():
            if name not in items_b:
                why = _missing_reason(section, name, item, head, gb, "BASE")
                if why:
                    add_b.append(item)
                    unknown.append(Unknown(label, name, "BASE", why[1], why[0]))
        for name in sorted(ga.named(section) - set(items_b) - set(items_a)):
            unknown.append(
                Unknown(label, name, "HEAD", "new in HEAD and invalid there: not counted", UnknownCause.NEW_INVALID)
            )
        for name in sorted(gb.named(section) - set(items_b) - set(items_a)):
            unknown.append(
                Unknown(
                    label, name, "BASE", "invalid in BASE and absent from HEAD: not counted", UnknownCause.GONE_INVALID
                )
            )
        fields[section] = (
            _insert(getattr(base, section), add_b, getattr(head, section)),
            _insert(getattr(head, section), add_a, getattr(base, section)),
        )

    def same_where_invalid(block: str, invalid_head: bool, invalid_base: bool) -> tuple[Any, Any]:
        """BASE's and HEAD's BLOCK, the valid side's on both when one side's did not validate (an invalid
        `queueing:` block is absent from the model: not "queueing turned off")."""
        b, a = getattr(base, block), getattr(head, block)
        if invalid_head:
            unknown.append(Unknown(block, block, "HEAD", "invalid in HEAD"))
            return b, b
        if invalid_base:
            unknown.append(Unknown(block, block, "BASE", "invalid in BASE"))
            return a, a
        return b, a

    over_b, over_a = same_where_invalid("oversubscription", ga.oversubscription, gb.oversubscription)
    queue_b, queue_a = same_where_invalid("queueing", ga.queueing, gb.queueing)
    base2 = replace(
        base,
        tenants=fields["tenants"][0],
        tiers=fields["tiers"][0],
        pools=fields["pools"][0],
        oversubscription=over_b,
        queueing=queue_b,
    )
    head2 = replace(
        head,
        tenants=fields["tenants"][1],
        tiers=fields["tiers"][1],
        pools=fields["pools"][1],
        oversubscription=over_a,
        queueing=queue_a,
    )
    return base2, head2, unknown


# -- stacks --------------------------------------------------------------------------------------


def holder(spec: m.Spec, tenant: str) -> str:
    """The role name of the Pulumi stack that holds TENANT under SPEC's sharding."""
    return sharding.holder(tenant, spec.tenant_shards).name


def stack_moves(base: m.Spec | None, head: m.Spec | None) -> list[StackMove]:
    if base is None or head is None:
        return []
    in_base = {t.name for t in base.tenants}
    moves = [StackMove(t.name, holder(base, t.name), holder(head, t.name)) for t in head.tenants if t.name in in_base]
    return sorted((mv for mv in moves if mv.before != mv.after), key=lambda mv: mv.tenant)


# -- all of it -----------------------------------------------------------------------------------


def compare(base: Side, head: Side) -> SpecDiff:
    """The diff of two sides, valid or not: nothing is compared when a side that exists has no model."""
    if not base.comparable or not head.comparable or head.spec is None:
        return SpecDiff(comparable=False, head_ok=False)
    b, a, unknown = reconcile(base.spec, head.spec, base.gaps if base.exists else None, head.gaps)
    d = compute(b, a)
    d.unknown = unknown
    return d


def _retained(base: m.Spec | None, head: m.Spec | None) -> tuple[m.Tenant, ...]:
    """BASE tenants HEAD drops without offboarding: their quotas stay in the cluster (retainOnDelete)."""
    if base is None or head is None:
        return ()
    kept = {t.name for t in head.tenants}
    return tuple(t for t in base.tenants if t.name not in kept and not t.offboarded)


def _with_retained(headroom: list[Headroom], retained: tuple[m.Tenant, ...]) -> list[Headroom]:
    return [
        replace(h, retained_after=sum(t.gpus.get(h.resource, 0) for t in retained)) if retained else h for h in headroom
    ]


def _evicted_tenants(base: m.Spec | None, head: m.Spec, change: MigChange) -> MigChange:
    """The tenants (and their tiers) granted a resource the re-laid-out pool supplies, before or after."""
    pools = [p for s in (base, head) if s for p in s.pools if p.name == change.pool]
    resources = {r for p in pools for r in p.resources_per_node()}
    tenants = [t for s in (base, head) if s for t in s.tenants if set(_effective(t)) & resources]
    names = tuple(sorted({t.name for t in tenants}))
    return replace(change, tenants=names, tiers=tuple(sorted({t.tier for t in tenants})))


def pool_changes(base: m.Spec | None, head: m.Spec | None) -> list[PoolChange]:
    if head is None:
        return []
    before = {p.name: p for p in (base.pools if base else ())}
    after = {p.name: p for p in head.pools}
    nodes_a = {n for p in after.values() for n in p.nodes}
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if a is None:
            assert b is not None
            gone = tuple(n for n in b.nodes if n not in nodes_a)
            out.append(PoolChange(name, Kind.REMOVED, (), gone, b.node_count, 0, b.gpu_model))
            continue
        added = tuple(n for n in a.nodes if n not in (b.nodes if b else ()))
        removed = tuple(n for n in (b.nodes if b else ()) if n not in a.nodes and n not in nodes_a)
        count_b = b.node_count if b and not b.nodes else 0
        count_a = a.node_count if not a.nodes else 0
        if b is None:
            out.append(PoolChange(name, Kind.ADDED, added, (), 0, count_a, a.gpu_model))
        elif added or removed or count_b != count_a:
            out.append(PoolChange(name, Kind.CHANGED, added, removed, count_b, count_a, a.gpu_model))
    return out


def compute(base: m.Spec | None, head: m.Spec | None) -> SpecDiff:
    base_plan = planmod.compute(base) if base else None
    # Tenants dropped without offboarding keep their quota in the cluster: HEAD's headroom counts it.
    retained = _retained(base, head)
    head_plan = planmod.compute(replace(head, tenants=head.tenants + retained)) if head else None
    # Built once per side: configs, pool labels and objects all come from the same build.
    built_b = manifests.build(base) if base else None
    built_a = manifests.build(head) if head else None
    plugin, moved = plugin_changes(built_b, built_a)
    # The operator chart is compared like the objects (its values are what the operator receives).
    base_objects = built_b.objects + [built_b.chart.record()] if built_b else []
    head_objects = built_a.objects + [built_a.chart.record()] if built_a else []
    tenants = []
    for t in tenant_changes(base, head):
        if t.kind == Kind.REMOVED:
            mine = [o for o in base_objects if o.component == f"tenant:{t.name}"]
            t = replace(
                t,
                retained_objects=tuple(render.file_name(o) for o in mine if o.retain_on_delete),
                deleted_objects=tuple(render.file_name(o) for o in mine if not o.retain_on_delete),
            )
        elif t.kind == Kind.ADDED and head is not None and head.tenant_shards:
            t = replace(t, stack=holder(head, t.name))
        tenants.append(t)
    mig = [_evicted_tenants(base, head, c) for c in mig_changes(base, head, built_b, built_a)] if head else []
    return SpecDiff(
        tenants=tenants,
        headroom=_with_retained(headroom_changes(base_plan, head_plan), retained),
        mig=mig,
        plugin=plugin,
        pool_plugin_keys=moved,
        objects=object_changes(base_objects, head_objects),
        configs=config_diffs(built_b, built_a),
        stack_moves=stack_moves(base, head),
        tenant_shards=(base.tenant_shards if base else 0, head.tenant_shards if head else 0),
        pools=pool_changes(base, head),
        queues=qd.compute(base, head, built_b, built_a),
        head_ok=head_plan.ok if head_plan else False,
    )
