"""GP70x: per-pod GPU maximums (tenant and tier `maxPerPod`), checked before any policy reaches a cluster."""

from __future__ import annotations

from collections.abc import Iterator

from gpupool.model import platform as m
from gpupool.rules.registry import Context, rule


def _tenant_paths(ctx: Context) -> dict[str, tuple]:
    raw = ctx.data.get("tenants") if isinstance(ctx.data, dict) else None
    out: dict[str, tuple] = {}
    for i, t in enumerate(raw if isinstance(raw, list) else ()):
        if isinstance(t, dict) and isinstance(t.get("name"), str):
            out.setdefault(t["name"], ("tenants", i))
    return out


def _tier_paths(ctx: Context) -> dict[str, tuple]:
    raw = ctx.data.get("tiers") if isinstance(ctx.data, dict) else None
    out: dict[str, tuple] = {}
    for i, t in enumerate(raw if isinstance(raw, list) else ()):
        if isinstance(t, dict) and isinstance(t.get("name"), str):
            out.setdefault(t["name"], ("tiers", i))
    return out


def declared_max_per_pod(ctx: Context) -> Iterator[tuple[tuple, str, int]]:
    """(path of the maxPerPod entry, resource, maximum) for every tier and tenant that declares one."""
    spec = ctx.spec
    if spec is None:  # callers return early without a model; this keeps the type checker informed
        return
    tiers, tenants = _tier_paths(ctx), _tenant_paths(ctx)
    for tier in spec.tiers:
        for resource, limit in tier.max_per_pod.items():
            yield tiers[tier.name] + ("maxPerPod", resource), resource, limit
    for tenant in spec.tenants:
        for resource, limit in tenant.max_per_pod.items():
            yield tenants[tenant.name] + ("maxPerPod", resource), resource, limit


def largest_node_supply(spec: m.Spec, resource: str) -> tuple[int, str | None]:
    """The most of `resource` one node of any pool advertises, and that pool (0, None: no pool advertises it)."""
    best, where = 0, None
    for pool in spec.pools:
        n = pool.resources_per_node().get(resource, 0)
        if n > best:
            best, where = n, pool.name
    return best, where


@rule("GP701", "a per-pod maximum must be schedulable on one node")
def max_per_pod_fits_a_node(ctx: Context) -> None:
    """A pod runs on one node, so a per-pod maximum above what the largest node of any pool advertises
    promises pods that can never be scheduled, and a maximum for a resource no pool advertises is a typo.

    Passes:

        nodePools: [{name: h100, gpu: H100-80GB, gpusPerNode: 8, nodes: [n1, n2]}]
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 16}, maxPerPod: {nvidia.com/gpu: 8}}

    Fails:

        nodePools: [{name: h100, gpu: H100-80GB, gpusPerNode: 8, nodes: [n1, n2]}]
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 16}, maxPerPod: {nvidia.com/gpu: 16}}
    """
    if ctx.spec is None:
        return
    for path, resource, limit in declared_max_per_pod(ctx):
        if not ctx.usable(path):
            continue
        supply, pool = largest_node_supply(ctx.spec, resource)
        if pool is None:
            names = ", ".join(ctx.spec.advertised_resources()) or "none"
            ctx.error(
                path,
                f"no node pool advertises {resource}, so this maximum limits nothing; the pools advertise: {names}",
                key=True,
            )
        elif limit > supply:
            ctx.error(
                path,
                f'{limit} {resource} per pod, but the largest node (pool "{pool}") advertises '
                f"{supply}: such a pod could never be scheduled; lower it to at most {supply}",
                key=True,
            )


@rule("GP702", "a tenant's per-pod maximum must not exceed its quota")
def max_per_pod_within_quota(ctx: Context) -> None:
    """The namespace quota already stops a pod that asks for more than the tenant's whole grant, so a
    tenant's own maximum above its quota says something the cluster will never do. A tier default above a
    tenant's quota is only a warning (the tier speaks for many tenants; the quota then limits first).

    Passes:

        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}, maxPerPod: {nvidia.com/gpu: 2}}

    Fails:

        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 1}, maxPerPod: {nvidia.com/gpu: 2}}
    """
    if ctx.spec is None:
        return
    paths = _tenant_paths(ctx)
    for tenant in ctx.spec.active_tenants:
        path = paths[tenant.name]
        tier = ctx.spec.tier(tenant.tier)
        for resource, limit in ctx.spec.max_per_pod(tenant).items():
            quota = tenant.gpus.get(resource, 0)
            if limit <= quota:
                continue
            if resource in tenant.max_per_pod:
                entry = path + ("maxPerPod", resource)
                if ctx.usable(entry):
                    ctx.error(
                        entry,
                        f"{limit} {resource} per pod is above the tenant's quota of {quota}; the "
                        f"quota refuses such a pod first: lower maxPerPod to at most {quota}"
                        + (" or remove it" if quota == 0 else ""),
                        key=True,
                    )
            elif quota > 0 and tier is not None:
                ctx.warn(
                    path,
                    f'inherits maxPerPod {limit} {resource} from tier "{tier.name}", above its quota '
                    f"of {quota}; the quota limits first (set the tenant's own maxPerPod to say so)",
                )
