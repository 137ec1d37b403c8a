"""`gpupool plan -o json`: the stable, documented JSON document of a capacity plan (docs/reference/plan-json.md), one
presentation of gpupool.analysis.plan beside the text and markdown tables of gpupool.present.plan."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpupool.analysis.plan import (
    HOURS_PER_MONTH,
    SCHEMA_VERSION,
    CapacityPlan,
    Cost,
    PoolLine,
    RolloutLine,
    TenantLine,
)


def _num(x: Fraction | int | None, places: int = 4) -> float | int | None:
    """Exact integers stay integers; other values are rounded to `places` decimals."""
    if x is None:
        return None
    if isinstance(x, int) or (isinstance(x, Fraction) and x.denominator == 1):
        return int(x)
    return round(float(x), places)


def _cost_json(c: Cost) -> dict[str, Any]:
    return {
        "gpuEquivalents": _num(c.gpu_equivalents),
        "pricedGpuEquivalents": _num(c.priced_gpu_equivalents),
        "unpricedGpuEquivalents": _num(c.unpriced_gpu_equivalents),
        "grantedGpuEquivalents": _num(c.granted_gpu_equivalents),
        "costPerHour": _num(c.per_hour),
        "costPerMonth": _num(c.per_month, 2),
    }


def _pool_chargeback_json(p: PoolLine) -> dict[str, Any]:
    cost = p.cost_per_hour
    charged, unallocated = p.charged_gpu_equivalents, p.unallocated_gpu_equivalents
    return {
        "costPerHour": _num(cost),
        "chargedGpuEquivalents": _num(charged),
        "chargedPerHour": _num(p.per_hour(charged)),
        "unallocatedGpuEquivalents": _num(unallocated),
        "unallocatedPerHour": _num(p.per_hour(unallocated)),
        "strandedGpus": _num(p.stranded_gpus),
        "oversubscribed": p.oversubscribed,
        "reconciles": p.reconciles,
    }


def _pool_json(p: PoolLine) -> dict[str, Any]:
    return {
        "name": p.name,
        "gpu": p.gpu_model,
        "nodes": p.nodes,
        "gpusPerNode": p.gpus_per_node,
        "gpus": p.gpus,
        "nodeNames": list(p.node_names),
        "nodeSelector": dict(p.node_selector),
        "sharing": p.sharing,
        "allocation": p.allocation,
        "replicas": p.replicas,
        "pricePerGpuHour": _num(p.price),
        "chargeback": _pool_chargeback_json(p),
        "resources": [
            {
                "resource": s.resource,
                "device": s.physical,
                "capacity": s.capacity,
                "supply": s.formula,
                "gpuPerUnit": _num(s.gpu_per_unit, 6),
                "gpuEquivalents": _num(s.gpu_equivalents),
                "granted": _num(s.granted),
                "grantedGpuEquivalents": _num(s.granted_gpu_equivalents),
                "chargedGpuEquivalents": _num(s.charged_gpu_equivalents),
                "unallocatedGpuEquivalents": _num(s.unallocated_gpu_equivalents),
                "chargeFactor": _num(s.charge_factor, 6),
            }
            for s in p.supplies
        ],
    }


def _tenant_json(t: TenantLine) -> dict[str, Any]:
    return {
        "name": t.name,
        "tier": t.tier,
        "costCenter": t.cost_center,
        "offboarded": t.offboarded,
        "grants": dict(t.grants),
        "share": _num(t.share, 6),
        **_cost_json(t.cost),
        "allocations": [
            {
                "resource": a.resource,
                "pool": a.pool,
                "units": _num(a.units),
                "gpuEquivalents": _num(a.gpu_equivalents),
                "grantedGpuEquivalents": _num(a.granted_gpu_equivalents),
                "pricePerGpuHour": _num(a.price),
                "costPerHour": _num(a.cost_per_hour),
            }
            for a in t.allocations
        ],
    }


def _rollout_json(r: RolloutLine) -> dict[str, Any]:
    return {
        "pool": r.pool,
        "maxUnavailable": r.max_unavailable,
        "unavailableAtOnce": r.at_once,
        "cordon": r.cordon,
        "nodeTimeoutSeconds": r.node_timeout_seconds,
        "drain": bool(r.drain_timeout_seconds),
        "drainTimeoutSeconds": r.drain_timeout_seconds,
        "waves": [list(w) for w in r.waves],
        "nodeSelector": dict(r.node_selector),
    }


def to_json(plan: CapacityPlan) -> dict[str, Any]:
    """The stable, documented JSON document (docs/reference/plan-json.md): schemaVersion 1."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "cluster": plan.cluster,
        "spec": plan.source,
        "hoursPerMonth": HOURS_PER_MONTH,
        "ok": plan.ok,
        "totals": {
            "gpus": plan.total_gpus,
            **_cost_json(plan.total),
            "unallocatedGpuEquivalents": _num(plan.unallocated.gpu_equivalents),
            "unallocatedPerHour": _num(plan.unallocated.per_hour),
            "poolsCostPerHour": _num(plan.pools_cost_per_hour),
        },
        "pools": [_pool_json(p) for p in plan.pools],
        "resources": [
            {
                "resource": r.resource,
                "capacity": r.capacity,
                "granted": r.granted,
                "maxRatio": _num(r.max_ratio),
                "allowed": r.allowed,
                "headroom": r.headroom,
                "ratio": _num(r.ratio),
                "pools": list(r.pools),
            }
            for r in plan.resources
        ],
        "tenants": [_tenant_json(t) for t in plan.tenants],
        "costCenters": [
            {
                "name": c.name,
                "tenants": list(c.tenants),
                "share": _num(c.share, 6),
                **_cost_json(c.cost),
            }
            for c in plan.cost_centers
        ],
        "migRollouts": [_rollout_json(r) for r in plan.rollouts],
        "maxPerPod": [
            {
                "tenant": x.tenant,
                "resource": x.resource,
                "max": x.limit,
                "from": x.source,
                "quota": x.quota,
            }
            for x in plan.max_per_pod
        ],
        "queues": [
            {
                "flavor": x.flavor,
                "resource": x.resource,
                "capacity": x.capacity,
                "nominal": x.nominal,
                "cohortQuota": x.cohort_quota,
                "lendable": x.lendable,
                "reserved": x.reserved,
                "borrowable": x.borrowable,
            }
            for x in plan.queues
        ],
        "queueCeilings": [
            {
                "tenant": x.tenant,
                "resource": x.resource,
                "grant": x.grant,
                "nominal": x.nominal,
                "throughKueue": x.through_kueue,
                "outsideKueue": x.outside_kueue,
            }
            for x in plan.queue_ceilings
        ],
    }
