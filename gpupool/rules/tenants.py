"""GP5xx: tenants, their tier, their GPU quotas and container defaults.

The checks that decide whether a tenant is built run inside the model builder and are declared here;
the warnings below read the spec after it.
"""

from __future__ import annotations

from gpupool.model import build as B
from gpupool.rules.registry import Context, declare, rule

declare(
    B.DUPLICATE_TENANT,
    "two tenants have the same name",
    """
Tenant names are namespace names; the message says where the first one is (tenant files included).

Passes:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 2}}
      - {name: team-b, tier: standard, owners: [b], gpus: {nvidia.com/gpu: 2}}
Fails:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 2}}
      - {name: team-a, tier: standard, owners: [b], gpus: {nvidia.com/gpu: 2}}
""",
)

declare(
    B.UNKNOWN_TIER,
    "a tenant names a tier that is not defined",
    """
Passes:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}}
Fails:
    tenants:
      - {name: team-a, tier: standrd, owners: [a], gpus: {nvidia.com/gpu: 4}}
""",
)

declare(
    B.UNADVERTISED,
    "a quota names a resource no pool advertises",
    """
A quota for a resource nobody advertises can never be used. The hint covers the usual slips: a typo, `+`
where the device plugin writes `.`, a missing or extra `.shared` (renameToShared), and lists what the pools
advertise under the cluster's MIG strategy. Not judged while a pool is broken (what the cluster advertises is
then unknown).

Passes:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}}
Fails:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu.shared: 4}}
""",
)

declare(
    B.DEDICATED_SHARED,
    "a dedicated tier gets GPUs that are shared in software",
    """
A tier with `isolation: dedicated` must not be granted a resource a time-sliced or MPS pool supplies:
its pods could share a GPU with other tenants. MIG instances are isolated in hardware and allowed.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1]}
    tiers:
      - {name: standard, priority: 100, isolation: dedicated}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 4, renameToShared: false}}}
    tiers:
      - {name: standard, priority: 100, isolation: dedicated}
""",
)

declare(
    B.QUANTITY,
    "a container default is not a usable quantity",
    """
The schema accepts the shape of a Kubernetes quantity; this catches what Kubernetes would still refuse,
such as an exponent outside e-64..e64.

Passes:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4},
         containerDefaults: {limits: {cpu: "2"}}}
Fails:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4},
         containerDefaults: {limits: {cpu: "1e999999999"}}}
""",
)

declare(
    B.REQUEST_ABOVE_LIMIT,
    "a default request is above its default limit",
    """
Kubernetes refuses a LimitRange whose default request exceeds its default limit (compared exactly:
1 equals 1000m, 1Gi equals 1024Mi).

Passes:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4},
         containerDefaults: {requests: {cpu: "1"}, limits: {cpu: 1000m}}}
Fails:
    tenants:
      - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4},
         containerDefaults: {requests: {cpu: "2"}, limits: {cpu: 500m}}}
""",
)


def _tenants(ctx: Context):
    """(path, raw tenant) for each tenant the schema accepted, first of each name only (duplicates are
    GP501's)."""
    raw = ctx.data.get("tenants") if isinstance(ctx.data, dict) else None
    seen: set[str] = set()
    for i, t in enumerate(raw if isinstance(raw, list) else ()):
        if isinstance(t, dict) and ctx.usable(("tenants", i)) and t["name"] not in seen:
            seen.add(t["name"])
            yield ("tenants", i), t


@rule("GP507", "a tenant has no owners")
def no_owners(ctx: Context) -> None:
    """Without `owners` nobody but cluster administrators can run workloads in the namespace (a warning).

    Passes:
        tenants:
          - {name: team-a, tier: standard, owners: [team-a-admins], gpus: {nvidia.com/gpu: 4}}
    Fails:
        tenants:
          - {name: team-a, tier: standard, gpus: {nvidia.com/gpu: 4}}
    """
    for path, t in _tenants(ctx):
        if not t.get("owners"):
            ctx.warn(
                path,
                "no owners: nobody but cluster administrators can run workloads in this namespace; "
                "add the groups that own it under owners",
            )


@rule("GP508", "a tenant has no GPU quota")
def no_quota(ctx: Context) -> None:
    """A tenant without `gpus` gets every GPU resource limited to 0 (a warning; offboarded tenants are
    exempt).

    Passes:
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}}
    Fails:
        tenants:
          - {name: team-a, tier: standard, owners: [a]}
    """
    for path, t in _tenants(ctx):
        if not t.get("gpus") and not t.get("offboarded"):
            ctx.warn(path, "no GPU quota: every GPU resource will be limited to 0 in this namespace")
