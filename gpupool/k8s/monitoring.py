"""The monitoring block's desired objects and its DCGM exporter values (docs/explanation/monitoring.md), built beside
the tenants' and the Kueue objects (gpupool.k8s.manifests registers them).

With `monitoring.enabled` (off by default: the PrometheusRule needs the Prometheus Operator's CRDs):
- the GPU Operator's DCGM exporter is configured for attribution (`dcgm_exporter_values`),
- a PrometheusRule `gpupool` carries the recording rules and alerts (gpupool.monitoring.rules),
- a ConfigMap `gpupool-dashboard` carries the Grafana dashboard for the dashboard sidecar.
"""

from __future__ import annotations

import json
from typing import Any

from gpupool.gpu import dcgm_exporter
from gpupool.k8s.desired import MANAGED_BY, Desired
from gpupool.model import platform as m
from gpupool.monitoring import dashboard, rules

COMPONENT = "monitoring"
RULE_NAME = "gpupool"
DASHBOARD_CONFIGMAP = "gpupool-dashboard"
DASHBOARD_KEY = "gpupool-usage.json"


def namespace(spec: m.Spec) -> str:
    return spec.monitoring.namespace or spec.cluster.operator.namespace


def dcgm_exporter_env(spec: m.Spec) -> dict[str, str]:
    """What the exporter needs to attribute every GPU resource gpupool advertises
    (gpupool.gpu.dcgm_exporter.attribution_env): virtual-GPU mode where a pool time-slices or runs MPS, and
    every advertised name that is neither `nvidia.com/gpu` nor a MIG device."""
    return dcgm_exporter.attribution_env(
        any(p.sharing.software_shared for p in spec.pools),
        (r for p in spec.pools for r in p.resources_per_node() if not r.startswith(m.MIG_PREFIX) and r != m.GPU),
    )


def dcgm_exporter_values(spec: m.Spec) -> dict[str, Any]:
    """GPU Operator chart values for the exporter (deployments/gpu-operator/values.yaml, v26.7.0):
    honorLabels so Prometheus keeps the exporter's `namespace`/`pod` instead of renaming them
    `exported_namespace`/`exported_pod` (the chart's default is false); hostPID with virtual-GPU mode
    (gpupool.gpu.dcgm_exporter.needs_host_pid). The default collectors file
    (dcp-metrics-included.csv) already has DCGM_FI_PROF_GR_ENGINE_ACTIVE and DCGM_FI_DEV_XID_ERRORS."""
    if not spec.monitoring.enabled:
        return {}
    exporter_env = dcgm_exporter_env(spec)
    env = [{"name": k, "value": v} for k, v in exporter_env.items()]
    values: dict[str, Any] = {"serviceMonitor": {"enabled": True, "honorLabels": True}}
    if env:
        values["env"] = env
    if dcgm_exporter.needs_host_pid(exporter_env):
        # Virtual-GPU mode makes GPU_UTIL / FB_USED per process for every GPU pod; without the host's PIDs
        # they read 0 for everyone else reading them (NVIDIA's dashboard, Kubecost, HPAs): docs/explanation/monitoring.md.
        values[dcgm_exporter.HOST_PID_VALUE] = True
    return values


def rule_manifest(spec: m.Spec) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": RULE_NAME,
            "namespace": namespace(spec),
            "labels": {**dict(spec.monitoring.rule_labels), **MANAGED_BY},
        },
        "spec": {"groups": rules.groups(spec)},
    }


def dashboard_manifest(spec: m.Spec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": DASHBOARD_CONFIGMAP,
            "namespace": namespace(spec),
            "labels": {**dict(spec.monitoring.dashboard_labels), **MANAGED_BY},
        },
        "data": {DASHBOARD_KEY: json.dumps(dashboard.dashboard(), indent=2, sort_keys=False) + "\n"},
    }


def objects(spec: m.Spec, after: tuple[str, ...] = ()) -> list[Desired]:
    """The monitoring component's objects; none while monitoring is off."""
    if not spec.monitoring.enabled:
        return []
    return [
        Desired(COMPONENT, "monitoring-rules", rule_manifest(spec), depends_on=after),
        Desired(COMPONENT, "monitoring-dashboard", dashboard_manifest(spec), depends_on=after),
    ]
