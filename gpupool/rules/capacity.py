"""GP6xx: capacity: what tenants are granted against what the pools supply.

Capacity is judged whenever every pool is known, even with errors elsewhere, so one run reports all it
can; tenants that failed their own checks are left out (that can only hide an overrun, never invent one).
"""

from __future__ import annotations

from gpupool.rules.registry import Context, rule


def _judgeable(ctx: Context) -> bool:
    return ctx.built is not None and ctx.built.pools_complete and ctx.usable(("oversubscription",))


@rule("GP601", "tenants are granted more than the pools supply")
def over_capacity(ctx: Context) -> None:
    """Per advertised resource, the quotas of active tenants may add up to the capacity times the
    oversubscription ratio (`oversubscription.perResource`, else `maxRatio`, default 1), rounded down and
    computed exactly (10 x 0.7 allows 7). The error sits on the biggest holder's quota (the biggest among the
    tenants the change adds or edits, when `tenant new` says which) and names the pools.

    Passes:
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}}
    Fails:
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}}
          - {name: team-b, tier: standard, owners: [b], gpus: {nvidia.com/gpu: 1}}
    """
    if not _judgeable(ctx):
        return
    assert ctx.built is not None
    spec = ctx.built.model
    capacity = spec.capacity()
    for resource, granted in spec.granted().items():
        supply = capacity.get(resource, 0)
        ratio = spec.oversubscription.ratio_for(resource)
        allowed = spec.oversubscription.allowed(resource, supply)
        if granted <= allowed:
            continue
        holders = sorted(
            ((t.gpus[resource], t.name) for t in spec.active_tenants if t.gpus.get(resource)), reverse=True
        )
        mine = [h for h in holders if h[1] in ctx.changed]
        biggest = (mine or holders)[0][1]
        shown = ", ".join(f"{n} {c}" for c, n in holders[:5]) + (", ..." if len(holders) > 5 else "")
        sources = ", ".join(
            f"{p.name} {p.node_count}x{p.resources_per_node()[resource]}"
            for p in spec.pools
            if resource in p.resources_per_node()
        )
        policy = f"oversubscription allows {ratio:g}x" if ratio != 1 else "no oversubscription is allowed"
        ctx.error(
            ctx.built.tenant_paths[biggest] + ("gpus", resource),
            f"tenants are granted {granted} {resource} in total ({shown}) but the pools supply {supply} "
            f"({sources}) and {policy}: {granted - allowed} too many; lower quotas, add nodes, or raise "
            f'oversubscription.perResource["{resource}"]',
            key=True,
        )


@rule("GP602", "an oversubscription ratio names a resource no pool advertises")
def ratio_without_resource(ctx: Context) -> None:
    """A `perResource` ratio for a resource nobody advertises has no effect, usually a typo (a warning).

    Passes:
        oversubscription:
          perResource: {nvidia.com/gpu: 1.5}
    Fails:
        oversubscription:
          perResource: {nvidia.com/tpu: 1.5}
    """
    if not _judgeable(ctx):
        return
    assert ctx.built is not None
    capacity = ctx.built.model.capacity()
    for resource in ctx.built.model.oversubscription.per_resource:
        if resource not in capacity:
            ctx.warn(
                ("oversubscription", "perResource", resource),
                f"no pool advertises {resource}; this policy has no effect",
                key=True,
            )


@rule("GP603", "no tenant is granted what a pool supplies")
def idle_pool(ctx: Context) -> None:
    """A pool none of whose resources any tenant is granted would sit idle (a warning; judged only when the
    spec has no error so far, since a broken quota would make every pool look idle).

    Passes:
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}}
    Fails:
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 0}}
    """
    if ctx.built is None or ctx.report.errors:
        return
    granted = ctx.built.model.granted()
    for pool in ctx.built.model.pools:
        if not any(granted.get(r) for r in pool.resources_per_node()):
            ctx.warn(
                ctx.built.pool_paths[pool.name],
                "no tenant is granted any resource this pool supplies; its GPUs would sit idle",
            )
