"""gpupool's PrometheusRule, run by Prometheus' own rule engine: `promtool check rules` on the prod rules
and `promtool test rules` unit tests over input series in the exporters' real label formats.

Proves: the rules parse (templates included); the recording rules weigh allocations and activity like the
chargeback (a 3g.40gb of prod's h100-infer 1/2 GPU, a gpu.shared replica of l40s-notebooks 1/8), split a
time-sliced device's activity among its pods instead of summing it, leave a device no pod holds out of
every tenant, and keep the pool's use counted once; every alert fires on the series that should fire it
and stays quiet on a near miss. On the whole prod spec (series generated from it by tests/e2e/alert_series.py:
every node, quotas and Kueue objects as rendered, queueing on, an exporter per node): a healthy cluster fires
no alert at any time, and ten failures each fire the alert meant for it (about 25 s of promtool CPU).

Series formats (no exporter runs here): dcgm-exporter `internal/pkg/rendermetrics/render_metrics.go`
(gpu, UUID, pci_bus_id, device, modelName, GPU_I_PROFILE/GPU_I_ID for MIG, hostname) plus the pod labels
of `internal/pkg/transformation/kubernetes.go` (pod, namespace, container, vgpu in virtual-GPU mode); a
series of a device no pod holds keeps the scrape target's `namespace`/`pod` (the exporter's own), which
honorLabels leaves in place. kube-state-metrics `internal/store/pod.go`, `node.go`, `resourcequota.go`.
Expected values are computed here from the MIG catalog's compute slices and the spec's replicas."""

from __future__ import annotations

import copy
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from gpupool.gpu.mig import catalog
from gpupool.monitoring import alerts, rules
from gpupool.monitoring import promql as q
from gpupool.rules.engine import load_valid_spec

from . import alert_series

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
H100_NODE, L40S_NODE = "prod-h100-infer-1", "l40s-a"
EXPORTER = (
    'job="nvidia-dcgm-exporter", instance="10.0.0.7:9400", service="nvidia-dcgm-exporter", endpoint="gpu-metrics"'
)


