"""`gpupool render`: deterministic files, one per object, valid against the Kubernetes OpenAPI schema."""
from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from gpupool.cli.main import main

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


def _render(stack: str, out: Path) -> dict[str, str]:
    assert main(["render", str(ROOT / f"stacks/{stack}/spec.yaml"), "-o", str(out)]) == 0
    return {p.name: p.read_text() for p in sorted(out.glob("*.yaml"))}


@pytest.mark.parametrize("stack", STACKS)
def test_render_is_deterministic(stack, tmp_path):
    first = _render(stack, tmp_path / "a")
    second = _render(stack, tmp_path / "b")
    assert first == second
    assert len(first) > 10


def test_render_removes_objects_no_longer_desired(tmp_path):
    out = tmp_path / "out"
    _render("dev", out)
    (out / "tenant-ghost-ns.yaml").write_text("stale")
    _render("dev", out)
    assert not (out / "tenant-ghost-ns.yaml").exists()


def test_render_refuses_an_invalid_spec(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: gpupool.dev/v1alpha1\nkind: GpuPlatform\n")
    assert main(["render", str(bad), "-o", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()
    assert "missing required key" in capsys.readouterr().err


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_manifests_are_valid_kubernetes(stack, tmp_path):
    documents = _render(stack, tmp_path)
    checked = 0
    for name, text in documents.items():
        obj = yaml.safe_load(text)
        if obj["kind"] == "HelmChart":  # gpupool's record of the chart inputs, not a Kubernetes object
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked == len(documents) - 1


def test_a_manifest_with_a_typo_is_rejected_by_the_validator():
    """The schema check above can fail: a misspelt field is caught in strict mode."""
    bad = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "a"},
           "spec": {"hardd": {"requests.nvidia.com/gpu": "1"}}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)
