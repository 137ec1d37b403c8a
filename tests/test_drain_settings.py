"""The pool's kubectl-named drain switches (`rollout.force`, `rollout.deleteEmptyDirData`) reach the drain: schema,
model, the rollout's drain step and the dynamic provider's call of gpupool.k8s.drain, off by default as in kubectl
(v0.36.3 pkg/drain/drain.go: Helper.Force and Helper.DeleteEmptyDirData are false unless the flags are given)."""

from __future__ import annotations

import textwrap

import pytest

from gpupool.deploy import drain_provider as d
from gpupool.k8s import drain, kubeclient, manifests
from gpupool.rules.engine import SpecError, load_valid_spec

SPEC = textwrap.dedent("""\
    apiVersion: gpupool.dev/v1alpha1
    kind: GpuPlatform
    cluster: {name: c, gpuOperator: {namespace: gpu-operator}}
    nodePools:
      - name: a100
        gpu: A100-80GB
        gpusPerNode: 2
        nodes: [n1, n2]
        rollout: ROLLOUT
        sharing: {mig: {preset: all-balanced}}
    tiers: [{name: batch, priority: 1000}]
    tenants:
      - {name: team-r, tier: batch, gpus: {nvidia.com/mig-1g.10gb: 4}, owners: [team-r]}
    """)


def _drains(tmp_path, rollout: str):
    (tmp_path / "spec.yaml").write_text(SPEC.replace("ROLLOUT", rollout))
    spec = load_valid_spec(tmp_path / "spec.yaml")
    return spec.pools[0].rollout, manifests.build(spec).mig_steps["a100"]


def test_the_switches_are_off_by_default_and_reach_every_drain_step_when_set(tmp_path):
    settings, steps = _drains(tmp_path, "{}")
    assert (settings.force, settings.delete_empty_dir_data) == (False, False)
    assert all((s.force, s.delete_empty_dir_data) == (False, False) for s in steps)
    settings, steps = _drains(tmp_path, "{force: true, deleteEmptyDirData: true}")
    assert (settings.force, settings.delete_empty_dir_data) == (True, True)
    assert [s.node for s in steps] == ["n1", "n2"]
    assert all((s.force, s.delete_empty_dir_data) == (True, True) for s in steps)


def test_a_switch_that_is_not_a_boolean_is_refused(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC.replace("ROLLOUT", "{force: 'yes'}"))
    with pytest.raises(SpecError):
        load_valid_spec(tmp_path / "spec.yaml")


@pytest.mark.parametrize(
    ("props", "care"),
    [
        ({}, drain.Care()),  # a state written before the switches existed: kubectl's defaults
        ({"force": True, "deleteEmptyDirData": False}, drain.Care(force=True)),
        ({"force": False, "deleteEmptyDirData": True}, drain.Care(delete_empty_dir_data=True)),
    ],
)
def test_the_provider_passes_the_switches_to_the_drain(monkeypatch, props, care):
    seen = {}

    def api(method, path, body):
        labels = {d.LABEL_CHECKED: "old", d.LABEL_MIG_CONFIG: "old"}  # a real change: it drains
        return 200, {"metadata": {"name": "gpu-1", "labels": labels}}

    def fake_drain(_api, node, *, timeout_seconds, care):
        seen.update(node=node, timeout=timeout_seconds, care=care)
        return ["t/p"]

    monkeypatch.setattr(kubeclient, "Client", lambda *_args: api)
    monkeypatch.setattr(drain, "drain", fake_drain)
    base = {"node": "gpu-1", "config": "new", "kubeconfig": "", "context": "", "timeoutSeconds": 7}
    out = d.DrainProvider()._drain({**base, **props})
    assert seen == {"node": "gpu-1", "timeout": 7.0, "care": care} and out["evicted"] == ["t/p"]
