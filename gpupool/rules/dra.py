"""GP23x: pools whose devices Dynamic Resource Allocation serves (`allocation: dra`; gpupool.k8s.dra, docs/explanation/dra.md)."""

from __future__ import annotations

from gpupool.model import platform as m
from gpupool.rules.registry import Context, rule


def _dra_pools(ctx: Context) -> list[tuple[m.NodePool, tuple]]:
    if ctx.built is None:
        return []
    paths = ctx.built.pool_paths
    return [(p, paths[p.name]) for p in ctx.built.model.pools if p.dra and p.name in paths]


@rule("GP230", "a DRA pool shares GPUs by time-slicing or MPS")
def dra_software_sharing(ctx: Context) -> None:
    """A DRA pool's classes serve whole GPUs and MIG instances. Time-slicing and MPS are the device plugin's
    configs, which do not run on a DRA pool's nodes; NVIDIA's DRA driver has its own, behind alpha feature gates
    (TimeSlicingSettings, MPSSupport), which gpupool does not configure. So a `.shared` name would be served by
    nothing. Keeping DRA classes unshared also keeps every class fit for `dedicated` tiers.

    Passes:
        nodePools:
          - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], allocation: dra}
    Fails:
        nodePools:
          - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], allocation: dra, sharing: {timeSlicing: {replicas: 4}}}
    """
    for pool, path in _dra_pools(ctx):
        if pool.sharing.software_shared:
            ctx.error(
                path + ("sharing",),
                "a pool with allocation: dra serves whole GPUs and MIG instances only; remove timeSlicing/mps, "
                "or keep allocation: device-plugin for a shared pool",
            )


@rule("GP231", "two DRA pools serve the same resource name")
def dra_name_twice(ctx: Context) -> None:
    """Each DRA class maps its resource name through `extendedResourceName`, which should be unique in the
    cluster: of two classes naming it, only the later one serves pods (k8s.io/api v0.36.3 resource/v1/types.go
    1978-1992), and a class selector cannot tell nodes apart (it sees only the device: k8s.io/dynamic-resource-
    allocation v0.36.3 cel/compile.go 319-323). A device-plugin pool may serve the same name on its own nodes:
    the scheduler serves a name from a node's allocatable first, and through DRA only where no device plugin
    advertises it (kube-scheduler v1.36.3 dynamicresources/extendeddynamicresources.go, filterExtendedResources).

    Passes:
        nodePools:
          - {name: l4-a, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], allocation: dra}
          - {name: l4-b, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-2]}
    Fails:
        nodePools:
          - {name: l4-a, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], allocation: dra}
          - {name: l4-b, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-2], allocation: dra}
    """
    first: dict[str, str] = {}
    for pool, path in _dra_pools(ctx):
        for name in pool.resources_per_node():
            if name in first:
                ctx.error(
                    path + ("allocation",),
                    f'{name} is already served through DRA by pool "{first[name]}"; one DRA pool per resource '
                    "name (a DeviceClass's extendedResourceName is cluster-wide): merge the pools, or keep this "
                    "one on allocation: device-plugin",
                )
            else:
                first[name] = pool.name


@rule("GP232", "operator values switch the GPU Operator to its DRA stack")
def operator_dra_stack(ctx: Context) -> None:
    """GPU Operator v26.7.0 deploys either ClusterPolicy (the device-plugin stack) or GPUCluster (its DRA stack),
    never both (deployments/gpu-operator/values.yaml 566-576: "It is an invalid configuration for both CRs to
    exist"). gpupool's MIG Manager config, device-plugin configs and per-node deploy labels are ClusterPolicy's,
    and a DRA pool runs beside it (docs/explanation/dra.md), so the values may not turn ClusterPolicy off or GPUCluster on.

    Passes:
        cluster: {name: dev, gpuOperator: {values: {gpuCluster: {deployCR: false}}}}
    Fails:
        cluster: {name: dev, gpuOperator: {values: {gpuCluster: {deployCR: true}, clusterPolicy: {deployCR: false}}}}
    """
    raw = ctx.data.get("cluster") if isinstance(ctx.data, dict) else None
    op = raw.get("gpuOperator") if isinstance(raw, dict) else None
    values = op.get("values") if isinstance(op, dict) else None
    if not isinstance(values, dict) or not ctx.usable(("cluster", "gpuOperator", "values")):
        return
    for section, refused in (("gpuCluster", True), ("clusterPolicy", False)):
        block = values.get(section)
        if isinstance(block, dict) and block.get("deployCR") is refused:
            ctx.error(
                ("cluster", "gpuOperator", "values", section, "deployCR"),
                f"must stay {str(not refused).lower()}: gpupool runs the GPU Operator's ClusterPolicy stack, and "
                "pools with allocation: dra run beside it (docs/explanation/dra.md)",
            )


