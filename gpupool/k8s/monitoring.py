"""The monitoring block's desired objects and its DCGM exporter values (docs/monitoring.md).

With `monitoring.enabled` (off by default: the PrometheusRule needs the Prometheus Operator's CRDs):
- the GPU Operator's DCGM exporter is configured for attribution (`dcgm_exporter_values`),
- a PrometheusRule `gpupool` carries the recording rules and alerts (gpupool.monitoring.rules),
- a ConfigMap `gpupool-dashboard` carries the Grafana dashboard for the dashboard sidecar.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from gpupool.model import platform as m
from gpupool.monitoring import dashboard, rules

if TYPE_CHECKING:
    from gpupool.k8s.manifests import Desired

COMPONENT = "monitoring"
RULE_NAME = "gpupool"
DASHBOARD_CONFIGMAP = "gpupool-dashboard"
DASHBOARD_KEY = "gpupool-usage.json"
VIRTUAL_GPUS_ENV = "KUBERNETES_VIRTUAL_GPUS"  # dcgm-exporter pkg/cmd/app.go CLIKubernetesVirtualGPUs
RESOURCE_NAMES_ENV = "NVIDIA_RESOURCE_NAMES"  # ... CLINvidiaResourceNames


def namespace(spec: m.Spec) -> str:
    return spec.monitoring.namespace or spec.cluster.operator.namespace


def dcgm_exporter_env(spec: m.Spec) -> dict[str, str]:
    """What the exporter needs to attribute every GPU resource gpupool advertises (dcgm-exporter source):

    - it maps devices to pods only for `nvidia.com/gpu`, `nvidia.com/mig-*` and the names listed in
      NVIDIA_RESOURCE_NAMES (transformation/kubernetes.go `iterateGPUDevices`), so a renamed
      `nvidia.com/gpu.shared` must be listed;
    - without virtual-GPU mode a time-sliced device maps to one of its pods only; KUBERNETES_VIRTUAL_GPUS
      gives every pod sharing it a series (`toDeviceToSharingPods`)."""
    env: dict[str, str] = {}
    if any(p.sharing.software_shared for p in spec.pools):
        env[VIRTUAL_GPUS_ENV] = "true"
    extra = sorted(
        {r for p in spec.pools for r in p.resources_per_node() if not r.startswith(m.MIG_PREFIX) and r != m.GPU}
    )
    if extra:
        env[RESOURCE_NAMES_ENV] = ",".join(extra)
    return env


def dcgm_exporter_values(spec: m.Spec) -> dict[str, Any]:
    """GPU Operator chart values for the exporter (deployments/gpu-operator/values.yaml, v26.7.0):
    honorLabels so Prometheus keeps the exporter's `namespace`/`pod` instead of renaming them
    `exported_namespace`/`exported_pod` (the chart's default is false). The default collectors file
    (dcp-metrics-included.csv) already has DCGM_FI_PROF_GR_ENGINE_ACTIVE and DCGM_FI_DEV_XID_ERRORS."""
    if not spec.monitoring.enabled:
        return {}
    env = [{"name": k, "value": v} for k, v in dcgm_exporter_env(spec).items()]
    values: dict[str, Any] = {"serviceMonitor": {"enabled": True, "honorLabels": True}}
    if env:
        values["env"] = env
    return values


def rule_manifest(spec: m.Spec) -> dict[str, Any]:
    from gpupool.k8s.manifests import MANAGED_BY

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
    from gpupool.k8s.manifests import MANAGED_BY

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
    from gpupool.k8s.manifests import Desired

    if not spec.monitoring.enabled:
        return []
    return [
        Desired(COMPONENT, "monitoring-rules", rule_manifest(spec), depends_on=after),
        Desired(COMPONENT, "monitoring-dashboard", dashboard_manifest(spec), depends_on=after),
    ]
