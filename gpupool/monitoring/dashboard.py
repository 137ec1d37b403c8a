"""The Grafana dashboard gpupool ships as a ConfigMap for Grafana's dashboard sidecar: granted, allocated,
used and idle GPU-equivalents per tenant, cost centre and pool, all read from gpupool's recorded series
(gpupool.monitoring.rules). Pure data: a dashboard JSON model (schemaVersion 39)."""

from __future__ import annotations

from typing import Any

from gpupool.monitoring import promql as q

UID = "gpupool-usage"
TITLE = "gpupool: GPU usage by tenant, cost centre and pool"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _or_zero(expr: str, like: str) -> str:
    """EXPR where it has data, else 0 for every series of LIKE (a tenant with allocations but no activity)."""
    return f"({expr} or {like} * 0)"


def panel_queries() -> list[tuple[str, str, list[tuple[str, str]], str]]:
    """(title, unit, [(expr, legend)], description) of every panel, in order."""
    alloc_ns = f"sum by (namespace) ({q.NAMESPACE_ALLOC})"
    used_ns = f"sum by (namespace) ({q.NAMESPACE_USED})"
    by_cc = "sum by (cost_center) ({x} * on(namespace) group_left(cost_center) " + q.TENANT_INFO + ")"
    pool_alloc = f"sum by (pool) ({q.POOL_ALLOC})"
    pool_gpus = f"sum by (pool) ({q.POOL_GPUS})"
    return [
        (
            "Granted GPU-equivalents by tenant",
            "none",
            [(f"sum by (namespace) ({q.TENANT_GRANTED})", "{{namespace}}")],
            "What each tenant's quota grants, in GPUs (as written; gpupool plan).",
        ),
        (
            "Allocated GPU-equivalents by tenant",
            "none",
            [(alloc_ns, "{{namespace}}")],
            "GPU requests of running pods, weighted like the chargeback (a MIG instance its layout's share).",
        ),
        (
            "Used GPU-equivalents by tenant",
            "none",
            [(used_ns, "{{namespace}}")],
            "GPU engine activity (DCGM_FI_PROF_GR_ENGINE_ACTIVE) x device weight; a shared device's activity is "
            "split equally among the pods on it.",
        ),
        (
            "Idle allocation by tenant (allocated - used)",
            "none",
            [(f"{alloc_ns} - {_or_zero(used_ns, alloc_ns)}", "{{namespace}}")],
            "GPU-equivalents held by running pods and not used.",
        ),
        (
            "Efficiency by tenant (used / allocated)",
            "percentunit",
            [(f"{used_ns} / {alloc_ns}", "{{namespace}}")],
            "",
        ),
        (
            "Allocated and used GPU-equivalents by cost centre",
            "none",
            [
                (by_cc.format(x=q.NAMESPACE_ALLOC), "allocated {{cost_center}}"),
                (by_cc.format(x=q.NAMESPACE_USED), "used {{cost_center}}"),
            ],
            "",
        ),
        (
            "Pool capacity, allocated and used",
            "none",
            [
                (pool_gpus, "GPUs {{pool}}"),
                (pool_alloc, "allocated {{pool}}"),
                (f"sum by (pool) ({q.POOL_USED})", "used {{pool}}"),
            ],
            "",
        ),
        (
            "Pool utilisation (used / GPUs)",
            "percentunit",
            [(f"sum by (pool) ({q.POOL_USED}) / {pool_gpus}", "{{pool}}")],
            "The baseline utilisation: what pooling is meant to raise.",
        ),
        (
            "Idle capacity by pool (GPUs - allocated)",
            "none",
            [(f"{pool_gpus} - {_or_zero(pool_alloc, pool_gpus)}", "{{pool}}")],
            "GPUs no running pod holds: what pooling could still hand out.",
        ),
    ]


def dashboard() -> dict[str, Any]:
    panels = []
    for i, (title, unit, targets, description) in enumerate(panel_queries()):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "description": description,
                "datasource": dict(DATASOURCE),
                "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "options": {
                    "legend": {
                        "displayMode": "table",
                        "placement": "right",
                        "showLegend": True,
                        "calcs": ["mean", "max"],
                    },
                    "tooltip": {"mode": "multi", "sort": "desc"},
                },
                "targets": [
                    {"refId": chr(ord("A") + j), "datasource": dict(DATASOURCE), "expr": expr, "legendFormat": legend}
                    for j, (expr, legend) in enumerate(targets)
                ],
            }
        )
    return {
        "uid": UID,
        "title": TITLE,
        "tags": ["gpupool", "gpu"],
        "timezone": "browser",
        "editable": False,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-7d", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "hide": 0,
                }
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }
