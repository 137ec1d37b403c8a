"""`gpupool render` output is what kubectl, Flux and Argo CD can apply: checked by a real API server.

A control plane of its own (the stacks' namespaces are created for real, so they must not collide with
the module that runs `pulumi up` on the shared one). The rendered directory without the chart objects goes
through `kubectl apply --server-side --dry-run=server` (strict field validation, every admission
plugin). The chart objects are checked against the Flux and Argo CD CRDs, read from those projects' Go
modules (pinned below; `go mod download` puts them in the module cache, nothing is vendored), installed
on the same API server, then dry-run applied the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main

from .cluster import ControlPlane, ControlPlaneError, _find_kubectl

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
STACKS = sorted(p.parent.name for p in (REPO / "stacks").glob("*/spec.yaml"))
# The CRDs of the API versions gpupool renders (gpupool/k8s/delivery.py): Apache-2.0 projects, read from the
# module cache. helm-controller v1.4.0 is Flux v2.7's; newer module versions need Go 1.27.
CRDS = {
    "HelmRepository": (
        "github.com/fluxcd/source-controller@v1.9.6",
        "config/crd/bases/source.toolkit.fluxcd.io_helmrepositories.yaml",
    ),
    "HelmRelease": (
        "github.com/fluxcd/helm-controller@v1.4.0",
        "config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml",
    ),
    "Application": ("github.com/argoproj/argo-cd/v3@v3.2.0", "manifests/crds/application-crd.yaml"),
}
CHART_KINDS = set(CRDS)
# prod enables monitoring: its PrometheusRule is checked against the Prometheus Operator's own CRD.
MONITORING_CRDS = {
    "PrometheusRule": (
        "github.com/prometheus-operator/prometheus-operator@v0.85.0",
        "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
    ),
}


def _require() -> bool:
    return os.environ.get("GPUPOOL_REQUIRE_E2E", "") not in ("", "0", "false", "no")


def _module_file(module: str, path: str, tmp: Path) -> Path:
    if not shutil.which("go"):
        (pytest.fail if _require() else pytest.skip)("go is needed to fetch the Flux/Argo CD CRDs")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off"}
    p = subprocess.run(
        ["go", "mod", "download", "-json", module], cwd=tmp, env=env, capture_output=True, text=True, timeout=600
    )
    info = json.loads(p.stdout or "{}")
    if p.returncode != 0 or "Dir" not in info:
        pytest.fail(f"go mod download {module}: {info.get('Error') or p.stderr}")
    return Path(info["Dir"]) / path


@pytest.fixture(scope="module")
def cluster(control_plane_bin, tmp_path_factory):
    """A control plane of this module's own, with the Flux and Argo CD CRDs installed."""
    cp = ControlPlane(control_plane_bin, kubectl=_find_kubectl())
    try:
        cp.start()
    except ControlPlaneError as e:
        pytest.fail(f"local control plane failed to start: {e}", pytrace=False)
    try:
        tmp = tmp_path_factory.mktemp("crds")
        for _kind, (module, path) in {**CRDS, **MONITORING_CRDS}.items():
            crd = _module_file(module, path, tmp)
            cp.kubectl("apply", "--server-side", "-f", str(crd))
            name = yaml.safe_load(crd.read_text())["metadata"]["name"]
            cp.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
        cp.kubectl("create", "namespace", "argocd")
        yield cp
    finally:
        cp.stop()


def _render(stack: str, out: Path, operator: str) -> tuple[list[Path], list[Path]]:
    """Render; returns (plain object files, chart object files)."""
    assert (
        main(["render", str(REPO / "stacks" / stack / "spec.yaml"), "--output-dir", str(out), "--operator", operator])
        == 0
    )
    plain, chart = [], []
    for f in sorted(out.glob("*.yaml")):
        (chart if yaml.safe_load(f.read_text())["kind"] in CHART_KINDS else plain).append(f)
    return plain, chart


def _dry_run(cp: ControlPlane, files: list[Path], tmp: Path) -> subprocess.CompletedProcess:
    d = tmp / "apply"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    for f in files:
        shutil.copy(f, d / f.name)
    return cp.kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(d), check=False)


@pytest.mark.parametrize("stack", STACKS)
def test_the_rendered_objects_pass_a_server_side_dry_run(stack, cluster, tmp_path):
    plain, chart = _render(stack, tmp_path / "out", "helmrelease")
    docs = {f: yaml.safe_load(f.read_text()) for f in plain}
    # A dry run creates nothing, so what the objects live in or patch must exist: the namespaces and nodes.
    for f, doc in docs.items():
        if doc["kind"] == "Namespace":
            cluster.kubectl("apply", "--server-side", "-f", str(f))
        elif (
            doc["kind"] == "Node"
            and cluster.kubectl("get", "node", doc["metadata"]["name"], check=False).returncode != 0
        ):
            cluster.create_gpu_node(doc["metadata"]["name"])
    p = _dry_run(cluster, plain, tmp_path)
    assert p.returncode == 0, p.stderr
    applied = [line for line in p.stdout.splitlines() if "serverside-applied (server dry run)" in line]
    assert len(applied) == len(plain), p.stdout
    assert {d["kind"] for d in docs.values()} >= {
        "Namespace",
        "ResourceQuota",
        "LimitRange",
        "ConfigMap",
        "PriorityClass",
        "RoleBinding",
        "Node",
    }
    assert len(chart) == 2


@pytest.mark.parametrize(
    "operator, kinds", [("helmrelease", ["HelmRelease", "HelmRepository"]), ("argocd", ["Application"])]
)
def test_the_chart_objects_are_valid_against_the_flux_and_argo_cd_crds(operator, kinds, cluster, tmp_path):
    _, chart = _render("dev", tmp_path / "out", operator)
    assert sorted(yaml.safe_load(f.read_text())["kind"] for f in chart) == kinds
    cluster.kubectl("create", "namespace", "gpu-operator", check=False)
    p = _dry_run(cluster, chart, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("serverside-applied (server dry run)") == len(chart), p.stdout


def test_the_crd_check_can_fail(cluster, tmp_path):
    """A misspelt field in a HelmRelease is refused by the CRD's schema (strict field validation)."""
    _, chart = _render("dev", tmp_path / "out", "helmrelease")
    release = next(f for f in chart if yaml.safe_load(f.read_text())["kind"] == "HelmRelease")
    doc = yaml.safe_load(release.read_text())
    doc["spec"]["chart"]["spec"]["sourceRefs"] = doc["spec"]["chart"]["spec"].pop("sourceRef")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    cluster.kubectl("create", "namespace", "gpu-operator", check=False)
    p = _dry_run(cluster, [bad], tmp_path)
    assert p.returncode != 0
    assert "sourceRef" in p.stderr
