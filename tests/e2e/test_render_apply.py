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
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpupool.cli.main import main
from gpupool.k8s.delivery import VALUES_FILE

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
# prod enables queueing: its Kueue objects are checked against Kueue's own CRDs, of the version
# tests/e2e/test_kueue.py runs (one pin, toolchain/versions.env). The bases carry no conversion webhook, so
# the API server stores v1beta2 (what gpupool renders) as is.
KUEUE_CRD_DIR = "config/components/crd/bases"


def _kueue_module() -> str:
    pins = (REPO / "toolchain" / "versions.env").read_text()
    version = re.search(r"^KUEUE_VERSION=(\S+)$", pins, re.M)
    assert version, "KUEUE_VERSION missing from toolchain/versions.env"
    return f"sigs.k8s.io/kueue@{version.group(1)}"


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
        kueue = sorted(_module_file(_kueue_module(), KUEUE_CRD_DIR, tmp).glob("*.yaml"))
        assert kueue, "no CRDs in the Kueue module"
        for crd in kueue:
            cp.kubectl("apply", "--server-side", "-f", str(crd))
        cp.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=120s")
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
        if f.name == VALUES_FILE:
            continue
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
    releases = 2 if stack == "dra" else 1  # the DRA driver's release beside the GPU Operator's
    assert len(chart) == 2 * releases


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


