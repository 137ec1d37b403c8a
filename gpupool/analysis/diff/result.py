"""The diff of two specs as one result: every aspect's changes, the summary counts and the alerts."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gpupool.analysis.diff import queues as qd
from gpupool.analysis.diff.configs import ConfigDiff, PluginChange
from gpupool.analysis.diff.headroom import Headroom
from gpupool.analysis.diff.kind import Kind
from gpupool.analysis.diff.mig import MigChange
from gpupool.analysis.diff.objects import ObjectChange
from gpupool.analysis.diff.pools import AllocationCutover, PoolChange
from gpupool.analysis.diff.reconcile import Unknown
from gpupool.analysis.diff.stacks import StackMove
from gpupool.analysis.diff.tenants import Namespace, TenantChange


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
    ALLOCATION_CUTOVER = "allocationCutover"  # a pool's devices move between the device plugin and DRA


@dataclass(frozen=True)
class Alert:
    risk: Risk
    names: tuple[str, ...]  # tenants, nodes or pools it concerns
    count: int  # how many (nodes of a selector pool count without a name)


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
    cutovers: list[AllocationCutover] = field(default_factory=list)  # pools switching `allocation`
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
            "poolsCuttingOver": len(self.cutovers),
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
            (Risk.ALLOCATION_CUTOVER, [c.pool for c in self.cutovers]),
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
            or self.cutovers
            or not self.queues.empty
            or self.tenant_shards[0] != self.tenant_shards[1]
            or any(h.changed for h in self.headroom)
        )
