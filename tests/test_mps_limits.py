"""MPS replicas are bounded per model: the MPS control daemon serves at most 16 clients per GPU below compute
capability 7.5 and 48 from 7.5 on (k8s-device-plugin v0.20.0 cmd/mps-control-daemon/mps/device.go,
maxClients / isAtLeastVolta: it compares against 7.5 although the name says Volta)."""

from __future__ import annotations

import pytest

from gpupool.gpu.models import known_gpus, resolve_gpu
from gpupool.rules.engine import validate_file

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {{name: dev, migStrategy: none}}
nodePools: [{{name: p, gpu: {gpu}, gpusPerNode: 4, nodes: [n1], sharing: {{mps: {{replicas: {replicas}}}}}}}]
tiers: [{{name: standard, priority: 100}}]
tenants:
  - {{name: team-a, tier: standard, owners: [a], gpus: {{nvidia.com/gpu.shared: 8}}}}
"""


@pytest.mark.parametrize(
    "gpu,replicas,refused",
    [("V100-32GB", 16, False), ("V100-32GB", 17, True), ("P100-16GB", 20, True), ("T4", 48, False), ("L4", 48, False)],
)
def test_mps_replicas_above_the_models_maximum_are_refused(gpu, replicas, refused, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.format(gpu=gpu, replicas=replicas))
    ids = [d.rule for d in validate_file(path).report.diagnostics]
    assert ("GP311" in ids) is refused, ids


def test_every_model_without_mig_states_its_compute_capability():
    without_mig = [g for g in known_gpus().values() if g.mig is None]
    assert without_mig and all(g.compute_capability for g in without_mig), [g.name for g in without_mig]
    assert resolve_gpu("Tesla-V100-SXM2-16GB").gpu.mps_max_replicas == 16
    assert resolve_gpu("Tesla-T4").gpu.mps_max_replicas == 48
