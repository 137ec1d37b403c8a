"""gpupool's alerts as data (gpupool.monitoring.alerts) and the DCGM exporter values that keep other readers of
the exporter right (gpupool.k8s.monitoring). What the alerts do on series is proven with promtool in
tests/e2e/test_monitoring_rules.py; here: every alert has a runbook that exists, recorded names follow
Prometheus' level:metric:operations convention, the XID and MIG choices, and hostPID with virtual-GPU mode."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from gpupool.k8s import manifests
from gpupool.k8s import monitoring as k8s_monitoring
from gpupool.monitoring import alerts, rules
from gpupool.rules.engine import load_valid_spec, validate_file

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def prod():
    return load_valid_spec(REPO / "stacks/prod/spec.yaml")


def _github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation other than - and _ dropped,
    spaces to hyphens (outside code blocks)."""
    out, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = re.match(r"#{1,6} (.+)", line)
        if m and not fenced:
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            out.add(text.replace(" ", "-"))
    return out


def _alerts(spec):
    return [r for g in rules.groups(spec) for r in g["rules"] if "alert" in r]


def test_every_alert_has_a_runbook_section_in_the_docs(prod):
    anchors = _github_anchors((REPO / "docs/explanation/monitoring.md").read_text())
    found = _alerts(prod)
    assert len({a["alert"] for a in found}) == 13
    for a in found:
        url = a["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        assert path == "docs/explanation/monitoring.md" and (REPO / path).is_file(), url
        assert anchor in anchors, f"{a['alert']}: no heading for #{anchor} in docs/explanation/monitoring.md"
        assert a["labels"]["severity"] in ("critical", "warning", "info")


def test_the_alerts_groups_recorded_names_follow_level_metric_operations(prod):
    group = next(g for g in rules.groups(prod) if g["name"] == rules.GROUP_ALERTS)
    recorded = {r["record"] for r in group["rules"] if "record" in r}
    assert recorded  # grants, pool sizes, nominal quotas, ClusterQueues, pool allocatable
    for name in recorded:
        level, metric, operations = name.split(":")
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", level) and re.fullmatch(r"[a-z_]+", metric), name
        assert re.fullmatch(r"[a-z_0-9]+", operations), name
    names = {a["alert"] for a in _alerts(prod)}
    assert all(re.fullmatch(r"[A-Z][A-Za-z]+", n) for n in names)  # alerts are CamelCase


def test_quotas_are_compared_with_grants_not_resource_quotas(prod):
    """Under Kueue the gpu-quota ResourceQuota is the admission ceiling; the alerts read grants."""
    for a in _alerts(prod):
        if a["alert"] in ("GpuQuotaOvercommit", "GpuQuotaAlmostFull"):
            assert alerts.GRANTED in a["expr"]
        if a["alert"] == "GpuQuotaOvercommit":
            assert "kube_resourcequota" not in a["expr"]
    granted = {
        (r["labels"]["namespace"], r["labels"]["resource"]): r["expr"]
        for r in alerts.static_rules(prod)
        if r.get("record") == alerts.GRANTED
    }
    # search's grants as written in stacks/prod/tenants/search.yaml; the offboarded legacy-ranking has none
    assert granted[("search", "nvidia.com/mig-3g.40gb")] == "vector(20)"
    assert granted[("search", "nvidia.com/mig-1g.10gb")] == "vector(40)"
    assert not any(ns == "legacy-ranking" for ns, _ in granted)


def test_queue_alerts_only_with_queueing(prod):
    names = {a["alert"] for a in _alerts(prod)}
    assert {"KueueWorkloadsPending", "KueueClusterQueueInactive", "GpuQueueQuotaOvercommit"} <= names
    without = replace(prod, queueing=None)
    names = {a["alert"] for a in _alerts(without)}
    assert not any(n.startswith("Kueue") or n == "GpuQueueQuotaOvercommit" for n in names)
    queues = [
        r["labels"]["cluster_queue"] for r in alerts.static_rules(prod) if r.get("record") == alerts.CLUSTER_QUEUES
    ]
    assert "legacy-ranking" not in queues and "search" in queues  # an offboarded tenant's queue is stopped


def test_xid_alerts_split_application_from_hardware_xids(prod):
    by_name = {a["alert"]: a["expr"] for a in _alerts(prod)}
    for name in ("GpuXidHardwareError", "GpuXidApplicationError"):
        assert "changes(DCGM_FI_DEV_XID_ERRORS[" in by_name[name]  # a change, not the gauge's last value
    for xid in (13, 31, 43, 45):
        assert f"== {xid}" in by_name["GpuXidApplicationError"]


def test_mig_stuck_waits_past_the_rollouts_own_deadline(prod):
    """Prod's MIG pools keep the default 1800 s node timeout; migStuckFor is 30m: 60 minutes in all."""
    assert alerts.mig_stuck_for(prod) == "60m"
    stuck = next(a for a in _alerts(prod) if a["alert"] == "MigConfigStuck")
    assert stuck["for"] == "60m"
    assert "kube_node_spec_unschedulable" in stuck["expr"]  # pending counts only on a cordoned node


def test_virtual_gpu_mode_comes_with_host_pids(prod):
    """prod time-slices (l40s-notebooks, a100-dev): KUBERNETES_VIRTUAL_GPUS, and hostPID so that the
    per-process GPU_UTIL / FB_USED it produces for every GPU pod are not 0."""
    values = k8s_monitoring.dcgm_exporter_values(prod)
    assert {"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"} in values["env"]
    assert values["hostPID"] is True


def test_no_host_pids_without_virtual_gpu_mode():
    dev = load_valid_spec(REPO / "stacks/dev/spec.yaml")
    mon = replace(dev.monitoring, enabled=True)
    exclusive = replace(dev, monitoring=mon, pools=tuple(p for p in dev.pools if not p.sharing.software_shared))
    assert exclusive.pools
    values = k8s_monitoring.dcgm_exporter_values(exclusive)
    assert "hostPID" not in values
    assert all(e["name"] != "KUBERNETES_VIRTUAL_GPUS" for e in values.get("env", []))


def _dev_spec(tmp_path: Path, values: str, monitoring: bool = True) -> Path:
    """The dev stack (a time-sliced L4 pool) with monitoring on and VALUES under the operator's values."""
    stack = tmp_path / "dev"
    shutil.copytree(REPO / "stacks" / "dev", stack)
    spec = stack / "spec.yaml"
    text = spec.read_text()
    assert "    namespace: gpu-operator\n" in text
    text = text.replace("    namespace: gpu-operator\n", "    namespace: gpu-operator\n    values:\n" + values, 1)
    spec.write_text(text + ("\nmonitoring: {enabled: true}\n" if monitoring else ""))
    return spec


def test_values_turning_host_pids_off_are_warned(tmp_path):
    """GP161 warns (not refuses: a cluster may forbid host PIDs) and names the field."""
    result = validate_file(str(_dev_spec(tmp_path, "      dcgmExporter:\n        hostPID: false\n")))
    assert result.spec is not None
    found = [d for d in result.report.sorted() if d.rule == "GP161"]
    assert len(found) == 1 and found[0].severity == "warning", [d.render() for d in result.report.sorted()]
    assert "cluster.gpuOperator.values.dcgmExporter.hostPID" in found[0].render()
    # the spec's values win (deep merge), so the warning is about what is deployed
    assert manifests.build(result.spec).chart.values["dcgmExporter"]["hostPID"] is False


def test_host_pids_on_or_monitoring_off_is_not_warned(tmp_path):
    for i, (values, monitoring, deployed) in enumerate(
        (
            ("      dcgmExporter:\n        hostPID: true\n", True, True),
            ("      dcgmExporter: {}\n", True, True),  # gpupool's own true
            ("      dcgmExporter:\n        hostPID: false\n", False, False),  # nothing of gpupool's to undo
        )
    ):
        result = validate_file(str(_dev_spec(tmp_path / str(i), values, monitoring)))
        assert result.spec is not None
        assert not [d for d in result.report.sorted() if d.rule == "GP161"]
        assert manifests.build(result.spec).chart.values["dcgmExporter"].get("hostPID") is deployed
