"""`gpupool render`: deterministic files, one per object, valid against the Kubernetes OpenAPI schema."""

from __future__ import annotations

import errno
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from gpupool import safe_write
from gpupool.cli.main import main
from gpupool.k8s import manifests, render
from gpupool.rules.engine import load_valid_spec

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(p.parent.name for p in (ROOT / "stacks").glob("*/spec.yaml"))


def _target_kubernetes() -> str:
    """The minor release the e2e control plane runs (toolchain/versions.env), as kubernetes-validate names it."""
    for line in (ROOT / "toolchain" / "versions.env").read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            major, minor = line.split("=", 1)[1].strip().lstrip("v").split(".")[:2]
            return f"{major}.{minor}.0"
    raise AssertionError("KUBERNETES_VERSION missing from toolchain/versions.env")


KUBERNETES_VERSION = _target_kubernetes()


def _render(stack: str, out: Path, *extra: str) -> dict[str, str]:
    assert main(["render", str(ROOT / f"stacks/{stack}/spec.yaml"), "--output-dir", str(out), *extra]) == 0
    return {p.name: p.read_text() for p in sorted(out.glob("*.yaml"))}


def _tree(directory: Path) -> dict[str, bytes]:
    """Every file under DIRECTORY (relative path -> content), hidden ones included."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stack", STACKS)
def test_render_is_deterministic(stack, tmp_path):
    first = _render(stack, tmp_path / "a")
    second = _render(stack, tmp_path / "b")
    assert first == second
    assert len(first) > 10


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("operator", ["helmrelease", "argocd", "values"])
def test_rendered_manifests_are_valid_kubernetes(stack, operator, tmp_path):
    """Plain Kubernetes objects only: no made-up kinds, no Pulumi annotations."""
    documents = _render(stack, tmp_path, "--operator", operator)
    delivery_kinds = {"HelmRepository", "HelmRelease", "Application"}
    checked, chart_objects, crd_objects = 0, [], 0
    for name, text in documents.items():
        assert "pulumi.com/" not in text, name
        obj = yaml.safe_load(text)
        if obj["kind"] in delivery_kinds:
            chart_objects.append(obj["kind"])
            continue
        if obj["kind"] == "PrometheusRule":  # a CRD's object: tests/e2e/test_render_apply.py checks it with its CRD
            crd_objects += 1
            continue
        if obj["apiVersion"].startswith("kueue.x-k8s.io/"):
            # Kueue's kinds: tests/e2e/test_kueue.py applies them to an API server serving Kueue's own CRDs
            # (and its webhook's checks are mirrored by the GP52x rules).
            crd_objects += 1
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked == len(documents) - len(chart_objects) - crd_objects > 10
    releases = 2 if load_valid_spec(f"stacks/{stack}/spec.yaml").dra_pools else 1  # the DRA driver's too
    per_release = {"helmrelease": ["HelmRelease", "HelmRepository"], "argocd": ["Application"], "values": []}[operator]
    assert sorted(chart_objects) == sorted(per_release * releases)
    values_file = tmp_path / "helm" / "gpu-operator-values.yaml"
    assert values_file.exists() is (operator == "values")
    if operator == "values":
        assert "helm install gpu-operator gpu-operator --repo" in values_file.read_text()


def test_render_removes_objects_no_longer_desired_and_keeps_the_users_files(tmp_path):
    spec = _stack_copy(tmp_path)
    out = tmp_path / "out"
    assert main(["render", str(spec), "--output-dir", str(out)]) == 0
    assert (out / "tenant-notebooks-ns.yaml").exists()
    (out / "kustomization.yaml").write_text("resources: []\n")  # the user's own file, next to the render
    (out / "notes").mkdir()
    (out / "notes" / "x.yaml").write_text("mine\n")
    (spec.parent / "tenants" / "notebooks.yaml").unlink()
    assert main(["render", str(spec), "--output-dir", str(out)]) == 0
    assert not (out / "tenant-notebooks-ns.yaml").exists()
    assert (out / "tenant-research-ns.yaml").exists()
    assert (out / "kustomization.yaml").read_text() == "resources: []\n"
    assert (out / "notes" / "x.yaml").read_text() == "mine\n"
    assert not [p for p in out.iterdir() if p.name.startswith(".gpupool-staging-")]


def test_render_refuses_a_directory_holding_other_files(tmp_path, capsys):
    """`--output-dir .` inside a stack directory must not touch spec.yaml or the tenant files."""
    spec = _stack_copy(tmp_path)
    before = _tree(spec.parent)
    assert main(["render", str(spec), "--output-dir", str(spec.parent)]) == 1
    err = capsys.readouterr().err
    assert "not a previous gpupool render" in err and "--force" in err
    assert _tree(spec.parent) == before
    assert main(["render", str(spec), "--output-dir", str(spec.parent / "tenants")]) == 1
    assert _tree(spec.parent) == before


def test_force_adds_the_render_and_keeps_every_other_file(tmp_path):
    spec = _stack_copy(tmp_path)
    before = _tree(spec.parent)
    assert main(["render", str(spec), "--output-dir", str(spec.parent), "--force"]) == 0
    after = _tree(spec.parent)
    assert {k: after[k] for k in before} == before
    assert ".gpupool-render" in after and "tenant-research-ns.yaml" in after
    # a second render (now a previous render is there) still leaves them, without --force
    assert main(["render", str(spec), "--output-dir", str(spec.parent)]) == 0
    assert {k: _tree(spec.parent)[k] for k in before} == before


def test_force_never_overwrites_a_file_gpupool_did_not_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "tenant-research-ns.yaml").write_text("the user's\n")
    assert main(["render", str(ROOT / "stacks/dev/spec.yaml"), "--output-dir", str(out), "--force"]) == 1
    assert "was not written by gpupool" in capsys.readouterr().err
    assert _tree(out) == {"tenant-research-ns.yaml": b"the user's\n"}


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_output_dir_is_a_usage_error(value, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Pulumi.yaml").write_text("name: x\n")
    assert main(["render", str(ROOT / "stacks/dev/spec.yaml"), "--output-dir", value]) == 2
    assert "--output-dir" in capsys.readouterr().err
    assert _tree(tmp_path) == {"Pulumi.yaml": b"name: x\n"}


def test_output_dir_dash_writes_one_stream_to_stdout(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["render", str(ROOT / "stacks/dev/spec.yaml"), "--output-dir", "-"]) == 0
    assert list(tmp_path.iterdir()) == []  # no directory named "-"
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    plan = manifests.build(load_valid_spec(ROOT / "stacks/dev/spec.yaml"))
    from gpupool.k8s import gitops

    assert len(docs) == len(gitops.for_apply(plan.objects)) + 2  # + HelmRepository and HelmRelease
    kinds = [d["kind"] for d in docs]
    # registration order: each namespace comes before what lives in it
    for i, d in enumerate(docs):
        ns = d["metadata"].get("namespace")
        if ns:
            assert any(e["kind"] == "Namespace" and e["metadata"]["name"] == ns for e in docs[:i]), d["metadata"]
    assert "HelmRelease" in kinds
    assert main(["render", str(ROOT / "stacks/dev/spec.yaml"), "--output-dir", "-", "--operator", "values"]) == 2


def test_a_local_chart_cannot_be_a_helmrelease(tmp_path, capsys):
    spec = _stack_copy(
        tmp_path, "    namespace: gpu-operator\n", "    namespace: gpu-operator\n    chartPath: ./chart\n"
    )
    (spec.parent / "chart").mkdir()
    out = tmp_path / "out"
    assert main(["render", str(spec), "--output-dir", str(out)]) == 2
    assert "--operator values" in capsys.readouterr().err
    assert not out.exists()
    assert main(["render", str(spec), "--output-dir", str(out), "--operator", "values"]) == 0


def test_a_file_as_output_dir_is_exit_1(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["render", str(ROOT / "stacks/dev/spec.yaml"), "--output-dir", str(target)]) == 1
    assert "not a directory" in capsys.readouterr().err
    assert target.read_text() == "x"


@pytest.mark.parametrize("users_file", [False, True], ids=["render-only", "users-file"])
def test_a_failing_write_leaves_the_previous_render(users_file, tmp_path, monkeypatch, capsys):
    """A write that fails half-way (here: a name too long for the file system) is exit 1, not 70."""
    out = tmp_path / "out"
    _render("dev", out)
    if users_file:
        (out / "README.md").write_text("mine")
    before = _tree(out)
    calls = []
    real = render._write_file

    def failing(d, name, text):
        calls.append(name)
        if len(calls) == 6:
            raise safe_write.Refused(
                d.where(name), safe_write.reason(OSError(errno.ENAMETOOLONG, "File name too long"))
            )
        real(d, name, text)

    monkeypatch.setattr(render, "_write_file", failing)
    spec = _stack_copy(tmp_path, "replicas: 4", "replicas: 6")
    assert main(["render", str(spec), "--output-dir", str(out)]) == 1
    assert "too long" in capsys.readouterr().err
    assert _tree(out) == before
    assert [p.name for p in tmp_path.iterdir() if ".gpupool-new-" in p.name] == []


_KILLER = """
import os, signal, sys
from gpupool.k8s import render
from gpupool.cli.main import main
from gpupool.k8s import manifests, render
from gpupool.rules.engine import load_valid_spec
real, count = render._write_file, [0]
def write(d, name, text):
    count[0] += 1
    if count[0] == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
    real(d, name, text)
