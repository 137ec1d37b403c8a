"""The PrometheusRule gpupool generates from the spec: recording rules (weights, allocated and used
GPU-equivalents per pod, tenant and pool, MIG-aware) and alerts. Pure data; docs/monitoring.md explains
each series, tests/test_monitoring_rules.py runs `promtool check rules` and `promtool test rules` on it.

The weights are the chargeback's (NodePool.unit_gpu_fraction / device_gpu_fraction), written as static
series so the live figures and `gpupool plan` / `gpupool usage` agree.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpupool.model import grants
from gpupool.model import platform as m
from gpupool.monitoring import promql as q

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
    granted = grants.granted_gpu_equivalents(spec)  # the plan's figure, without running the plan
    for t in spec.tenants:
        labels = {"namespace": t.namespace, "tenant": t.name, "tier": t.tier, "cost_center": t.cost_center or ""}
        out.append(_static(q.TENANT_INFO, 1, labels))
        out.append(_static(q.TENANT_GRANTED, granted[t.name], {"namespace": t.namespace}))
    return out


def usage_rules() -> list[dict[str, Any]]:
    """Allocated and used GPU-equivalents, live. The joins are gpupool.monitoring.promql's, which
    `gpupool usage` runs over a time range too."""
    dev = ", ".join(q.DEVICE)
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
        {
            "record": q.DEVICE_BUSY,
            "expr": f"max by (pool, {dev}, GPU_I_PROFILE) ({q.weighted_active(q.ACTIVE)})",
        },
        {"record": q.POOL_USED, "expr": f"sum by (pool) ({q.DEVICE_BUSY})"},
        {
            "record": q.POD_USED,
            "expr": (
                f"sum by (namespace, pod, pool) ({q.share_of_device(q.weighted_active(q.ACTIVE))})"
                f" * on(namespace) group_left() {q.TENANT_INFO}"
            ),
        },
        {"record": q.NAMESPACE_USED, "expr": f"sum by (namespace, pool) ({q.POD_USED})"},
    ]


def alert_rules(spec: m.Spec) -> list[dict[str, Any]]:
    a = spec.monitoring.alerts
    gpu_quota = 'resourcequota="gpu-quota", resource=~"requests\\\\.nvidia\\\\.com/.+"'
    out: list[dict[str, Any]] = [
        {
            "alert": "GpuAllocatedButIdle",
            "expr": (
                f"max by (namespace, pod, pool) (avg_over_time({q.ACTIVE}[1h]))"
                f" * on(namespace) group_left(tenant, cost_center) {q.TENANT_INFO} < {_num(a.idle_below)}"
            ),
            "for": a.idle_for,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A pod holds a GPU it does not use",
                "description": (
                    "{{ $labels.namespace }}/{{ $labels.pod }} (pool {{ $labels.pool }}) kept its GPU engine "
                    f"below {a.idle_below:.0%} busy for {a.idle_for} (1h average {{{{ $value | humanizePercentage }}}}). "
                    "On a time-sliced or MPS GPU the value is the shared device's."
                ),
            },
        },
        {
            "alert": "GpuQuotaAlmostFull",
            "expr": (
                f'sum by (namespace, resource) ({q.QUOTA}{{{gpu_quota}, type="used"}})'
                f' / sum by (namespace, resource) ({q.QUOTA}{{{gpu_quota}, type="hard"}} > 0)'
                f" >= {_num(a.quota_almost_full)}"
            ),
            "for": "15m",
            "labels": {"severity": "info"},
            "annotations": {
                "summary": "A tenant's GPU quota is almost used up",
                "description": "{{ $labels.namespace }} uses {{ $value | humanizePercentage }} of its {{ $labels.resource }} quota.",
            },
        },
        {
            "alert": "GpuPodsPending",
            "expr": (
                f'sum by (namespace, pod) ({q.REQUESTS}{{resource=~"{q.GPU_RESOURCES}"}})'
                f' * on(namespace, pod) group_left() (max by (namespace, pod) ({q.PHASE}{{phase="Pending"}}) == 1) > 0'
            ),
            "for": a.pending_for,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A GPU pod cannot be scheduled",
                "description": f"{{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} has been pending with a GPU request for {a.pending_for}.",
            },
        },
        {
            "alert": "MigConfigFailed",
            "expr": f'max by (node) ({q.NODE_LABELS}{{{q.MIG_STATE_LABEL}="failed"}})',
            "for": "5m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "MIG Manager failed to apply a MIG layout",
                "description": "{{ $labels.node }} reports nvidia.com/mig.config.state=failed: its GPUs are not in the layout the spec asks for.",
            },
        },
        {
            "alert": "MigConfigStuck",
            "expr": f'max by (node) ({q.NODE_LABELS}{{{q.MIG_STATE_LABEL}=~"pending|rebooting"}})',
            "for": a.mig_stuck_for,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A MIG re-layout does not finish",
                "description": f"{{{{ $labels.node }}}} has been in nvidia.com/mig.config.state pending or rebooting for {a.mig_stuck_for}.",
            },
        },
        {
            "alert": "GpuXidErrors",
            "expr": f"max by (node, gpu, UUID, modelName) ({q.dcgm(q.XID_ERRORS)}) > 0",
            "for": "0m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "A GPU reported an XID error",
                "description": "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }}.",
            },
        },
    ]
    # Quota overcommit drift: what the quotas add up to against what the nodes advertise now, above the
    # spec's own policy. gpupool proves the policy at plan time; this catches nodes gone missing.
    for resource in spec.advertised_resources():
        ratio = spec.oversubscription.exact_ratio_for(resource)
        out.append(
            {
                "alert": "GpuQuotaOvercommit",
                "expr": (
                    f'sum({q.QUOTA}{{resourcequota="gpu-quota", type="hard", resource={q.quoted("requests." + resource)}}})'
                    f" / sum({q.ALLOCATABLE}{{resource={q.quoted(q.ksm_resource(resource))}}}) > {_num(ratio)}"
                ),
                "for": "15m",
                "labels": {"severity": "warning", "resource": resource},
                "annotations": {
                    "summary": "GPU quotas promise more than the nodes advertise",
                    "description": (
                        f"Tenant quotas of {resource} add up to {{{{ $value | humanize }}}}x what the nodes "
                        f"advertise; the spec allows {float(ratio):g}x. Nodes are missing or drained."
                    ),
                },
            }
        )
    return out


def groups(spec: m.Spec) -> list[dict[str, Any]]:
    """The rule groups, in evaluation order (a group's rules run in order, so later rules read earlier ones)."""
    return [
        {"name": GROUP_STATIC, "rules": static_rules(spec)},
        {"name": GROUP_USAGE, "rules": usage_rules()},
        {"name": GROUP_ALERTS, "rules": alert_rules(spec)},
    ]