def _labels(d: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def _dcgm(metric: str, node: str, uuid: str, model: str, extra: dict[str, str]) -> str:
    base = {"gpu": "0", "UUID": uuid, "pci_bus_id": "00000000:1B:00.0", "device": "nvidia0", "modelName": model}
    base.update(extra)
    base["hostname"] = node
    return metric + _labels(base).rstrip("}") + ", " + EXPORTER + "}"


def _ksm_request(ns: str, pod: str, node: str, resource: str, n: int) -> dict:
    labels = {"namespace": ns, "pod": pod, "uid": f"uid-{pod}", "container": "main", "node": node}
    labels.update(resource=q.ksm_resource(resource), unit="integer")
    return {"series": "kube_pod_container_resource_requests" + _labels(labels), "values": f"{n}x240"}


def _phase(ns: str, pod: str, phase: str) -> list[dict]:
    out = []
    for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
        labels = {"namespace": ns, "pod": pod, "uid": f"uid-{pod}", "phase": p}
        out.append({"series": "kube_pod_status_phase" + _labels(labels), "values": f"{int(p == phase)}x240"})
    return out


@pytest.fixture(scope="module")
def prod():
    return load_valid_spec(REPO / "stacks/prod/spec.yaml")


@pytest.fixture(scope="module")
def rule_file(prod, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("rules")
    path = d / "gpupool-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rules.groups(prod)}, sort_keys=False))
    return path


def _promtool(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_dir / "promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_promtool_checks_the_prod_rules(prometheus_bin, rule_file):
    p = _promtool(prometheus_bin, "check", "rules", str(rule_file), cwd=rule_file.parent)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def _h100_weight(profile_3g: str = "3g.40gb") -> Fraction:
    """3g.40gb in prod's h100-infer layout {3g.40gb: 2}: the GPU split by compute slices, 3 / (3 + 3)."""
    h100 = catalog().resolve("H100-80GB")
    assert h100 is not None
    c = h100.profiles[profile_3g].compute
    return Fraction(c, 2 * c)


def test_promtool_unit_tests(prometheus_bin, prod, rule_file):
    replicas = next(p for p in prod.pools if p.name == "l40s-notebooks").sharing.replicas
    w3g = float(_h100_weight())
    replica = 1 / replicas
    busy_search, busy_nb = 0.8, 0.6
    series = [
        {"series": f'kube_node_labels{{node="{H100_NODE}", {q.NODE_POOL_LABEL}="h100-infer"}}', "values": "1x240"},
        {"series": f'kube_node_labels{{node="{L40S_NODE}", {q.NODE_POOL_LABEL}="l40s-notebooks"}}', "values": "1x240"},
        # search holds one 3g.40gb; notebooks two time-sliced replicas of one L40S; ads a pod that stays pending
        _ksm_request("search", "s-0", H100_NODE, "nvidia.com/mig-3g.40gb", 1),
        *_phase("search", "s-0", "Running"),
        _ksm_request("notebooks", "nb-0", L40S_NODE, "nvidia.com/gpu.shared", 1),
        *_phase("notebooks", "nb-0", "Running"),
        _ksm_request("notebooks", "nb-1", L40S_NODE, "nvidia.com/gpu.shared", 1),
        *_phase("notebooks", "nb-1", "Running"),
        _ksm_request("ads", "a-0", "", "nvidia.com/gpu", 1),
        *_phase("ads", "a-0", "Pending"),
        # the exporter: search's MIG instance 0.8 busy; the shared L40S 0.6 busy, copied to both pods (vgpu);
        # a second MIG instance nobody holds (the target's namespace/pod stay on it)
        {
            "series": _dcgm(
                q.GR_ENGINE_ACTIVE,
                H100_NODE,
                "GPU-h100-0",
                "NVIDIA H100 80GB HBM3",
                {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1", "pod": "s-0", "namespace": "search", "container": "main"},
            ),
            "values": f"{busy_search}x240",
        },
        {
            "series": _dcgm(
                q.GR_ENGINE_ACTIVE,
                H100_NODE,
                "GPU-h100-0",
                "NVIDIA H100 80GB HBM3",
                {
                    "GPU_I_PROFILE": "3g.40gb",
                    "GPU_I_ID": "2",
                    "namespace": "gpu-operator",
                    "pod": "nvidia-dcgm-exporter-x1",
                },
            ),
            "values": "0x240",
        },
        *[
            {
                "series": _dcgm(
                    q.GR_ENGINE_ACTIVE,
                    L40S_NODE,
                    "GPU-l40s-0",
                    "NVIDIA L40S",
                    {"pod": pod, "namespace": "notebooks", "container": "main", "vgpu": str(i)},
                ),
                "values": f"{busy_nb}x240",
            }
            for i, pod in enumerate(("nb-0", "nb-1"))
        ],
        # MIG Manager: one node failed
        {"series": f'kube_node_labels{{node="n-failed", {q.MIG_STATE_LABEL}="failed"}}', "values": "1x240"},
    ]
    # an idle pod: search's second pod holds a 3g.40gb at 1% for the whole test
    series += [
        _ksm_request("search", "s-1", H100_NODE, "nvidia.com/mig-3g.40gb", 1),
        *_phase("search", "s-1", "Running"),
        {
            "series": _dcgm(
                q.GR_ENGINE_ACTIVE,
                H100_NODE,
                "GPU-h100-1",
                "NVIDIA H100 80GB HBM3",
                {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1", "pod": "s-1", "namespace": "search", "container": "main"},
            ),
            "values": "0.01x240",
        },
        # its GPU's other 3g.40gb, idle and held by nobody: the exporter reports every instance of a GPU, and
        # an instance is weighed by the slices present on its own GPU (gpupool.monitoring.promql.weighted_active)
        {
            "series": _dcgm(
                q.GR_ENGINE_ACTIVE,
                H100_NODE,
                "GPU-h100-1",
                "NVIDIA H100 80GB HBM3",
                {
                    "GPU_I_PROFILE": "3g.40gb",
                    "GPU_I_ID": "2",
                    "namespace": "gpu-operator",
                    "pod": "nvidia-dcgm-exporter-x1",
                },
            ),
            "values": "0x240",
        },
    ]
    alloc = f'{q.POD_ALLOC}{{namespace="search", pod="s-0"}}'
    exprs = [
        (
            alloc,
            [
                (
                    {
                        "namespace": "search",
                        "pod": "s-0",
                        "node": H100_NODE,
                        "pool": "h100-infer",
                        "resource": "nvidia_com_mig_3g_40gb",
                    },
                    w3g,
                )
            ],
        ),
        (
            f'{q.NAMESPACE_ALLOC}{{namespace="notebooks"}}',
            [({"namespace": "notebooks", "pool": "l40s-notebooks"}, 2 * replica)],
        ),
        (
            f'{q.POD_USED}{{namespace="search", pod="s-0"}}',
            [({"namespace": "search", "pod": "s-0", "pool": "h100-infer"}, busy_search * w3g)],
        ),
        # the shared L40S: 0.6 busy split over its two pods, so the namespace gets 0.6, not 1.2
        (
            f'{q.POD_USED}{{namespace="notebooks"}}',
            [
                ({"namespace": "notebooks", "pod": "nb-0", "pool": "l40s-notebooks"}, busy_nb / 2),
                ({"namespace": "notebooks", "pod": "nb-1", "pool": "l40s-notebooks"}, busy_nb / 2),
            ],
        ),
        (
            f'{q.NAMESPACE_USED}{{namespace="notebooks"}}',
            [({"namespace": "notebooks", "pool": "l40s-notebooks"}, busy_nb)],
        ),
        (f'{q.POOL_USED}{{pool="l40s-notebooks"}}', [({"pool": "l40s-notebooks"}, busy_nb)]),
        (f'{q.POOL_USED}{{pool="h100-infer"}}', [({"pool": "h100-infer"}, (busy_search + 0.01) * w3g)]),
        # the exporter's own namespace owns no usage
        (f'{q.POD_USED}{{namespace="gpu-operator"}}', []),
        (f'{q.POOL_GPUS}{{pool="h100-infer"}}', [({"pool": "h100-infer"}, 32)]),
    ]

    def sample(name_selector: str, labels: dict[str, str], value: float) -> dict:
        name = name_selector.split("{")[0]
        return {"labels": name + _labels(labels), "value": value}

    alerts = [
        (
            "3h",
            "GpuAllocatedButIdle",
            [
                {
                    "namespace": "search",
                    "pod": "s-1",
                    "pool": "h100-infer",
                    "tenant": "search",
                    "cost_center": "cc-1000",
                    "severity": "warning",
                }
            ],
        ),
        ("1h", "GpuAllocatedButIdle", []),  # idle, but not yet for idleFor (2h) after the 1h average
        ("40m", "GpuPodsPending", [{"namespace": "ads", "pod": "a-0", "severity": "warning"}]),
        ("20m", "GpuPodsPending", []),
        ("10m", "MigConfigFailed", [{"node": "n-failed", "severity": "critical"}]),
    ]
    # Annotations are templates checked by `promtool check rules`; compared here only for MigConfigFailed.
    test_rules = copy.deepcopy(rules.groups(prod))
    for group in test_rules:
        for r in group["rules"]:
            if "alert" in r and r["alert"] != "MigConfigFailed":
                r.pop("annotations", None)
    d = Path(rule_file.parent)
    (d / "unit-rules.yaml").write_text(yaml.safe_dump({"groups": test_rules}, sort_keys=False))
    failed_description = next(
        r["annotations"]["description"] for g in test_rules for r in g["rules"] if r.get("alert") == "MigConfigFailed"
    ).replace("{{ $labels.node }}", "n-failed")
    test = {
        "rule_files": ["unit-rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": e, "eval_time": "10m", "exp_samples": [sample(e, lab, v) for lab, v in exp]}
                    for e, exp in exprs
                ],
                "alert_rule_test": [
                    {
                        "eval_time": t,
                        "alertname": name,
                        "exp_alerts": [
                            {
                                "exp_labels": lab,
                                **(
                                    {
                                        "exp_annotations": {
                                            "summary": "MIG Manager failed to apply a MIG layout",
                                            "description": failed_description,
                                            "runbook_url": "docs/explanation/monitoring.md#migconfigfailed",
                                        }
                                    }
                                    if name == "MigConfigFailed"
                                    else {}
                                ),
                            }
                            for lab in exp
                        ],
                    }
                    for t, name, exp in alerts
                ],
            }
        ],
    }
    (d / "unit-test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = _promtool(prometheus_bin, "test", "rules", "unit-test.yaml", cwd=d)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


# -- the alerts on a whole prod cluster: quiet when healthy, each failure firing its own ------------------------


def _run_alert_tests(prometheus_bin: Path, prod, d: Path, groups: list[dict]) -> None:
    # Annotations are templates, checked by `promtool check rules` above and tests/test_monitoring_alerts.py.
    groups_ = copy.deepcopy(rules.groups(prod))
    for group in groups_:
        for r in group["rules"]:
            r.pop("annotations", None)
    (d / "alert-rules.yaml").write_text(yaml.safe_dump({"groups": groups_}, sort_keys=False))
    test = {"rule_files": ["alert-rules.yaml"], "evaluation_interval": alert_series.INTERVAL, "tests": groups}
    (d / "alert-test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = _promtool(prometheus_bin, "test", "rules", "alert-test.yaml", cwd=d)
    assert p.returncode == 0, p.stdout[-20000:] + p.stderr[-5000:]


def _group(c: alert_series.Cluster, checks: list[tuple[str, str, list[dict[str, str]]]]) -> dict:
    return {
        "interval": alert_series.INTERVAL,
        "input_series": c.input_series(),
        "alert_rule_test": [
            {"eval_time": t, "alertname": n, "exp_alerts": [{"exp_labels": x} for x in exp]} for t, n, exp in checks
        ],
    }


ALERTS = {
    "GpuAllocatedButIdle",
    "GpuQuotaAlmostFull",
    "GpuPodsPending",
    "KueueWorkloadsPending",
    "KueueClusterQueueInactive",
    "GpuQuotaOvercommit",
    "GpuQueueQuotaOvercommit",
    "GpuPoolNodesMissing",
    "MigConfigFailed",
    "MigConfigStuck",
    "GpuXidHardwareError",
    "GpuXidApplicationError",
    "GpuExporterMissing",
}


def test_a_healthy_prod_cluster_fires_no_alert(prometheus_bin, prod, tmp_path):
    """Every node of the prod spec with its exporter, quotas and ClusterQueues as rendered, queueing on, one busy
    pod per tenant, and what a real cluster keeps for good (gpupool's own `pending` MIG state on an uncordoned
    node, XIDs from before the window, the offboarded tenant's stopped ClusterQueue): no alert fires at any time.
    The same data fired GpuQuotaOvercommit before: rendered quotas are Kueue's admission ceilings."""
    assert set(alerts.alert_names(prod)) == ALERTS
    c = alert_series.healthy(prod)
    # what made the quota-based overcommit alert fire here: nvidia.com/gpu quotas add up to more than exists
    hard = sum(
        int(v.split("x")[0])
        for k, v in c.series.items()
        if k.startswith(q.QUOTA) and 'resource="requests.nvidia.com/gpu"' in k and 'type="hard"' in k
    )
    whole_gpus = sum(p.gpus_per_node * p.node_count for p in prod.pools if p.sharing.kind == "none")
    assert hard > whole_gpus
    checks = [(t, name, []) for t in ("30m", "1h10m", "3h10m") for name in sorted(ALERTS)]
    _run_alert_tests(prometheus_bin, prod, tmp_path, [_group(c, checks)])


def _set(c: alert_series.Cluster, contains: tuple[str, ...], values: str) -> None:
    keys = [k for k in c.series if all(s in k for s in contains)]
    assert keys, contains
    for k in keys:
        c.series[k] = values


def _node_state(c: alert_series.Cluster, node: str, state: str, cordoned: bool) -> None:
    old = next(k for k in c.series if k.startswith(q.NODE_LABELS + "{") and f'node="{node}"' in k)
    del c.series[old]
    c.series[old.replace('="success"', f'="{state}"').replace('="pending"', f'="{state}"')] = alert_series.const(1)
    c.series[f'kube_node_spec_unschedulable{{node="{node}"}}'] = alert_series.const(int(cordoned))


def _lost_node(prod, c):
    """A h100-train node is gone (its every series): the whole-GPU grants exceed what is left."""
    granted = sum(t.gpus.get("nvidia.com/gpu", 0) for t in prod.active_tenants)
    left = sum(p.gpus_per_node * p.node_count for p in prod.pools if p.sharing.kind == "none") - 8
    assert granted > left  # 80 granted, 72 left: the spec's maxRatio is 1
    assert c.drop(lambda k: '"h100-train-1"' in k) > 0
    return [
        ("10m", "GpuQuotaOvercommit", []),
        ("30m", "GpuQuotaOvercommit", [{"resource": "nvidia.com/gpu", "severity": "warning"}]),
        ("30m", "GpuPoolNodesMissing", [{"pool": "h100-train", "severity": "warning"}]),
        ("30m", "GpuExporterMissing", []),  # a node that is gone has no exporter to miss
    ]


def _half_mig_layout(prod, c):
    """h100-infer's nodes advertise half their 3g.40gb (a layout half applied): the rendered nominal quotas
    (ads 12 + search 20) and the grants no longer fit."""
    nominal = alert_series.rendered_nominal(prod)[("h100-infer", "nvidia.com/mig-3g.40gb")]
    assert nominal == 32 and nominal > 4 * 4
    _set(c, (q.ALLOCATABLE + "{", 'resource="nvidia_com_mig_3g_40gb"'), alert_series.const(4))
    exp = [{"pool": "h100-infer", "resource": "nvidia_com_mig_3g_40gb", "severity": "warning"}]
    return [
        ("10m", "GpuQueueQuotaOvercommit", []),
        ("30m", "GpuQueueQuotaOvercommit", exp),
        ("30m", "GpuQuotaOvercommit", [{"resource": "nvidia.com/mig-3g.40gb", "severity": "warning"}]),
    ]


def _whole_grant(prod, c):
    """search uses all 20 of its 3g.40gb grant; its rendered quota (Kueue's ceiling, 32) is far from full."""
    key = 'namespace="search", resourcequota="gpu-quota", resource="requests.nvidia.com/mig-3g.40gb"'
    hard = int(c.series[f'{q.QUOTA}{{{key}, type="hard"}}'].split("x")[0])
    assert 20 / hard < 0.9  # what the quota-based alert read
    c.series[f'{q.QUOTA}{{{key}, type="used"}}'] = alert_series.const(20)
    exp = {"namespace": "search", "resource": "nvidia.com/mig-3g.40gb", "tenant": "search", "severity": "info"}
    return [("10m", "GpuQuotaAlmostFull", []), ("30m", "GpuQuotaAlmostFull", [exp])]


def _pending_pod(prod, c):
    lab = {"namespace": "ads", "pod": "ads-9", "uid": "uid-ads-9", "container": "main", "node": ""}
    c.put(q.REQUESTS, {**lab, "resource": "nvidia_com_gpu", "unit": "integer"}, alert_series.const(1))
    for phase in ("Pending", "Running"):
        c.put(
            q.PHASE,
            {"namespace": "ads", "pod": "ads-9", "uid": "uid-ads-9", "phase": phase},
            alert_series.const(int(phase == "Pending")),
        )
    exp = [{"namespace": "ads", "pod": "ads-9", "severity": "warning"}]
    return [("20m", "GpuPodsPending", []), ("40m", "GpuPodsPending", exp)]


def _queued_work(prod, c):
    _set(c, ("kueue_pending_workloads{", '"llm-training"', '"inadmissible"'), alert_series.const(3))
    exp = [{"cluster_queue": "llm-training", "namespace": "llm-training", "severity": "warning"}]
    return [("20m", "KueueWorkloadsPending", []), ("40m", "KueueWorkloadsPending", exp)]


def _inactive_queue(prod, c):
    _set(c, ("kueue_cluster_queue_status{", '"vision"', 'status="active"'), alert_series.const(0))
    _set(c, ("kueue_cluster_queue_status{", '"vision"', 'status="pending"'), alert_series.const(1))
    exp = [{"cluster_queue": "vision", "namespace": "vision", "severity": "warning"}]
    return [("10m", "KueueClusterQueueInactive", []), ("20m", "KueueClusterQueueInactive", exp)]


def _mig_failed(prod, c):
    _node_state(c, "prod-h100-infer-2", "failed", cordoned=True)
    return [("10m", "MigConfigFailed", [{"node": "prod-h100-infer-2", "severity": "critical"}])]


def _mig_stuck(prod, c):
    """A100 node 2 cordoned in `pending` with its exporter and device plugin paused (MIG Manager at work), H100
    node 3 rebooting: stuck once the rollout's 30m node deadline and migStuckFor (30m) have passed, and
    meanwhile no GpuExporterMissing for the paused exporter nor overcommit for the capacity they hold back."""
    timeout = max(p.rollout.node_timeout_seconds for p in prod.pools if p.sharing.mig)
    assert timeout == 1800 and prod.monitoring.alerts.mig_stuck_for == "30m"
    _node_state(c, "prod-a100-dev-2", "pending", cordoned=True)
    _node_state(c, "prod-h100-infer-3", "rebooting", cordoned=True)
    assert c.drop(lambda k: k.startswith(q.GR_ENGINE_ACTIVE) and '"prod-a100-dev-2"' in k) > 0
    # both advertise nothing meanwhile (MIG Manager pauses the device plugin): a100-dev's 3g.20gb and
    # h100-infer's 3g.40gb nominal quotas equal their pools' capacity, so this is below what Kueue holds
    for node in ("prod-a100-dev-2", "prod-h100-infer-3"):
        _set(c, (q.ALLOCATABLE + "{", f'node="{node}"'), alert_series.const(0))
    exp = [{"node": n, "severity": "warning"} for n in ("prod-a100-dev-2", "prod-h100-infer-3")]
    return [
        ("56m", "MigConfigStuck", []),
        ("64m", "MigConfigStuck", exp),
        ("40m", "GpuExporterMissing", []),
        ("40m", "GpuQuotaOvercommit", []),  # a re-layout under way is not drift
        ("40m", "GpuQueueQuotaOvercommit", []),
    ]


def _xids(prod, c):
    """A B200 reports XID 79 at minute 30 (hardware), another GPU XID 13 (a program's fault): each alerts as
    what it is, and the hardware one resolves an hour later although the gauge keeps 79."""
    b200 = next(p for p in prod.pools if p.name == "b200-train")
    c.series[alert_series.xid_key("prod-b200-2", 5, b200.gpu_model)] = "0x14 79x85"  # 79 from minute 30
    c.series[alert_series.xid_key("prod-b200-2", 6, b200.gpu_model)] = "0x14 13x85"
    gpu = {"node": "prod-b200-2", "modelName": b200.gpu_model}
    hw = {**gpu, "gpu": "5", "UUID": "GPU-prod-b200-2-5", "severity": "critical"}
    app = {**gpu, "gpu": "6", "UUID": "GPU-prod-b200-2-6", "severity": "info"}
    return [
        ("20m", "GpuXidHardwareError", []),
        ("40m", "GpuXidHardwareError", [hw]),
        ("40m", "GpuXidApplicationError", [app]),
        ("1h20m", "GpuXidHardwareError", [hw]),
        ("2h", "GpuXidHardwareError", []),
        ("1h", "GpuXidApplicationError", []),
    ]


def _exporter_gone(prod, c):
    assert c.drop(lambda k: k.startswith("DCGM_") and '"prod-b200-1"' in k) > 0
    exp = [{"node": "prod-b200-1", "pool": "b200-train", "severity": "warning"}]
    return [("10m", "GpuExporterMissing", []), ("30m", "GpuExporterMissing", exp)]


FAILURES = (
    _lost_node,
    _half_mig_layout,
    _whole_grant,
    _pending_pod,
    _queued_work,
    _inactive_queue,
    _mig_failed,
    _mig_stuck,
    _xids,
    _exporter_gone,
)


def test_each_failure_fires_its_alert(prometheus_bin, prod, tmp_path):
    """The healthy prod cluster above, broken one way at a time: each failure fires the alert meant for it
    (labels exact), not before its `for`, and the XID alerts resolve after their window. Together with
    test_promtool_unit_tests (GpuAllocatedButIdle), every alert fires here."""
    groups, fired = [], set()
    for failure in FAILURES:
        c = alert_series.healthy(prod)
        checks = failure(prod, c)
        fired |= {name for _, name, exp in checks if exp}
        groups.append(_group(c, checks))
    assert fired == ALERTS - {"GpuAllocatedButIdle"}
    _run_alert_tests(prometheus_bin, prod, tmp_path, groups)


# -- DRA pools: claims' devices charged like requests -----------------------------------------------------------


def _claim_series(ns: str, claim: str, node: str, devices: list[str], pod: str) -> list[dict]:
    """kube-state-metrics' resourceclaim series (internal/store/resourceclaim.go): one allocation_device_info per
    allocated device (the driver's pool is the node: dra-driver-nvidia-gpu v0.4.1 driver.go 474-486) and one
    status_reserved_for per consumer."""
    base = {"namespace": ns, "resourceclaim": claim}
    out = [
        {
            "series": q.CLAIM_DEVICES
            + _labels({**base, "request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d}),
            "values": "1x240",
        }
        for d in devices
    ]
    consumer = {
        "consumer_apigroup": "",
        "consumer_resource": "pods",
        "consumer_name": pod,
        "consumer_uid": f"uid-{pod}",
    }
    out.append({"series": q.CLAIM_CONSUMERS + _labels({**base, **consumer}), "values": "1x240"})
    return out


def test_dra_claims_are_charged_like_requests(prometheus_bin, tmp_path):
    """stacks/dra's A100 pool serves MIG devices through DRA. A pod holding two 1g.10gb devices through a claim of
    its own (no GPU request) is charged 2 x 1/7 GPU, as two requests of nvidia.com/mig-1g.10gb would be; a pod
    asking nvidia.com/mig-3g.40gb: 1, whose device came through the claim kube-scheduler made for it, is charged
    3/7 once (by its request, not again by its claim); a claim of a pod that is not running is not charged.
    Weights from the MIG catalog's compute slices of NVIDIA's all-balanced A100-80GB layout (2 x 1g + 2g + 3g)."""
    spec = load_valid_spec(REPO / "stacks/dra/spec.yaml")
    a100 = catalog().resolve("A100-80GB")
    assert a100 is not None
    slices = {p: a100.profiles[p].compute for p in ("1g.10gb", "2g.20gb", "3g.40gb")}
    per_gpu = 2 * slices["1g.10gb"] + slices["2g.20gb"] + slices["3g.40gb"]
    # the rules write weights with 12 significant digits (rules._num)
    w1g, w3g = (float(f"{slices[p] / per_gpu:.12g}") for p in ("1g.10gb", "3g.40gb"))
    node = "dev-gpu-a100-1"
    series = [
        {"series": f'kube_node_labels{{node="{node}", {q.NODE_POOL_LABEL}="a100-mig"}}', "values": "1x240"},
        *_claim_series("notebooks", "nb-0-gpu-x7k", node, ["gpu-0-mig-1g10gb-19-2", "gpu-1-mig-1g10gb-19-3"], "nb-0"),
        *_phase("notebooks", "nb-0", "Running"),
        _ksm_request("inference", "inf-0", node, "nvidia.com/mig-3g.40gb", 1),
        *_claim_series("inference", "inf-0-extended-resources-abc", node, ["gpu-2-mig-3g40gb-9-4"], "inf-0"),
        *_phase("inference", "inf-0", "Running"),
        *_claim_series("notebooks", "nb-done-gpu-q2w", node, ["gpu-3-mig-1g10gb-19-2"], "nb-done"),
        *_phase("notebooks", "nb-done", "Succeeded"),
    ]
    exprs = [
        (
            f'{q.POD_ALLOC}{{namespace="notebooks"}}',
            [({"namespace": "notebooks", "pod": "nb-0", "node": node, "pool": "a100-mig",
               "resource": "nvidia_com_mig_1g_10gb"}, 2 * w1g)],
        ),
        (
            f'{q.POD_ALLOC}{{namespace="inference"}}',
            [({"namespace": "inference", "pod": "inf-0", "node": node, "pool": "a100-mig",
               "resource": "nvidia_com_mig_3g_40gb"}, w3g)],
        ),
        (f'{q.POOL_ALLOC}{{pool="a100-mig"}}', [({"pool": "a100-mig"}, 2 * w1g + w3g)]),
    ]  # fmt: skip
    groups = [g for g in rules.groups(spec) if g["name"] != rules.GROUP_ALERTS]
    (tmp_path / "dra-rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    test = {
        "rule_files": ["dra-rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": e,
                        "eval_time": "10m",
                        "exp_samples": [{"labels": e.split("{")[0] + _labels(lab), "value": v} for lab, v in exp],
                    }
                    for e, exp in exprs
                ],
            }
        ],
    }
    (tmp_path / "dra-test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    p = _promtool(prometheus_bin, "test", "rules", "dra-test.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
