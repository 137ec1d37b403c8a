"""The PrometheusRule gpupool generates from the spec: recording rules (weights, allocated and used
GPU-equivalents per pod, tenant and pool, MIG-aware) and alerts. Pure data; docs/explanation/monitoring.md explains
each series, tests/test_monitoring_rules.py runs `promtool check rules` and `promtool test rules` on it.

The weights are the chargeback's (NodePool.unit_gpu_fraction / device_gpu_fraction), written as static
series so the live figures and `gpupool plan` / `gpupool usage` agree. The static series are also the
history `gpupool usage` prices a range with (gpupool.monitoring.usage_queries): each resource's weight, each
pool's GPUs and price as they were when the rules ran, so a re-layout or a price change does not re-price
the past. A MIG instance's activity is weighed on its own GPU from the compute slices of the profiles
present there (profile:gpupool_mig_compute_slices:max), not from the pool's average instance.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpupool.gpu import dra_driver
from gpupool.model import grants
from gpupool.model import platform as m
from gpupool.monitoring import promql as q
from gpupool.monitoring.alerts import alert_rules

GROUP_STATIC = "gpupool.static"
GROUP_USAGE = "gpupool.usage"
GROUP_ALERTS = "gpupool.alerts"


def _num(x: Fraction | float | int) -> str:
    """A PromQL number literal; exact fractions keep 12 significant digits."""
    return f"{float(x):.12g}"


def _static(record: str, value: Fraction | float | int, labels: dict[str, str]) -> dict[str, Any]:
    return {"record": record, "expr": f"vector({_num(value)})", "labels": dict(labels)}


def static_rules(spec: m.Spec) -> list[dict[str, Any]]:
    """What gpupool knows and the cluster does not: weights, tenants, grants, pool sizes."""
    out: list[dict[str, Any]] = []
    for pool in spec.pools:
        out.append(_static(q.POOL_GPUS, pool.total_gpus, {"pool": pool.name}))
        if pool.price_per_gpu_hour is not None:
            out.append(_static(q.POOL_PRICE, pool.price_per_gpu_hour, {"pool": pool.name}))
        for advertised in pool.resources_per_node():
            out.append(
                _static(
                    q.RESOURCE_WEIGHT,
                    pool.unit_gpu_fraction(advertised),
                    {"pool": pool.name, "resource": q.ksm_resource(advertised)},
                )
            )
        profiles = sorted({p for g in pool.sharing.mig for p, n in g.layout.items() if n})
        for profile in profiles:
            weight = pool.device_gpu_fraction(m.mig_resource(profile))
            out.append(_static(q.MIG_DEVICE_WEIGHT, weight, {"pool": pool.name, "GPU_I_PROFILE": profile}))
        out += dra_device_rules(pool)
    for profile, slices in mig_profile_slices(spec):
        out.append(_static(q.MIG_PROFILE_SLICES, slices, {"GPU_I_PROFILE": profile}))
    granted = grants.granted_gpu_equivalents(spec)  # the plan's figure, without running the plan
    for t in spec.tenants:
        labels = {"namespace": t.namespace, "tenant": t.name, "tier": t.tier, "cost_center": t.cost_center or ""}
        out.append(_static(q.TENANT_INFO, 1, labels))
        out.append(_static(q.TENANT_GRANTED, granted[t.name], {"namespace": t.namespace}))
    return out


def dra_device_kinds(pool: m.NodePool) -> list[tuple[str, str]]:
    """(device profile key, resource) of a DRA pool: each device kind as the driver names it (the profile key, "" for
    a whole GPU) and the resource name it serves, in kube-state-metrics' spelling, so a device allocated to a claim
    is weighed like a request of that name (promql.claimed_devices). Empty for a device-plugin pool."""
    if not pool.dra:
        return []
    return [
        (
            "" if physical == m.GPU else dra_driver.device_profile_key(pool.mig_profile(physical)),
            q.ksm_resource(pool.advertised_name(physical)),
        )
        for physical in pool.physical_resources_per_node()
    ]


def dra_device_rules(pool: m.NodePool) -> list[dict[str, Any]]:
    return [
        _static(q.DRA_DEVICE_RESOURCE, 1, {"pool": pool.name, "device_profile": key, "resource": resource})
        for key, resource in dra_device_kinds(pool)
    ]


def mig_profile_slices(spec: m.Spec) -> list[tuple[str, int]]:
    """(profile, compute slices) of every MIG profile of the pools' GPU models (the catalog's; a profile name
    has the same slices on every model that has it), so that a re-layout to another profile is weighed too."""
    from gpupool.gpu.mig import catalog

    out: dict[str, int] = {}
    for pool in spec.pools:
        model = catalog().resolve(pool.gpu_model) if pool.mig_capable else None
        for name, profile in model.profiles.items() if model else ():
            out[name] = profile.compute
    return sorted(out.items())


def usage_rules() -> list[dict[str, Any]]:
    """Allocated and used GPU-equivalents, live. The joins are gpupool.monitoring.promql's, which
    `gpupool usage` runs over a time range too."""
    dev = ", ".join(q.DEVICE)
    weighted = q.weighted_active(f'{q.ACTIVE}{{GPU_I_PROFILE!=""}}', f'{q.ACTIVE}{{GPU_I_PROFILE=""}}')
    return [
        {"record": q.NODE_POOL, "expr": q.node_pool_from_labels()},
        {
            "record": q.POD_ALLOC,
            "expr": (
                f"sum by (namespace, pod, node, resource) ({q.running_gpu_requests()})"
                f" * on(node) group_left(pool) {q.NODE_POOL}"
                f" * on(pool, resource) group_left() {q.RESOURCE_WEIGHT}"
            ),
        },
        {"record": q.NAMESPACE_ALLOC, "expr": f"sum by (namespace, pool) ({q.POD_ALLOC})"},
        {"record": q.POOL_ALLOC, "expr": f"sum by (pool) ({q.POD_ALLOC})"},
        {"record": q.ACTIVE, "expr": f"{q.dcgm(q.GR_ENGINE_ACTIVE)} * on(node) group_left(pool) {q.NODE_POOL}"},
        {"record": q.DEVICE_BUSY, "expr": f"max by (pool, {dev}, GPU_I_PROFILE) ({weighted})"},
        {"record": q.POOL_USED, "expr": f"sum by (pool) ({q.DEVICE_BUSY})"},
        {
            "record": q.POD_USED,
            "expr": (
                f"sum by (namespace, pod, pool) ({q.share_of_device(weighted)})"
                f" * on(namespace) group_left() {q.TENANT_INFO}"
            ),
        },
        {"record": q.NAMESPACE_USED, "expr": f"sum by (namespace, pool) ({q.POD_USED})"},
    ]


def groups(spec: m.Spec) -> list[dict[str, Any]]:
    """The rule groups, in evaluation order (a group's rules run in order, so later rules read earlier ones)."""
    return [
        {"name": GROUP_STATIC, "rules": static_rules(spec)},
        {"name": GROUP_USAGE, "rules": usage_rules()},
        {"name": GROUP_ALERTS, "rules": alert_rules(spec)},
    ]
