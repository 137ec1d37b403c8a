"""gpupool usage's arithmetic on range-query results shaped as Prometheus returns them (labels of
gpupool.monitoring.promql's queries): weights per pool, GPU-hours, peaks, charges and the reconciliation
of a pool's cost. Expected figures are computed here by hand from the spec; the end-to-end test
(tests/e2e/test_usage_prometheus.py) runs the same report against a real Prometheus."""

from __future__ import annotations

import csv
import io
import json

import pytest

from gpupool.analysis import usage
from gpupool.cli.main import main
from gpupool.present import usage as present
from gpupool.rules.engine import validate_file

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: small}
nodePools:
  - name: mig
    gpu: H100-80GB
    gpusPerNode: 1
    nodes: [m1]
    pricePerGpuHour: 4.00
    sharing:
      mig: {layout: {3g.40gb: 2}}
  - name: ts
    gpu: L4
    gpusPerNode: 1
    nodes: [t1]
    pricePerGpuHour: 1.00
    sharing:
      timeSlicing: {replicas: 4}
tiers:
  - {name: standard, priority: 100}
tenants:
  - {name: alpha, tier: standard, owners: [a], costCenter: cc-1, gpus: {nvidia.com/mig-3g.40gb: 2}}
  - {name: beta, tier: standard, owners: [b], costCenter: cc-2, gpus: {nvidia.com/gpu.shared: 4}}
"""

STEP = 300.0
WIN = usage.Window(0.0, 12 * STEP, STEP)  # one hour, 12 steps
TS = [STEP * (i + 1) for i in range(12)]


def _series(labels, values):
    return usage.Series(labels, tuple(zip(TS, values, strict=True)))


@pytest.fixture
def spec(tmp_path):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    r = validate_file(p)
    assert r.spec is not None
    return r.spec


def _report(spec):
    allocated = [
        # alpha holds one 3g.40gb the whole hour and a second one for the last 6 steps
        _series({"namespace": "alpha", "node": "m1", "resource": "nvidia_com_mig_3g_40gb"}, [1] * 6 + [2] * 6),
        # beta holds 2 replicas of the L4 for 6 steps; a pod of another namespace holds 1 replica throughout
        _series({"namespace": "beta", "node": "t1", "resource": "nvidia_com_gpu_shared"}, [2] * 6 + [0] * 6),
        _series({"namespace": "kube-system", "node": "t1", "resource": "nvidia_com_gpu_shared"}, [1] * 12),
    ]
    used = [
        # alpha's share of its instances' activity (0.5 busy on each instance it holds)
        _series({"namespace": "alpha", "node": "m1", "GPU_I_PROFILE": "3g.40gb"}, [0.5] * 6 + [1.0] * 6),
        # beta's two pods and kube-system's pod share the L4 (0.9 busy): beta gets 2/3 of it while it is there
        _series({"namespace": "beta", "node": "t1"}, [0.6] * 6 + [0] * 6),
        _series({"namespace": "gpu-operator", "node": "m1", "GPU_I_PROFILE": "3g.40gb"}, [0.0] * 12),  # an idle device
    ]
    devices = [
        _series({"node": "m1", "GPU_I_PROFILE": "3g.40gb"}, [0.5] * 6 + [1.0] * 6),
        _series({"node": "t1"}, [0.9] * 12),
    ]
    return usage.compute(spec, WIN, allocated, used, devices, prometheus="http://p")


def test_tenant_figures(spec):
    r = _report(spec)
    alpha = next(t for t in r.tenants if t.name == "alpha")
    # a 3g.40gb in {3g.40gb: 2} weighs 1/2 GPU (docs/chargeback.md): 6 steps x 1/2 + 6 steps x 1, of 5 min
    assert alpha.allocated_hours == pytest.approx((6 * 0.5 + 6 * 1.0) * STEP / 3600)
    assert alpha.peak_allocated == pytest.approx(1.0)
    assert alpha.used_hours == pytest.approx((6 * 0.5 * 0.5 + 6 * 1.0 * 0.5) * STEP / 3600)
    assert alpha.efficiency == pytest.approx(0.5)
    assert alpha.charge == pytest.approx(alpha.allocated_hours * 4.0)
    assert alpha.granted == pytest.approx(1.0) and not alpha.used_shared
    beta = next(t for t in r.tenants if t.name == "beta")
    assert beta.allocated_hours == pytest.approx(6 * 2 * 0.25 * STEP / 3600)  # a replica is 1/4 of the L4
    assert beta.used_hours == pytest.approx(6 * 0.6 * STEP / 3600) and beta.used_shared
    assert r.other.allocated_hours == pytest.approx(12 * 0.25 * STEP / 3600)


def test_pools_reconcile(spec):
    r = _report(spec)
    for p in r.pools:
        tenants = sum(t.by_pool.get(p.name, (0.0, 0.0))[0] for t in [*r.tenants, r.other])
        assert tenants == pytest.approx(p.allocated_hours)
        assert p.capacity_hours == 1.0  # one GPU for one hour
        assert p.allocated_hours + p.unallocated_hours == pytest.approx(p.capacity_hours)
    mig = next(p for p in r.pools if p.name == "mig")
    # the instance's activity x 1/2: the pool's baseline utilisation counts every device once
    assert mig.used_hours == pytest.approx((6 * 0.5 + 6 * 1.0) * 0.5 * STEP / 3600)
    rows = list(csv.DictReader(io.StringIO(present.format_csv(r))))
    for p in r.pools:
        charged = sum(float(x["charge"]) for x in rows if x["pool"] == p.name and x["charge"])
        assert charged == pytest.approx(p.money(p.capacity_hours), abs=0.01)


def test_json_document(spec):
    doc = json.loads(present.format_json(_report(spec)))
    assert doc["schemaVersion"] == 1 and doc["hours"] == 1.0 and doc["stepSeconds"] == STEP
    assert {t["name"] for t in doc["tenants"]} == {"alpha", "beta"}
    assert set(doc["pools"][0]) >= {"capacityGpuHours", "usedGpuHours", "utilisation", "recoverableGpuHours", "cost"}
    assert doc["tenants"][1]["usedIncludesSharedDevices"] is True


def test_table_and_markdown(spec):
    r = _report(spec)
    assert "includes an equal share of time-sliced/MPS devices" in present.format_table(r)
    assert present.format_markdown(r).startswith("## gpupool usage: cluster small")


def test_cli_rejects_a_range_shorter_than_a_step(tmp_path, capsys):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    code = main(["usage", str(p), "--prometheus", "http://127.0.0.1:9", "--since", "1m", "--step", "5m"])
    assert code == 2 and "at least one --step" in capsys.readouterr().err