def test_the_dra_drivers_oci_repository_and_post_renderer_are_valid_flux(cluster, tmp_path):
    """The DRA driver's release as Flux gets it where a DRA pool serves whole GPUs: an OCI HelmRepository and a
    HelmRelease whose kustomize post-renderer removes the chart class's nvidia.com/gpu mapping (docs/explanation/dra.md)."""
    work = tmp_path / "dra"
    shutil.copytree(REPO / "stacks" / "dra", work)
    spec = work / "spec.yaml"
    whole = "  - {name: h100-dra, gpu: H100-80GB, gpusPerNode: 2, nodes: [dev-gpu-h100-1], allocation: dra}\n"
    spec.write_text(spec.read_text().replace("\nnodePools:\n", "\nnodePools:\n" + whole, 1))
    out = tmp_path / "out"
    assert main(["render", str(spec), "--output-dir", str(out), "--operator", "helmrelease"]) == 0
    chart = [out / "dra-driver-nvidia-gpu-helmrepository.yaml", out / "dra-driver-nvidia-gpu-helmrelease.yaml"]
    assert yaml.safe_load(chart[0].read_text())["spec"]["type"] == "oci"
    assert yaml.safe_load(chart[1].read_text())["spec"]["postRenderers"]
    cluster.kubectl("create", "namespace", "gpu-operator", check=False)
    p = _dry_run(cluster, chart, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("serverside-applied (server dry run)") == 2, p.stdout


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


# -- real applies (no dry run): what kubectl, Flux (kustomize) and Argo CD users get ------------------------


def _docs(out: Path) -> dict[str, dict]:
    """The rendered Kubernetes objects by file name (not the values file, not the Kustomization)."""
    return {f.name: yaml.safe_load(f.read_text()) for f in sorted(out.glob("*.yaml")) if f.name != VALUES_FILE}


def _nodes_exist(cp: ControlPlane, docs) -> None:
    for doc in docs:
        name = doc["metadata"]["name"]
        if doc["kind"] == "Node" and cp.kubectl("get", "node", name, check=False).returncode != 0:
            cp.create_gpu_node(name)


def _contains(want, live, where: str) -> None:
    """WANT (a rendered object) is in LIVE (as stored): every field, value and list item it names."""
    if isinstance(want, dict):
        assert isinstance(live, dict), where
        for k, v in want.items():
            assert k in live, f"{where}.{k} missing"
            _contains(v, live[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(live, list) and len(live) == len(want), where
        for i, (w, got) in enumerate(zip(want, live, strict=True)):
            _contains(w, got, f"{where}[{i}]")
    else:
        assert want == live, f"{where}: {want!r} != {live!r}"


def _assert_applied(cp: ControlPlane, docs) -> None:
    for doc in docs:
        meta = doc["metadata"]
        args = ["get", f"{doc['kind']}.{doc['apiVersion'].split('/')[0]}" if "/" in doc["apiVersion"] else doc["kind"]]
        args += [meta["name"], "-o", "json"] + (["-n", meta["namespace"]] if meta.get("namespace") else [])
        live = json.loads(cp.kubectl(*args).stdout)
        _contains(doc, live, f"{doc['kind']}/{meta['name']}")


def _assert_node_labels(cp: ControlPlane, stack: str) -> None:
    """Every named node carries its pool's labels and, in a MIG pool, its mig.config (from the plan)."""
    from gpupool.k8s import manifests
    from gpupool.rules.engine import load_valid_spec

    spec = load_valid_spec(REPO / "stacks" / stack / "spec.yaml")
    plan = manifests.build(spec)
    by_name = {o.name: o for o in plan.objects}
    checked = 0
    for pool in spec.pools:
        for node in pool.nodes:
            want = dict(by_name[manifests.node_patch_name(pool, node)].manifest["metadata"]["labels"])
            if plan.pool_configs[pool.name].mig:
                want["nvidia.com/mig.config"] = plan.pool_configs[pool.name].mig
            live = json.loads(cp.kubectl("get", "node", node, "-o", "json").stdout)["metadata"]["labels"]
            assert want.items() <= live.items(), (node, want, live)
            checked += 1
    assert checked


def test_the_rendered_directory_applies_for_real_twice(cluster, tmp_path):
    """`kubectl apply --server-side -f DIR`, run twice as docs/reference/cli.md says, leaves every object as rendered and
    every node with all of gpupool's labels (MIG nodes had five documents each and lost their labels).
    The Kustomization in DIR is skipped by apply -f (no .yaml extension), so both runs exit 0."""
    out = tmp_path / "out"
    _render("dev", out, "helmrelease")
    docs = _docs(out)
    cluster.kubectl("create", "namespace", "gpu-operator", check=False)
    _nodes_exist(cluster, docs.values())
    # apply -f DIR goes by file name, so on a fresh cluster the first run may meet a tenant's quota before its
    # namespace (docs/reference/cli.md: "may need a second run"); nothing else may fail, and the second run must not.
    first = cluster.kubectl("apply", "--server-side", "-f", str(out), check=False)
    errors = [line for line in first.stderr.splitlines() if line.strip()]
    assert all(
        re.fullmatch(r'Error from server \(NotFound\): namespaces "[a-z0-9-]+" not found', e.strip()) for e in errors
    ), errors
    second = cluster.kubectl("apply", "--server-side", "-f", str(out), check=False)
    assert second.returncode == 0, second.stderr
    _assert_node_labels(cluster, "dev")
    _assert_applied(cluster, docs.values())
    names = [d["metadata"]["name"] for d in docs.values() if d["kind"] == "Node"]
    assert len(names) == len(set(names)), "one Node document per node"
    mig_nodes = [d for d in docs.values() if d["kind"] == "Node" and "nvidia.com/mig.config" in d["metadata"]["labels"]]
    assert mig_nodes


def test_the_rendered_stream_applies_for_real(cluster, tmp_path, capsys):
    """`gpupool render --output-dir - | kubectl apply --server-side -f -` sets every label, mig.config too."""
    assert main(["render", str(REPO / "stacks" / "prod" / "spec.yaml"), "--output-dir", "-"]) == 0
    text = capsys.readouterr().out
    docs = [d for d in yaml.safe_load_all(text) if d]
    cluster.kubectl("create", "namespace", "gpu-operator", check=False)
    _nodes_exist(cluster, docs)
    p = cluster.kubectl("apply", "--server-side", "-f", "-", input=text, check=False)
    assert p.returncode == 0, p.stderr
    _assert_node_labels(cluster, "prod")
    _assert_applied(cluster, docs)
    assert any(d["kind"] == "Node" and "nvidia.com/mig.config" in d["metadata"]["labels"] for d in docs)


@pytest.mark.parametrize("operator", ["values", "helmrelease", "argocd"])
def test_kubectl_kustomize_builds_the_directory(operator, cluster, tmp_path):
    """What Flux's kustomize-controller and Argo CD build: every rendered object exactly once."""
    out = tmp_path / "out"
    _render("dev", out, operator)
    p = cluster.kubectl("kustomize", str(out), check=False)
    assert p.returncode == 0, p.stderr
    built = [d for d in yaml.safe_load_all(p.stdout) if d]
    ids = [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in built]
    assert len(ids) == len(set(ids))
    rendered = _docs(out).values()
    assert sorted(ids) == sorted(
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in rendered
    )


@pytest.mark.parametrize("stack", ["dev", "prod", "dev-costCenter-0815"])
def test_every_rendered_file_passes_kubectl_create_dry_run_client(stack, cluster, tmp_path):
    spec = REPO / "stacks" / stack / "spec.yaml"
    if stack == "dev-costCenter-0815":
        shutil.copytree(REPO / "stacks" / "dev", tmp_path / "dev")
        tenant = tmp_path / "dev" / "tenants" / "research.yaml"
        tenant.write_text(tenant.read_text().replace("costCenter: cc-3300", 'costCenter: "0815"'))
        spec = tmp_path / "dev" / "spec.yaml"
    for operator in ("helmrelease", "argocd", "values"):
        out = tmp_path / f"out-{operator}"
        assert main(["render", str(spec), "--output-dir", str(out), "--operator", operator]) == 0
        files = [str(out / name) for name in _docs(out)]
        p = cluster.kubectl(
            "create", "--dry-run=client", "-o", "name", *[a for f in files for a in ("-f", f)], check=False
        )
        assert p.returncode == 0, p.stderr
        assert len(p.stdout.splitlines()) == len(files)
