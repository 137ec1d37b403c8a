"""Issue 39, the DRA driver's installation: which pools get the kubelet plugin and when, the values gpupool sets
on the chart, the chart's `nvidia.com/gpu` mapping removed in every form that can remove it and refused in the
forms that cannot. What the real chart and a real DaemonSet controller do with it: tests/e2e/test_dra_driver.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpupool.k8s import delivery, dra_install, manifests, render
from gpupool.k8s.helm_chart import Patch
from gpupool.rules.engine import load_valid_spec

MIG_ONLY = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: dev}
nodePools:
  - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], sharing: {timeSlicing: {replicas: 2}}}
  - name: a100-dra
    gpu: A100-80GB
    gpusPerNode: 4
    nodes: [gpu-a100-1]
    allocation: dra
    sharing: {mig: {preset: all-balanced}}
tiers:
  - {name: standard, priority: 100}
tenants:
  - {name: infer, tier: standard, owners: [a], gpus: {nvidia.com/mig-1g.10gb: 2}}
"""

# Beside it: a whole-GPU DRA pool of L40S (not MIG-capable: no MIG Manager, no state label on its nodes).
WHOLE = MIG_ONLY.replace(
    "tiers:",
    "  - {name: l40s-dra, gpu: L40S, gpusPerNode: 2, nodes: [gpu-l40s-1], allocation: dra}\ntiers:",
)


def _built(tmp_path: Path, text: str) -> manifests.DesiredObjects:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return manifests.build(load_valid_spec(path))


def _terms(chart) -> list[dict]:
    affinity = chart.values["kubeletPlugin"]["affinity"]["nodeAffinity"]
    return affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_no_dra_pool_no_driver(tmp_path):
    assert _built(tmp_path, MIG_ONLY.replace("    allocation: dra\n", "")).dra_chart is None


def test_install_false_leaves_the_driver_to_the_cluster(tmp_path):
    text = MIG_ONLY.replace("cluster: {name: dev}", "cluster: {name: dev, draDriver: {install: false}}")
    built = _built(tmp_path, text)
    assert built.dra_chart is None
    assert built.objects  # the classes and quotas stay: only the release is not gpupool's


def test_the_release_is_the_pinned_oci_chart_in_the_operator_namespace(tmp_path):
    chart = _built(tmp_path, MIG_ONLY).dra_chart
    assert chart is not None
    assert (chart.name, chart.chart, chart.version, chart.namespace) == (
        "dra-driver-nvidia-gpu",
        "dra-driver-nvidia-gpu",
        "0.4.1",
        "gpu-operator",
    )
    # helm has no --repo for OCI: the chart is named by its full reference
    assert chart.reference() == "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
    assert chart.depends_on == ("gpu-operator-ns",)


def test_values_keep_the_plugin_on_dra_pools_after_mig_manager_succeeded(tmp_path):
    chart = _built(tmp_path, WHOLE).dra_chart
    v = chart.values
    assert v["gpuResourcesEnabledOverride"] is True  # else the chart's own guard fails the render
    assert v["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}}
    assert v["nvidiaDriverRoot"] == "/run/nvidia/driver"  # the operator's driver container installs it there
    # Terms are ORed, expressions within one ANDed (k8s NodeSelector): the MIG pool only at state success, the
    # L40S pool (no MIG Manager writes a state there) by its pool label alone; the L4 device-plugin pool never.
    assert _terms(chart) == [
        {
            "matchExpressions": [
                {"key": "gpupool.dev/pool", "operator": "In", "values": ["a100-dra"]},
                {"key": "nvidia.com/mig.config.state", "operator": "In", "values": ["success"]},
            ]
        },
        {"matchExpressions": [{"key": "gpupool.dev/pool", "operator": "In", "values": ["l40s-dra"]}]},
    ]


def test_a_driver_on_the_host_and_the_users_values(tmp_path):
    text = MIG_ONLY.replace(
        "cluster: {name: dev}",
        "cluster:\n  name: dev\n  gpuOperator: {driver: false}\n  draDriver: {values: {logVerbosity: '6'}}",
    )
    v = _built(tmp_path, text).dra_chart.values
    assert v["nvidiaDriverRoot"] == "/"
    assert v["logVerbosity"] == "6"


def test_the_gpu_mapping_is_removed_only_where_a_dra_pool_serves_whole_gpus(tmp_path):
    assert _built(tmp_path, MIG_ONLY).dra_chart.patches == ()
    chart = _built(tmp_path, WHOLE).dra_chart
    assert chart.patches == (Patch("DeviceClass", "gpu.nvidia.com", ("/spec/extendedResourceName",)),)


def test_patch_removes_the_mapping_and_nothing_else():
    # The chart's class as v0.4.1 renders it (templates/deviceclass-gpu.yaml), written out here.
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }
    patch = dra_install.UNMAP_GPU
    assert patch.matches(cls)
    out = patch.apply(cls)
    assert out["spec"] == {"selectors": cls["spec"]["selectors"]}
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"  # the input untouched
    assert patch.apply(out) == out  # already removed: unchanged
    mig = {**cls, "metadata": {"name": "mig.nvidia.com"}}
    assert not patch.matches(mig)


