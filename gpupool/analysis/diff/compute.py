"""All of the diff: both sides built once, every aspect compared, and the result put together."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpupool.analysis import plan as planmod
from gpupool.analysis.diff import queues as qd
from gpupool.analysis.diff.configs import config_diffs, plugin_changes
from gpupool.analysis.diff.headroom import headroom_changes, retained_tenants, with_retained
from gpupool.analysis.diff.kind import Kind
from gpupool.analysis.diff.mig import mig_changes, with_evicted_tenants
from gpupool.analysis.diff.objects import object_changes
from gpupool.analysis.diff.pools import allocation_cutovers, pool_changes
from gpupool.analysis.diff.reconcile import reconcile
from gpupool.analysis.diff.result import SpecDiff
from gpupool.analysis.diff.stacks import holder, stack_moves
from gpupool.analysis.diff.tenants import TenantChange, tenant_changes
from gpupool.k8s import manifests, render
from gpupool.k8s.desired import tenant_component
from gpupool.model import platform as m

if TYPE_CHECKING:
    from gpupool.analysis.sides import Side


def compare(base: Side, head: Side) -> SpecDiff:
    """The diff of two sides, valid or not: nothing is compared when a side that exists has no model."""
    if not base.comparable or not head.comparable or head.spec is None:
        return SpecDiff(comparable=False, head_ok=False)
    b, a, unknown = reconcile(base.spec, head.spec, base.gaps if base.exists else None, head.gaps)
    d = compute(b, a)
    d.unknown = unknown
    return d


def _tenants(base: m.Spec | None, head: m.Spec | None, base_objects: list[manifests.Desired]) -> list[TenantChange]:
    """The tenant changes, with what a removal leaves or deletes and which stack creates a new tenant."""
    tenants = []
    for t in tenant_changes(base, head):
        if t.kind == Kind.REMOVED:
            mine = [o for o in base_objects if o.component == tenant_component(t.name)]
            t = replace(
                t,
                retained_objects=tuple(render.file_name(o) for o in mine if o.retain_on_delete),
                deleted_objects=tuple(render.file_name(o) for o in mine if not o.retain_on_delete),
            )
        elif t.kind == Kind.ADDED and head is not None and head.tenant_shards:
            t = replace(t, stack=holder(head, t.name))
        tenants.append(t)
    return tenants


def compute(base: m.Spec | None, head: m.Spec | None) -> SpecDiff:
    base_plan = planmod.compute(base) if base else None
    # Tenants dropped without offboarding keep their quota in the cluster: HEAD's headroom counts it.
    retained = retained_tenants(base, head)
    head_plan = planmod.compute(replace(head, tenants=head.tenants + retained)) if head else None
    # Built once per side: configs, pool labels and objects all come from the same build.
    built_b = manifests.build(base) if base else None
    built_a = manifests.build(head) if head else None
    plugin, moved = plugin_changes(built_b, built_a)
    # The operator chart is compared like the objects (its values are what the operator receives).
    base_objects = built_b.objects + [c.record() for c in built_b.charts()] if built_b else []
    head_objects = built_a.objects + [c.record() for c in built_a.charts()] if built_a else []
    mig = [with_evicted_tenants(base, head, c) for c in mig_changes(base, head, built_b, built_a)] if head else []
    return SpecDiff(
        tenants=_tenants(base, head, base_objects),
        headroom=with_retained(headroom_changes(base_plan, head_plan), retained),
        mig=mig,
        plugin=plugin,
        pool_plugin_keys=moved,
        objects=object_changes(base_objects, head_objects),
        configs=config_diffs(built_b, built_a),
        stack_moves=stack_moves(base, head),
        tenant_shards=(base.tenant_shards if base else 0, head.tenant_shards if head else 0),
        pools=pool_changes(base, head),
        cutovers=allocation_cutovers(base, head),
        queues=qd.compute(base, head, built_b, built_a),
        head_ok=head_plan.ok if head_plan else False,
    )
