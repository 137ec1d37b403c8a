"""GP52x queue configuration and GP62x quotas against what the pools can place (the opt-in `queueing:` block).

The GP52x rules mirror what Kueue's CRD schema (CEL) and webhook would refuse when the objects are applied
(kubernetes-sigs/kueue v0.19.2: apis/kueue/v1beta2/clusterqueue_types.go, pkg/webhooks/
clusterqueue_webhook.go), so the error comes at plan time with FILE:LINE:COL instead of from `pulumi up`.
The GP62x rules check what Kueue does not: that nominal quotas fit what the pools place (kueue#2665).
Every figure comes from gpupool.model.queues, the functions the Kueue objects are made from.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpupool.model import queues as q
from gpupool.model.queueing import Queueing, QueuePolicy
from gpupool.rules.registry import Context, rule
from gpupool.spec.diagnostics import did_you_mean, one_of

MAX_GROUPS = 16  # ClusterQueueSpec.ResourceGroups MaxItems (clusterqueue_types.go:74)
MAX_PER_GROUP = 64  # coveredResources and flavors MaxItems (clusterqueue_types.go:262, :279)
# Totals Kueue's ClusterQueue webhook enforces on top (pkg/webhooks/clusterqueue_webhook.go:187-229).
MAX_FLAVORS_TOTAL = 256  # flavors across all resource groups
MAX_RESOURCES_TOTAL = 256  # covered resources across all resource groups
MAX_COMBINATIONS = 512  # flavor-resource combinations in one resource group


def _queueing(ctx: Context) -> Queueing | None:
    if ctx.built is None or not ctx.usable(("queueing",)):
        return None
    return ctx.built.model.queueing


def _judgeable(ctx: Context) -> Queueing | None:
    """The block, when the pools and tenants it is judged against are all known."""
    qs = _queueing(ctx)
    if qs is None or ctx.built is None or not ctx.built.pools_complete or not ctx.usable(("oversubscription",)):
        return None
    return qs


def _policies(ctx: Context, qs: Queueing) -> Iterator[tuple[tuple, str, QueuePolicy]]:
    for name, policy in qs.tiers.items():
        yield ("queueing", "tiers", name), name, policy


def _cohorts(ctx: Context) -> Iterator[tuple[tuple, dict]]:
    raw = ctx.data.get("queueing", {}).get("cohorts", []) if isinstance(ctx.data, dict) else []
    for i, c in enumerate(raw):
        path = ("queueing", "cohorts", i)
        if isinstance(c, dict) and ctx.usable(path):
            yield path, c


@rule("GP520", "a queue policy names a tier that is not defined")
def unknown_tier(ctx: Context) -> None:
    """`queueing.tiers` sets the queue policy of tiers by name; a name that is not a tier is a typo whose
    policy silently applies to nobody.

    Passes:
        queueing:
          tiers:
            standard: {reclaim: Any}
    Fails:
        queueing:
          tiers:
            standrad: {reclaim: Any}
    """
    qs = _queueing(ctx)
    if qs is None or ctx.built is None:
        return
    tiers = [t.name for t in ctx.built.model.tiers]
    for path, name, _ in _policies(ctx, qs):
        if name not in tiers:
            ctx.error(path, f"not a tier{did_you_mean(name, tiers)}; defined tiers: {one_of(tiers)}", key=True)


@rule("GP521", "a cohort lists a tenant that does not exist, or one another cohort lists")
def cohort_tenants(ctx: Context) -> None:
    """A tenant's ClusterQueue joins exactly one cohort; a tenant listed twice, or a name that is no
    tenant, would leave the hierarchy different from what the spec reads as.

    Passes:
        queueing:
          cohorts:
            - {name: research, tenants: [team-a]}
    Fails:
        queueing:
          cohorts:
            - {name: research, tenants: [team-a]}
            - {name: ads, tenants: [team-a]}
    """
    qs = _queueing(ctx)
    if qs is None or ctx.built is None:
        return
    tenants = [t.name for t in ctx.built.model.tenants]
    first: dict[str, str] = {}
    for path, c in _cohorts(ctx):
        for j, name in enumerate(c.get("tenants", [])):
            where = path + ("tenants", j)
            if name not in tenants:
                if ctx.built.complete:
                    ctx.error(where, f"not a tenant{did_you_mean(name, tenants)}")
            elif name in first:
                ctx.error(where, f'already in cohort "{first[name]}"; a tenant joins one cohort')
            else:
                first[name] = c["name"]


@rule("GP522", "a cohort name is used twice, or is the root cohort's")
def cohort_names(ctx: Context) -> None:
    """Cohorts are cluster-scoped Kueue objects named as written; two with one name would be one object.

    Passes:
        queueing:
          cohort: platform
          cohorts:
            - {name: research}
    Fails:
        queueing:
          cohort: platform
          cohorts:
            - {name: platform}
    """
    qs = _queueing(ctx)
    if qs is None:
        return
    seen = {qs.root}
    for path, c in _cohorts(ctx):
        if c["name"] in seen:
            what = "the root cohort's name" if c["name"] == qs.root else "used by another cohort"
            ctx.error(path + ("name",), f"{what}; cohort names must be unique")
        seen.add(c["name"])


@rule("GP523", "cohort parents form a cycle or name no cohort")
def cohort_cycles(ctx: Context) -> None:
    """Kueue disables every ClusterQueue of a cohort tree with a cycle until it is removed, and treats an
    unknown parent as an empty cohort with no limits (apis/kueue/v1beta2/cohort_types.go:25-34): both
    are mistakes here, where every cohort is declared in one place.

    Passes:
        queueing:
          cohorts:
            - {name: org}
            - {name: research, parent: org}
    Fails:
        queueing:
          cohorts:
            - {name: org, parent: research}
            - {name: research, parent: org}
    """
    qs = _queueing(ctx)
    if qs is None:
        return
    parents = {c.name: c.parent for c in qs.all_cohorts()}
    for path, c in _cohorts(ctx):
        parent = c.get("parent")
        if parent is None:
            continue
        if parent not in parents:
            ctx.error(path + ("parent",), f"not a cohort{did_you_mean(parent, parents)}; cohorts: {one_of(parents)}")
            continue
        node: str | None = c["name"]
        seen: set[str] = set()
        while node is not None and node not in seen:
            seen.add(node)
            node = parents.get(node)
        if node == c["name"]:
            ctx.error(path + ("parent",), "cohort parents form a cycle; Kueue would stop admitting in the whole tree")


@rule("GP524", "a lending limit is above a tenant's nominal quota")
def lending_above_nominal(ctx: Context) -> None:
    """Kueue's webhook refuses a lendingLimit above the nominalQuota of the same flavor and resource
    ("must be less than or equal to the nominalQuota", pkg/webhooks/clusterqueue_webhook.go:382-388). A
    tier's lendingLimit applies to each of its tenants, per pool, so it must fit the smallest of their
    nominal quotas.

    Passes:
        queueing:
          tiers:
            standard: {lendingLimit: 2}
    Fails:
        queueing:
          tiers:
            standard: {lendingLimit: 5}
    """
    qs = _judgeable(ctx)
    if qs is None or ctx.built is None:
        return
    queues = q.tenant_queues(ctx.built.model, qs)
    for path, tier, policy in _policies(ctx, qs):
        if policy.isolated or policy.lending_limit is None:
            continue
        for queue in queues.values():
            if queue.tier != tier:
                continue
            bad = next((x for x in queue.quotas if x.lending_limit is not None and x.lending_limit > x.nominal), None)
            if bad is None:
                continue
            where = path + ("lendingLimit",) + (() if isinstance(policy.lending_limit, int) else (bad.resource,))
            ctx.error(
                where,
                f"lendingLimit {bad.lending_limit} is above tenant {queue.tenant}'s nominal quota of {bad.nominal} "
                f"{bad.resource} on pool {bad.flavor}; Kueue refuses it: lend at most the nominal quota, or give "
                "the limit per resource",
            )
            break


@rule("GP525", "an isolated tier sets a borrowing or lending limit")
def limits_without_cohort(ctx: Context) -> None:
    """An isolated tier's ClusterQueues have no cohort, and Kueue refuses borrowingLimit (CRD CEL
    "borrowingLimit must be nil when cohort is empty", apis/kueue/v1beta2/clusterqueue_types.go:66) and
    lendingLimit (webhook "must be nil when cohort is empty", pkg/webhooks/clusterqueue_webhook.go:367-380)
    without one.

    Passes:
        queueing:
          tiers:
            standard: {isolated: true}
    Fails:
        queueing:
          tiers:
            standard: {isolated: true, borrowingLimit: 0}
    """
    qs = _queueing(ctx)
    if qs is None:
        return
    for path, _, policy in _policies(ctx, qs):
        if not policy.isolated:
            continue
        for key, limit in (("borrowingLimit", policy.borrowing_limit), ("lendingLimit", policy.lending_limit)):
            if limit is not None:
                ctx.error(path + (key,), "an isolated tier has no cohort to borrow from or lend to; remove the limit")


@rule("GP526", "a tier that never reclaims lets borrowing workloads preempt")
def reclaim_never_borrow_preempts(ctx: Context) -> None:
    """Kueue refuses reclaimWithinCohort Never together with a borrowWithinCohort policy other than Never
    (CEL on ClusterQueuePreemption, apis/kueue/v1beta2/clusterqueue_types.go:516; the webhook's
    validatePreemption, pkg/webhooks/clusterqueue_webhook.go:278-286).

    Passes:
        queueing:
          tiers:
            standard: {reclaim: Never}
    Fails:
        queueing:
          tiers:
            standard: {reclaim: Never, borrowWithinCohort: LowerPriority}
    """
    qs = _queueing(ctx)
    if qs is None:
        return
    for path, _, policy in _policies(ctx, qs):
        if policy.reclaim == "Never" and policy.borrow_within_cohort != "Never":
            ctx.error(
                path + ("borrowWithinCohort",),
                "Kueue refuses this with reclaim: Never; set borrowWithinCohort: Never, or reclaim: LowerPriority",
            )


@rule("GP527", "a tier that borrows has a fair-sharing weight of 0")
def borrowing_weight_zero(ctx: Context) -> None:
    """With fair sharing on, a ClusterQueue of weight 0 has an infinite share as soon as it borrows
    anything: it is preempted first and cannot keep borrowed quota (Kueue concepts/fair_sharing.md). A
    tier that may borrow needs a positive weight; one that must not borrow says borrowingLimit: 0.

    Passes:
        queueing:
          tiers:
            standard: {weight: 0, borrowingLimit: 0}
    Fails:
        queueing:
          tiers:
            standard: {weight: 0}
    """
    qs = _queueing(ctx)
    if qs is None:
        return
    for path, _, policy in _policies(ctx, qs):
        if policy.weight == 0 and policy.may_borrow():
            ctx.error(path + ("weight",), "a tier that borrows needs a weight above 0, or borrowingLimit: 0")


@rule("GP528", "a ClusterQueue would have more resource groups or flavors than Kueue allows")
def resource_group_limits(ctx: Context) -> None:
    """gpupool puts each resource and each flavor in exactly one resource group (pools that share
    resource names form one group, as Kueue requires, pkg/webhooks/clusterqueue_webhook.go:302-329). Kueue
    allows at most 16 groups, and 64 covered resources and 64 flavors per group
    (apis/kueue/v1beta2/clusterqueue_types.go:74, :262, :279), and its webhook at most 256 flavors and 256
    covered resources over all groups and 512 flavor-resource combinations in one group
    (pkg/webhooks/clusterqueue_webhook.go:187-229): more pools with distinct resources than that cannot be
    queued by one ClusterQueue.

    Passes:
        queueing: {}
    Fails:
        nodePools:
          - {name: p0, gpu: L4, gpusPerNode: 1, nodes: [n0], sharing: {timeSlicing: {replicas: 2}}}
          - {name: p1, gpu: A100-40GB, gpusPerNode: 1, nodes: [n1], sharing: {mig: {preset: all-1g.5gb}}}
          - {name: p2, gpu: A100-40GB, gpusPerNode: 1, nodes: [n2], sharing: {mig: {preset: all-2g.10gb}}}
          - {name: p3, gpu: A100-40GB, gpusPerNode: 1, nodes: [n3], sharing: {mig: {preset: all-3g.20gb}}}
          - {name: p4, gpu: A100-40GB, gpusPerNode: 1, nodes: [n4], sharing: {mig: {preset: all-4g.20gb}}}
          - {name: p5, gpu: A100-40GB, gpusPerNode: 1, nodes: [n5], sharing: {mig: {preset: all-7g.40gb}}}
          - {name: p6, gpu: H100-80GB, gpusPerNode: 1, nodes: [n6], sharing: {mig: {preset: all-1g.10gb}}}
          - {name: p7, gpu: H100-80GB, gpusPerNode: 1, nodes: [n7], sharing: {mig: {preset: all-2g.20gb}}}
          - {name: p8, gpu: H100-80GB, gpusPerNode: 1, nodes: [n8], sharing: {mig: {preset: all-3g.40gb}}}
          - {name: p9, gpu: H100-80GB, gpusPerNode: 1, nodes: [n9], sharing: {mig: {preset: all-4g.40gb}}}
          - {name: p10, gpu: H100-80GB, gpusPerNode: 1, nodes: [n10], sharing: {mig: {preset: all-7g.80gb}}}
          - {name: p11, gpu: A30-24GB, gpusPerNode: 1, nodes: [n11], sharing: {mig: {preset: all-1g.6gb}}}
          - {name: p12, gpu: A30-24GB, gpusPerNode: 1, nodes: [n12], sharing: {mig: {preset: all-2g.12gb}}}
          - {name: p13, gpu: A30-24GB, gpusPerNode: 1, nodes: [n13], sharing: {mig: {preset: all-4g.24gb}}}
          - {name: p14, gpu: B200-180GB, gpusPerNode: 1, nodes: [n14], sharing: {mig: {preset: all-1g.23gb}}}
          - {name: p15, gpu: B200-180GB, gpusPerNode: 1, nodes: [n15], sharing: {mig: {preset: all-2g.45gb}}}
          - {name: p16, gpu: L4, gpusPerNode: 1, nodes: [n16]}
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 1}}
        queueing: {}
    """
    qs = _judgeable(ctx)
    if qs is None or ctx.built is None:
        return
    for name, queue in q.tenant_queues(ctx.built.model, qs).items():
        what = _over_limits(q.resource_groups(queue.quotas))
        if what is None:
            continue
        ctx.error(
            ctx.built.tenant_paths.get(name, ("queueing",)),
            f"tenant {name}'s ClusterQueue would have {what}: the pools advertise too many distinct resources "
            "for one queue; merge pools of the same GPU model, or give fewer pools distinct MIG layouts",
        )
        return


def _over_limits(groups: list[tuple[list[str], list[str]]]) -> str | None:
    """What of Kueue's ClusterQueue limits the resource groups exceed (the CRD's and its webhook's), or None."""
    wide = next((g for g in groups if len(g[0]) > MAX_PER_GROUP or len(g[1]) > MAX_PER_GROUP), None)
    flavors, resources = sum(len(g[1]) for g in groups), sum(len(g[0]) for g in groups)
    combos = next((g for g in groups if len(g[0]) * len(g[1]) > MAX_COMBINATIONS), None)
    if len(groups) > MAX_GROUPS:
        return f"{len(groups)} resource groups (Kueue allows {MAX_GROUPS})"
    if wide is not None:
        return (
            f"a resource group of {len(wide[0])} resources and {len(wide[1])} flavors (Kueue allows "
            f"{MAX_PER_GROUP} of each)"
        )
    if flavors > MAX_FLAVORS_TOTAL:
        return f"{flavors} flavors over its resource groups (Kueue's webhook allows {MAX_FLAVORS_TOTAL})"
    if resources > MAX_RESOURCES_TOTAL:
        return f"{resources} covered resources over its resource groups (Kueue's webhook allows {MAX_RESOURCES_TOTAL})"
    if combos is not None:
        return (
            f"a resource group of {len(combos[1])} flavors × {len(combos[0])} resources (Kueue's webhook allows "
            f"{MAX_COMBINATIONS} flavor-resource combinations per group)"
        )
    return None


