"""The monitoring block: off by default (dev renders no monitoring object and leaves the exporter as the
operator ships it), on in prod (PrometheusRule, dashboard ConfigMap, exporter configured for attribution),
and the rules' weights are the chargeback's. Every expectation is derived here from the spec and the
exporters' documented facts, not copied from gpupool's output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpupool.k8s import manifests
from gpupool.k8s import monitoring as objects
from gpupool.monitoring import dashboard, promql, rules
from gpupool.rules.engine import load_valid_spec

ROOT = Path(__file__).resolve().parent.parent


def _spec(stack: str):
    return load_valid_spec(ROOT / f"stacks/{stack}/spec.yaml")


def _monitoring_objects(spec):
    return [o for o in manifests.build(spec).objects if o.component == objects.COMPONENT]


def test_dev_has_no_monitoring_and_the_exporter_as_shipped():
    spec = _spec("dev")
    assert not spec.monitoring.enabled
    assert _monitoring_objects(spec) == []
    dcgm = manifests.build(spec).chart.values["dcgmExporter"]
    assert dcgm == {"enabled": True}  # no serviceMonitor, no env: what the chart ships


def test_prod_monitoring_objects():
    spec = _spec("prod")
    objs = {o.kind: o for o in _monitoring_objects(spec)}
    assert set(objs) == {"PrometheusRule", "ConfigMap"}
    rule = objs["PrometheusRule"].manifest
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == spec.cluster.operator.namespace
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"  # the spec's ruleLabels
    assert [g["name"] for g in rule["spec"]["groups"]] == [rules.GROUP_STATIC, rules.GROUP_USAGE, rules.GROUP_ALERTS]
    cm = objs["ConfigMap"].manifest
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # the sidecar's default label
    board = json.loads(cm["data"][objects.DASHBOARD_KEY])
    assert board["uid"] == dashboard.UID and len(board["panels"]) == len(dashboard.panel_queries())


def test_prod_exporter_values_attribute_every_advertised_resource():
    """The exporter maps pods only for nvidia.com/gpu, nvidia.com/mig-* and NVIDIA_RESOURCE_NAMES
    (dcgm-exporter internal/pkg/transformation/kubernetes.go iterateGPUDevices), so prod's renamed
    nvidia.com/gpu.shared must be listed; prod time-slices, so virtual-GPU mode is on; and honorLabels keeps
    `namespace` (the chart's ServiceMonitor default is honorLabels: false)."""
    spec = _spec("prod")
    dcgm = manifests.build(spec).chart.values["dcgmExporter"]
    assert dcgm["serviceMonitor"] == {"enabled": True, "honorLabels": True}
    env = {e["name"]: e["value"] for e in dcgm["env"]}
    unmatched = sorted(
        r for r in spec.advertised_resources() if r != "nvidia.com/gpu" and not r.startswith("nvidia.com/mig-")
    )
    assert unmatched == ["nvidia.com/gpu.shared"]
    assert env == {"KUBERNETES_VIRTUAL_GPUS": "true", "NVIDIA_RESOURCE_NAMES": ",".join(unmatched)}


def test_rule_weights_are_the_chargeback_weights():
    spec = _spec("prod")
    from gpupool.analysis import plan

    p = plan.compute(spec)
    static = rules.static_rules(spec)
    weights = {
        (r["labels"]["pool"], r["labels"]["resource"]): float(r["expr"][len("vector(") : -1])
        for r in static
        if r["record"] == promql.RESOURCE_WEIGHT
    }
    expected = {
        (pool.name, re.sub(r"[^a-zA-Z0-9_]", "_", s.resource)): float(s.gpu_per_unit)
        for pool in p.pools
        for s in pool.supplies
    }
    assert weights == pytest.approx(expected)
    mig = {
        (r["labels"]["pool"], r["labels"]["GPU_I_PROFILE"]): float(r["expr"][len("vector(") : -1])
        for r in static
        if r["record"] == promql.MIG_DEVICE_WEIGHT
    }
    # a device's weight is its unit's times the replicas sharing it (a100-dev time-slices MIG twice)
    assert mig[("a100-dev", "1g.5gb")] == pytest.approx(
        float(p.supply("a100-dev", "nvidia.com/mig-1g.5gb.shared").gpu_per_unit) * 2
    )
    assert mig[("h100-infer", "3g.40gb")] == pytest.approx(0.5)


def test_every_tenant_has_an_info_series_with_its_cost_centre():
    spec = _spec("prod")
    info = [r["labels"] for r in rules.static_rules(spec) if r["record"] == promql.TENANT_INFO]
    assert {(i["namespace"], i["cost_center"]) for i in info} == {
        (t.namespace, t.cost_center or "") for t in spec.tenants
    }


def test_one_overcommit_alert_per_advertised_resource_at_the_spec_policy():
    spec = _spec("prod")
    alerts = [r for r in rules.alert_rules(spec) if r.get("alert") == "GpuQuotaOvercommit"]
    assert {a["labels"]["resource"] for a in alerts} == set(spec.advertised_resources())
    shared = next(a for a in alerts if a["labels"]["resource"] == "nvidia.com/gpu.shared")
    assert "> 1.5 unless" in shared["expr"] and 'resource="nvidia_com_gpu_shared"' in shared["expr"]


def test_dashboard_reads_only_series_the_rules_record():
    recorded = {r["record"] for g in rules.groups(_spec("prod")) for r in g["rules"] if "record" in r}
    for title, _unit, targets, _ in dashboard.panel_queries():
        for expr, _legend in targets:
            names = set(re.findall(r"gpupool:[a-z_]+:[a-z_]+", expr))
            assert names and names <= recorded, (title, names - recorded)


def test_ksm_resource_names():
    # kube-state-metrics internal/store/utils.go: invalidLabelCharRE = [^a-zA-Z0-9_] -> "_"
    assert promql.ksm_resource("nvidia.com/mig-1g.5gb.shared") == "nvidia_com_mig_1g_5gb_shared"
    assert promql.ksm_resource("nvidia.com/gpu") == "nvidia_com_gpu"
