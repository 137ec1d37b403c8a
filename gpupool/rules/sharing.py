"""GP3xx: how a pool shares its GPUs (MIG, time-slicing, MPS) and what the device plugin accepts.

Most decide whether a pool's sharing can be built, so they run inside the model builder and are declared
here with their documentation; GP310 reads the built model.
"""

from __future__ import annotations

from gpupool.model import build as B
from gpupool.rules.admission import declared_max_per_pod
from gpupool.rules.registry import Context, declare, rule

declare(
    B.MIG_NEEDS_MIXED,
    'MIG pools need cluster.migStrategy "mixed"',
    """
Under `mixed` each MIG profile is advertised as its own resource (nvidia.com/mig-1g.10gb), which is what
tenant quotas name; `none` would advertise no MIG devices.

Passes:
    cluster: {name: dev, migStrategy: mixed}
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
Fails:
    cluster: {name: dev, migStrategy: none}
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 4, nodes: [n1], sharing: {mig: {preset: all-balanced}}}
""",
)

declare(
    B.TS_AND_MPS,
    "a pool uses both timeSlicing and mps",
    """
The device plugin takes one sharing strategy per config.

Passes:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 4}}}
Fails:
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 4}, mps: {replicas: 4}}}
""",
)

declare(
    B.MPS_WITH_MIG,
    "MPS on MIG instances",
    """
The device plugin rejects it ("sharing using MPS is not supported for MIG devices"); time-slicing works
with MIG.

Passes:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {preset: all-balanced}, timeSlicing: {replicas: 2}}
Fails:
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 4
        nodes: [n1]
        sharing: {mig: {preset: all-balanced}, mps: {replicas: 2}}
""",
)

declare(
    B.MPS_UNDER_MIXED,
    'MPS under cluster.migStrategy "mixed"',
    """
The GPU Operator passes the MIG strategy to every device plugin, which then refuses MPS ("using
--mig-strategy=mixed is not supported with MPS"): MPS needs `migStrategy: none`, so no MIG pools.

Passes:
    cluster: {name: dev, migStrategy: none}
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {mps: {replicas: 4}}}
Fails:
    cluster: {name: dev}
    nodePools:
      - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {mps: {replicas: 4}}}
""",
)


@rule("GP310", "a per-pod maximum above 1 on a resource the device plugin gives one per container")
def max_per_pod_on_one_per_container(ctx: Context) -> None:
    """With `failRequestsGreaterThanOne` (the default for time-slicing, and always for MPS in device plugin
    v0.20.0) the plugin refuses a container that asks for more than one shared unit, at kubelet Allocate,
    after the quota and the scheduler let the pod through (k8s-device-plugin `internal/rm/rm.go`). A
    maximum above 1 promises requests that fail on the node; gpupool's admission policy refuses such a
    container at once, so the maximum must say 1.

    Passes:

        nodePools: [{name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 4}}}]
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu.shared: 8},
             maxPerPod: {nvidia.com/gpu.shared: 1}}

    Fails:

        nodePools: [{name: l4, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {timeSlicing: {replicas: 4}}}]
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu.shared: 8},
             maxPerPod: {nvidia.com/gpu.shared: 2}}
    """
    if ctx.spec is None:
        return
    singles = set(ctx.spec.one_per_container())
    for path, resource, limit in declared_max_per_pod(ctx):
        if resource in singles and limit > 1 and ctx.usable(path):
            ctx.error(
                path,
                f"{limit} {resource} per pod, but the device plugin allocates at most 1 {resource} per container "
                "(failRequestsGreaterThanOne), and gpupool's admission policy refuses more: set maxPerPod to 1, "
                "or set failRequestsGreaterThanOne: false on the pool's timeSlicing",
                key=True,
            )


@rule("GP311", "MPS replicas above what the model's MPS control daemon accepts")
def mps_replicas_within_the_models_maximum(ctx: Context) -> None:
    """The MPS control daemon serves at most 16 clients per GPU below compute capability 7.5 (V100, P100) and
    48 from 7.5 on, and refuses to start above that ("maximum allowed replicas exceeded"; k8s-device-plugin
    v0.20.0 `cmd/mps-control-daemon/mps/device.go`, `assertReplicas`). The schema allows 48 for every model.

    Passes:

        cluster: {name: dev, migStrategy: none}
        nodePools: [{name: v100, gpu: V100-32GB, gpusPerNode: 4, nodes: [n1], sharing: {mps: {replicas: 16}}}]
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu.shared: 8}}

    Fails:

        cluster: {name: dev, migStrategy: none}
        nodePools: [{name: v100, gpu: V100-32GB, gpusPerNode: 4, nodes: [n1], sharing: {mps: {replicas: 32}}}]
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu.shared: 8}}
    """
    from gpupool.gpu.models import resolve_gpu

    if ctx.built is None:
        return
    for pool in ctx.built.model.pools:
        mps = pool.sharing.mps
        found = resolve_gpu(pool.gpu_model).gpu
        if mps is None or found is None:
            continue
        limit = found.mps_max_replicas
        path = ctx.built.pool_paths.get(pool.name, ()) + ("sharing", "mps", "replicas")
        if limit is not None and mps.replicas > limit and ctx.usable(path):
            ctx.error(
                path,
                f"{mps.replicas} MPS replicas, but the MPS control daemon accepts at most {limit} per GPU on "
                f"{found.name} (compute capability {found.compute_capability}, below 7.5) and would not start; "
                f"use at most {limit}",
            )