@rule("GP529", "a queue limit names a resource no pool advertises")
def limit_unknown_resource(ctx: Context) -> None:
    """A per-resource borrowingLimit or lendingLimit for a resource no pool advertises applies to nothing
    (a typo, or a pool that changed its layout): a warning.

    Passes:
        queueing:
          tiers:
            standard: {lendingLimit: {nvidia.com/gpu: 1}}
    Fails:
        queueing:
          tiers:
            standard: {lendingLimit: {nvidia.com/gpu.shared: 1}}
    """
    qs = _judgeable(ctx)
    if qs is None or ctx.built is None:
        return
    advertised = ctx.built.model.advertised_resources()
    for path, _, policy in _policies(ctx, qs):
        for key, limit in (("borrowingLimit", policy.borrowing_limit), ("lendingLimit", policy.lending_limit)):
            if isinstance(limit, dict):
                for resource in limit:
                    if resource not in advertised:
                        ctx.warn(
                            path + (key, resource),
                            f"no pool advertises this resource{did_you_mean(resource, advertised)}",
                            key=True,
                        )


@rule("GP530", "a tier's borrowWithinCohort does nothing under the fair sharing the spec's weights are for")
def borrow_within_cohort_under_fair_sharing(ctx: Context) -> None:
    """`borrowWithinCohort` lets a borrowing workload preempt in the cohort, but only with Kueue's classical
    preemption: under fair sharing Kueue ignores it (apis/kueue/v1beta2/clusterqueue_types.go:538-541). The
    fairSharing weights only matter with fair sharing on, so a spec that sets weights and a borrowWithinCohort
    policy relies on two modes Kueue never runs together (a warning: which mode runs is Kueue's
    Configuration, not the spec).

    Passes:
        queueing:
          tiers:
            standard: {borrowWithinCohort: LowerPriority}
    Fails:
        queueing:
          tiers:
            standard: {borrowWithinCohort: LowerPriority, weight: 2}
    """
    qs = _queueing(ctx)
    if qs is None:
        return
    weighted = any(p.weight != 1 for p in qs.tiers.values()) or any(c.weight is not None for c in qs.cohorts)
    if not weighted:
        return
    for path, _, policy in _policies(ctx, qs):
        if policy.borrow_within_cohort != "Never":
            ctx.warn(
                path + ("borrowWithinCohort",),
                "has no effect under Kueue's fair sharing, which the fairSharing weights in this spec are for; "
                "keep the weights (fair sharing) or this policy (classical preemption), not both",
            )