render._write_file = write
main(["render", sys.argv[1], "--output-dir", sys.argv[2]])
"""


@pytest.mark.parametrize("users_file", [False, True], ids=["render-only", "users-file"])
@pytest.mark.parametrize("after", [1, 20])
def test_a_render_killed_half_way_leaves_the_previous_render(users_file, after, tmp_path):
    out = tmp_path / "out"
    _render("dev", out)
    if users_file:
        (out / "README.md").write_text("mine")
    before = _tree(out)
    spec = _stack_copy(tmp_path, "replicas: 4", "replicas: 6")
    p = subprocess.run([sys.executable, "-c", _KILLER, str(spec), str(out), str(after)], cwd=ROOT)
    assert p.returncode == -signal.SIGKILL
    assert {k: v for k, v in _tree(out).items() if not k.startswith(".gpupool-staging-")} == before
    # the next render finishes the job and clears what the killed one left
    assert main(["render", str(spec), "--output-dir", str(out)]) == 0
    assert "replicas: 6" in (out / "device-plugin-config.yaml").read_text()
    leftovers = [
        p.name
        for p in [*out.iterdir(), *tmp_path.iterdir()]
        if p.name.startswith(".gpupool-staging-") or ".gpupool-new-" in p.name
    ]
    assert leftovers == []
    assert (out / "README.md").exists() is users_file


def test_an_index_cannot_make_render_delete_outside_its_directory(tmp_path):
    victim = tmp_path / "victim.yaml"
    victim.write_text("keep")
    out = tmp_path / "out"
    _render("dev", out)
    with open(out / ".gpupool-render", "a") as f:
        f.write("../victim.yaml\n/etc/passwd\n")
    _render("dev", out)
    assert victim.read_text() == "keep"


def test_render_refuses_an_invalid_spec(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: gpupool.dev/v1alpha1\nkind: GpuPlatform\n")
    assert main(["render", str(bad), "--output-dir", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()
    assert "missing required key" in capsys.readouterr().err


def _stack_copy(tmp_path: Path, old: str = "", new: str = "") -> Path:
    dst = tmp_path / "stack"
    if not dst.exists():
        shutil.copytree(ROOT / "stacks" / "dev", dst)
    spec = dst / "spec.yaml"
    if old:
        spec.write_text(spec.read_text().replace(old, new, 1))
    return spec


def test_a_manifest_with_a_typo_is_rejected_by_the_validator():
    """The schema check above can fail: a misspelt field is caught in strict mode."""
    bad = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "a"},
        "spec": {"hardd": {"requests.nvidia.com/gpu": "1"}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)