@rule("GP233", "a DRA pool names a GPU model gpupool does not know")
def dra_unknown_model(ctx: Context) -> None:
    """A DRA pool's classes select the GPU product by the names gpupool knows for the model (its GFD product
    strings); for a model gpupool does not know they select by device type and MIG profile only, so another
    model's devices of the same kind would match too (a warning).

    Passes:
        nodePools:
          - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], allocation: dra}
    Fails:
        nodePools:
          - {name: l4, gpu: L4X, gpusPerNode: 4, nodes: [gpu-l4-1], allocation: dra}
    """
    from gpupool.gpu.models import resolve_gpu

    for pool, path in _dra_pools(ctx):
        if resolve_gpu(pool.gpu_model).gpu is None:
            ctx.warn(
                path + ("gpu",),
                "the DRA classes of this pool cannot select its GPU product (not a model gpupool knows, GP250); "
                "they match any GPU of their type the driver publishes",
            )


def _dra_driver(ctx: Context) -> dict:
    raw = ctx.data.get("cluster") if isinstance(ctx.data, dict) else None
    driver = raw.get("draDriver") if isinstance(raw, dict) and ctx.usable(("cluster",)) else None
    return driver if isinstance(driver, dict) else {}


# The DRA driver's values gpupool derives (gpupool.k8s.dra_install), and what sets each.
DERIVED_DRIVER_VALUES: dict[tuple[str, ...], str] = {
    ("gpuResourcesEnabledOverride",): "the pools' allocation: dra (gpupool keeps the device plugin off their nodes)",
    ("resources", "gpus", "enabled"): "the pools' allocation: dra",
    ("kubeletPlugin", "affinity"): "the pools' allocation: dra (the kubelet plugin runs on their nodes only)",
    ("kubeletPlugin", "nodeSelector"): "the pools' allocation: dra (the kubelet plugin runs on their nodes only)",
}


@rule("GP235", "DRA driver values may not override what gpupool derives from the spec")
def dra_driver_derived_values(ctx: Context) -> None:
    """`cluster.draDriver.values` is merged last into the DRA driver chart's values. Where its kubelet plugin runs
    (DRA pools' nodes, and on MIG pools only once MIG Manager reports success, so it lists the partitions that
    exist) and that it serves GPUs are derived from the pools; another node selection would publish devices of
    nodes whose device plugin serves the same names, or partitions a re-layout removed.

    Passes:
        cluster: {name: dev, draDriver: {values: {logVerbosity: "6"}}}
    Fails:
        cluster: {name: dev, draDriver: {values: {kubeletPlugin: {nodeSelector: {gpu: "true"}}}}}
    """
    from gpupool.rules.security import refuse_derived

    base = ("cluster", "draDriver", "values")
    values = _dra_driver(ctx).get("values")
    if isinstance(values, dict) and ctx.usable(base):
        refuse_derived(ctx, base, values, DERIVED_DRIVER_VALUES)


@rule("GP236", "the DRA driver chartPath does not exist or is outside the repository")
def dra_driver_chart_path(ctx: Context) -> None:
    """A local DRA driver chart (`cluster.draDriver.chartPath`, air-gapped use) is named relative to the spec, must
    exist, and must stay inside the repository, links followed, as the operator's (GP101, GP102).

    Passes:
        cluster: {name: dev, draDriver: {chartVersion: 0.4.1}}
    Fails:
        cluster: {name: dev, draDriver: {chartPath: /opt/charts/dra-driver-nvidia-gpu}}
    """
    from gpupool.gpu import local_chart

    chart_path = _dra_driver(ctx).get("chartPath")
    if not isinstance(chart_path, str):
        return
    where = ("cluster", "draDriver", "chartPath")
    why = local_chart.outside(ctx.spec_dir, chart_path)
    if why:
        ctx.error(where, f"{why}; commit the chart under the repository")
    elif not (ctx.spec_dir / chart_path).exists():
        ctx.error(
            where,
            f"does not exist (relative to {ctx.spec_dir}); give a chart directory or .tgz, or remove chartPath to "
            "use the chart's OCI registry",
        )