def test_flux_post_renders_the_patch_and_reads_the_oci_registry(tmp_path):
    docs = render.render_documents(_built(tmp_path, WHOLE), "helmrelease")
    repo = yaml.safe_load(docs["dra-driver-nvidia-gpu-helmrepository.yaml"])
    assert repo["spec"]["type"] == "oci"
    assert repo["spec"]["url"] == "oci://registry.k8s.io/dra-driver-nvidia/charts"
    release = yaml.safe_load(docs["dra-driver-nvidia-gpu-helmrelease.yaml"])
    assert release["spec"]["chart"]["spec"]["chart"] == "dra-driver-nvidia-gpu"
    assert release["spec"]["chart"]["spec"]["version"] == "0.4.1"
    (renderer,) = release["spec"]["postRenderers"]
    (patch,) = renderer["kustomize"]["patches"]
    assert patch["target"] == {"kind": "DeviceClass", "name": "gpu.nvidia.com"}
    assert json.loads(patch["patch"]) == [{"op": "remove", "path": "/spec/extendedResourceName"}]
    operator = yaml.safe_load(docs["gpu-operator-helmrelease.yaml"])
    assert "postRenderers" not in operator["spec"]


def test_forms_without_a_post_renderer_refuse_the_patched_chart(tmp_path):
    built = _built(tmp_path, WHOLE)
    for mode in ("argocd", "values"):
        with pytest.raises(delivery.DeliveryError, match="no post-renderer"):
            render.render_documents(built, mode)


def test_mig_only_pools_render_in_every_form(tmp_path):
    built = _built(tmp_path, MIG_ONLY)
    app = yaml.safe_load(render.render_documents(built, "argocd")["dra-driver-nvidia-gpu-application.yaml"])
    # Argo CD names an OCI Helm registry without its scheme
    assert app["spec"]["source"]["repoURL"] == "registry.k8s.io/dra-driver-nvidia/charts"
    assert app["spec"]["source"]["helm"]["valuesObject"] == built.dra_chart.values
    values = render.render_documents(built, "values")["helm/dra-driver-nvidia-gpu-values.yaml"]
    assert (
        "helm install dra-driver-nvidia-gpu oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
        in values
    )
    assert yaml.safe_load(values) == built.dra_chart.values


def test_the_diff_sees_the_release(tmp_path):
    from gpupool.analysis.diff.compute import compute

    base = load_valid_spec(_write(tmp_path / "base", MIG_ONLY.replace("    allocation: dra\n", "")))
    head = load_valid_spec(_write(tmp_path / "head", MIG_ONLY))
    added = [c for c in compute(base, head).objects if c.object_kind == "Chart"]
    assert [(c.object_name, c.kind.value) for c in added] == [("gpu-operator/dra-driver-nvidia-gpu", "added")]


def _write(directory: Path, text: str) -> Path:
    directory.mkdir()
    (directory / "spec.yaml").write_text(text)
    return directory / "spec.yaml"
