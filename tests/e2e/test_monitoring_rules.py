"""gpupool's PrometheusRule, run by Prometheus' own rule engine: `promtool check rules` on the prod rules
and `promtool test rules` unit tests over input series in the exporters' real label formats.

Proves: the rules parse (templates included); the recording rules weigh allocations and activity like the
chargeback (a 3g.40gb of prod's h100-infer 1/2 GPU, a gpu.shared replica of l40s-notebooks 1/8), split a
time-sliced device's activity among its pods instead of summing it, leave a device no pod holds out of
every tenant, and keep the pool's use counted once; every alert fires on the series that should fire it
and stays quiet on a near miss.

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
from gpupool.monitoring import promql as q
from gpupool.monitoring import rules
from gpupool.rules.engine import load_valid_spec

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
        {
            "series": _dcgm(q.XID_ERRORS, L40S_NODE, "GPU-l40s-0", "NVIDIA L40S", {}),
            "values": "0x10 79x229",
        },
        # MIG Manager: one node failed, one stuck pending, one that finished after 20m (no alert)
        {"series": f'kube_node_labels{{node="n-failed", {q.MIG_STATE_LABEL}="failed"}}', "values": "1x240"},
        {"series": f'kube_node_labels{{node="n-stuck", {q.MIG_STATE_LABEL}="pending"}}', "values": "1x240"},
        {"series": f'kube_node_labels{{node="n-quick", {q.MIG_STATE_LABEL}="pending"}}', "values": "1x20 _x219"},
        # quotas: search uses 19 of 20 3g.40gb (alert), notebooks 150 of 200 gpu.shared (no alert)
        *[
            {
                "series": f'kube_resourcequota{{namespace="{ns}", resourcequota="gpu-quota", resource="requests.{r}", type="{t}"}}',
                "values": f"{v}x240",
            }
            for ns, r, used, hard in (
                ("search", "nvidia.com/mig-3g.40gb", 19, 20),
                ("notebooks", "nvidia.com/gpu.shared", 150, 200),
            )
            for t, v in (("used", used), ("hard", hard))
        ],
        # overcommit drift: nvidia.com/gpu quotas add up to 80; the nodes advertise 72 (one node is gone)
        {
            "series": 'kube_resourcequota{namespace="llm-training", resourcequota="gpu-quota", resource="requests.nvidia.com/gpu", type="hard"}',
            "values": "80x240",
        },
        {
            "series": 'kube_node_status_allocatable{node="a", resource="nvidia_com_gpu", unit="integer"}',
            "values": "72x240",
        },
        # gpu.shared: notebooks' 200 + experiments' 80 = 280 promised on 192, within prod's 1.5x (no alert)
        {
            "series": 'kube_resourcequota{namespace="experiments", resourcequota="gpu-quota", resource="requests.nvidia.com/gpu.shared", type="hard"}',
            "values": "80x240",
        },
        {
            "series": 'kube_node_status_allocatable{node="l40s-a", resource="nvidia_com_gpu_shared", unit="integer"}',
            "values": "192x240",
        },
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
        (
            "30m",
            "GpuQuotaAlmostFull",
            [{"namespace": "search", "resource": "requests.nvidia.com/mig-3g.40gb", "severity": "info"}],
        ),
        ("30m", "GpuQuotaOvercommit", [{"resource": "nvidia.com/gpu", "severity": "warning"}]),
        ("40m", "GpuPodsPending", [{"namespace": "ads", "pod": "a-0", "severity": "warning"}]),
        ("20m", "GpuPodsPending", []),
        ("10m", "MigConfigFailed", [{"node": "n-failed", "severity": "critical"}]),
        ("40m", "MigConfigStuck", [{"node": "n-stuck", "severity": "warning"}]),
        (
            "20m",
            "GpuXidErrors",
            [{"node": L40S_NODE, "gpu": "0", "UUID": "GPU-l40s-0", "modelName": "NVIDIA L40S", "severity": "warning"}],
        ),
        ("5m", "GpuXidErrors", []),
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