@rule("GP620", "nominal quotas are more than a pool can place")
def nominal_over_placeable(ctx: Context) -> None:
    """Kueue admits up to the nominal quotas without looking at nodes (kueue#2665: "the administrator should
    make sure that the configured quota is not exceeding the resources that are physically available"). Per
    pool and resource, the tenants' nominal quotas plus what cohorts add may not exceed what the pool
    places: its nodes' GPUs, MIG instances as the pool's layouts cut them (the MIG catalog), shared
    replicas. An oversubscribed resource's nominal quota is its grant divided by the ratio (the rest is
    borrowed), so this judges the guaranteed part.

    Passes:
        queueing:
          cohorts:
            - {name: shared, tenants: [team-a]}
    Fails:
        queueing:
          cohorts:
            - {name: shared, tenants: [team-a], quota: {l4: {nvidia.com/gpu: 1}}}
    """
    qs = _judgeable(ctx)
    if qs is None or ctx.built is None:
        return
    spec = ctx.built.model
    split = q.nominal_split(spec, qs)
    cohort_paths = {c["name"]: path for path, c in _cohorts(ctx)}
    for line in q.flavor_lines(spec, qs):
        total = line.nominal + line.cohort_quota
        if total <= line.capacity:
            continue
        holders = sorted(
            ((n, t) for (t, p, r), n in split.items() if p == line.flavor and r == line.resource and n), reverse=True
        )
        parts = [f"{t} {n}" for n, t in holders[:5]] + (["..."] if len(holders) > 5 else [])
        if line.cohort_quota:
            parts.append(f"cohorts {line.cohort_quota}")
        message = (
            f"nominal quotas of {line.resource} on pool {line.flavor} add up to {total} ({', '.join(parts)}) but "
            f"the pool places {line.capacity}: Kueue would admit {total - line.capacity} that cannot run; lower "
            "grants or cohort quota, or add nodes"
        )
        if holders and holders[0][1] in ctx.built.tenant_paths:
            ctx.error(ctx.built.tenant_paths[holders[0][1]] + ("gpus", line.resource), message, key=True)
        else:
            owner = next((c.name for c in qs.cohorts if c.quota.get(line.flavor, {}).get(line.resource)), None)
            ctx.error(cohort_paths.get(owner or "", ("queueing",)), message)


@rule("GP621", "a cohort's quota names a pool or resource that does not exist")
def cohort_quota_unknown(ctx: Context) -> None:
    """A cohort's shared quota is per pool (flavor) and resource; a pool that is not defined, or a resource
    that pool does not advertise, is quota for nothing.

    Passes:
        queueing:
          cohorts:
            - {name: shared, tenants: [team-a], quota: {l4: {nvidia.com/gpu: 0}}}
    Fails:
        queueing:
          cohorts:
            - {name: shared, tenants: [team-a], quota: {l4: {nvidia.com/gpu.shared: 1}}}
    """
    qs = _judgeable(ctx)
    if qs is None or ctx.built is None:
        return
    pools = {p.name: p for p in ctx.built.model.pools}
    for path, c in _cohorts(ctx):
        for pool, resources in c.get("quota", {}).items():
            if pool not in pools:
                ctx.error(path + ("quota", pool), f"not a pool{did_you_mean(pool, pools)}", key=True)
                continue
            offered = pools[pool].resources_per_node()
            for resource in resources:
                if resource not in offered:
                    ctx.error(
                        path + ("quota", pool, resource),
                        f"pool {pool} does not advertise this resource; it advertises {one_of(offered)}",
                        key=True,
                    )
