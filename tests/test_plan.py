"""gpupool plan: every number checked against hand arithmetic on small specs written here, plus golden output."""

from __future__ import annotations

import csv
import io
import json
import os
from fractions import Fraction as F
from pathlib import Path

import pytest

from gpupool.analysis import plan as planmod
from gpupool.cli.main import main
from gpupool.present import plan as planfmt
from gpupool.rules.engine import validate_file

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"

# Four pools, four tenants. nvidia.com/gpu comes from two pools at different prices (attribution by capacity),
# the MIG pool has no price (unpriced), the L4 pool is time-sliced 4 ways with a 1.5x oversubscription policy.
SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: small}
oversubscription:
  perResource: {nvidia.com/gpu.shared: 1.5}
nodePools:
  - name: h100
    gpu: H100-80GB
    gpusPerNode: 2
    nodes: [n1]
    pricePerGpuHour: 4.20
  - name: b200
    gpu: B200-180GB
    gpusPerNode: 8
    nodes: [n2]
    pricePerGpuHour: 7.00
  - name: mig
    gpu: A100-80GB
    gpusPerNode: 2
    nodes: [n3, n4]
    sharing:
      mig:
        layout: {3g.40gb: 2}
  - name: ts
    gpu: L4
    gpusPerNode: 4
    nodes: [n5]
    pricePerGpuHour: 0.80
    sharing:
      timeSlicing: {replicas: 4}
tiers:
  - {name: standard, priority: 100}
tenants:
  - name: alpha
    tier: standard
    owners: [a]
    costCenter: cc-1
    gpus: {nvidia.com/gpu: 5, nvidia.com/mig-3g.40gb: 4}
  - name: beta
    tier: standard
    owners: [b]
    costCenter: cc-1
    gpus: {nvidia.com/gpu.shared: 20}
  - name: gamma
    tier: standard
    owners: [g]
    costCenter: cc-2
    gpus: {nvidia.com/gpu: 5, nvidia.com/gpu.shared: 2}
  - name: delta
    tier: standard
    owners: [d]
    costCenter: cc-2
    offboarded: true
    gpus: {nvidia.com/gpu: 1}
"""


def _plan(tmp_path, text=SPEC):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    result = validate_file(path)
    assert result.spec is not None, [d.render() for d in result.report.sorted()]
    return planmod.compute(result.spec)


@pytest.fixture
def plan(tmp_path):
    return _plan(tmp_path)


def test_capacity_and_supply_formula(plan):
    s = plan.supply("h100", "nvidia.com/gpu")
    assert (s.capacity, s.formula, s.gpu_per_unit) == (2, "1×2 GPUs", 1)  # 1 node x 2 GPUs
    s = plan.supply("b200", "nvidia.com/gpu")
    assert (s.capacity, s.formula) == (8, "1×8 GPUs")  # 1 node x 8 GPUs
    s = plan.supply("mig", "nvidia.com/mig-3g.40gb")
    assert (s.capacity, s.formula) == (8, "2×2 GPUs × 2")  # 2 nodes x 2 GPUs x 2 instances
    # Chargeback weight: the GPU split among the layout's instances by compute slices: 3 / (3 + 3), not 3/7,
    # so the two instances of each GPU add up to the whole GPU (the 7th slice is stranded by the layout).
    assert s.gpu_per_unit == F(1, 2)
    assert s.gpu_equivalents == 4  # 8 x 1/2: the pool's 4 GPUs
    s = plan.supply("ts", "nvidia.com/gpu.shared")
    assert (s.capacity, s.formula) == (16, "1×4 GPUs × 4 replicas")  # 1 x 4 GPUs x 4 replicas
    assert s.gpu_per_unit == F(1, 4) and s.gpu_equivalents == 4
    assert plan.total_gpus == 18  # 2 + 8 + 2*2 + 4


def test_attribution_across_pools(plan):
    # 10 nvidia.com/gpu granted (alpha 5 + gamma 5; delta is offboarded): h100 carries 2/10, b200 8/10.
    assert plan.supply("h100", "nvidia.com/gpu").granted == 2
    assert plan.supply("b200", "nvidia.com/gpu").granted == 8
    assert plan.supply("ts", "nvidia.com/gpu.shared").granted == 22


def test_headroom_and_ratio(plan):
    gpu = plan.resource("nvidia.com/gpu")
    assert (gpu.capacity, gpu.granted, gpu.allowed, gpu.headroom, gpu.ratio) == (10, 10, 10, 0, 1)
    shared = plan.resource("nvidia.com/gpu.shared")
    # allowed = floor(16 x 1.5) = 24; granted 20 + 2 = 22; headroom 2; ratio 22/16
    assert (shared.capacity, shared.granted, shared.max_ratio, shared.allowed, shared.headroom) == (
        16,
        22,
        F(3, 2),
        24,
        2,
    )
    assert shared.ratio == F(11, 8)
    mig = plan.resource("nvidia.com/mig-3g.40gb")
    assert (mig.capacity, mig.granted, mig.headroom) == (8, 4, 4)
    assert plan.ok and plan.over == ()


def test_tenant_gpu_equivalents_share_and_cost(plan):
    alpha = plan.tenant("alpha")
    # gpu 5 -> 1 on h100 (1 GPU, 4.20/h) + 4 on b200 (4 GPUs, 28.00/h); mig 4 x 1/2 = 2 unpriced
    assert alpha.gpu_equivalents == 5 + 2 == 7
    assert alpha.cost.priced_gpu_equivalents == 5
    assert alpha.cost.unpriced_gpu_equivalents == 2
    assert alpha.cost.per_hour == F("32.20")
    assert alpha.cost.per_month == F("23506")  # 32.20 x 730
    assert alpha.share == F(7, 18)
    beta = plan.tenant("beta")
    # gpu.shared is oversubscribed: 22 replicas granted on 16, so each is charged 16/22 of its 1/4 GPU:
    # 20 x 1/4 x 16/22 = 40/11 GPUs x 0.80 = 32/11 per hour (as written the grant is 5 GPUs)
    assert beta.cost.granted_gpu_equivalents == 5
    assert (beta.gpu_equivalents, beta.cost.per_hour, beta.share) == (F(40, 11), F(32, 11), F(40, 11) / 18)
    assert beta.cost.per_month == F(32, 11) * 730
    gamma = plan.tenant("gamma")
    # gpu 5 as alpha (5 GPUs, 32.20/h) + 2 replicas x 1/4 x 16/22 = 4/11 GPU (4/11 x 0.80 per hour)
    assert gamma.gpu_equivalents == 5 + F(4, 11)
    assert gamma.cost.per_hour == F("32.20") + F(4, 11) * F("0.80")
    assert gamma.share == (5 + F(4, 11)) / 18
    delta = plan.tenant("delta")
    assert delta.offboarded and delta.grants == {} and delta.gpu_equivalents == 0 and delta.cost.per_hour == 0


def test_cost_centres_and_total(plan):
    cc1 = plan.cost_center("cc-1")
    assert cc1.tenants == ("alpha", "beta")
    assert cc1.gpu_equivalents == 7 + F(40, 11)
    assert cc1.cost.per_hour == F("32.20") + F(32, 11)
    assert cc1.cost.unpriced_gpu_equivalents == 2
    assert cc1.share == (7 + F(40, 11)) / 18
    cc2 = plan.cost_center("cc-2")
    assert cc2.tenants == ("gamma", "delta")
    assert cc2.gpu_equivalents == 5 + F(4, 11)
    # 7 + 40/11 + 59/11: never more GPUs than the 18 that exist, though as written the grants add up to 18.5
    assert plan.total.gpu_equivalents == 16
    assert plan.total.granted_gpu_equivalents == F(35, 2)  # alpha 5 + 2, beta 5, gamma 5 + 1/2
    # h100 2 x 4.20 + b200 8 x 7.00 + ts 4 x 0.80: every priced GPU is granted
    assert plan.total.per_hour == F("8.40") + 56 + F("3.20")


def test_every_pool_reconciles(plan):
    """Charged + unallocated = the pool's GPUs; in money, the tenants' charges + unallocated = what pools cost."""
    mig = next(p for p in plan.pools if p.name == "mig")
    assert (mig.charged_gpu_equivalents, mig.unallocated_gpu_equivalents) == (2, 2)  # 4 of 8 instances granted
    ts = next(p for p in plan.pools if p.name == "ts")
    assert ts.oversubscribed and ts.charged_gpu_equivalents == 4 and ts.unallocated_gpu_equivalents == 0
    assert all(p.reconciles for p in plan.pools)
    assert plan.total.per_hour + plan.unallocated.per_hour == plan.pools_cost_per_hour == F("67.60")
    assert plan.unallocated.unpriced_gpu_equivalents == 2


def test_unpriced_spec_has_no_chargeback(tmp_path):
    text = "\n".join(l for l in SPEC.splitlines() if "pricePerGpuHour" not in l) + "\n"
    p = _plan(tmp_path, text)
    assert not p.priced and p.total.per_hour == 0
    assert p.total.unpriced_gpu_equivalents == p.total.gpu_equivalents
    out = planfmt.format_table(p)
    assert "Chargeback" not in out and "no pool has pricePerGpuHour" in out


def test_json_documented_keys(plan):
    doc = json.loads(planfmt.format_json(plan))
    assert doc["schemaVersion"] == 1
    assert set(doc) == {
        "schemaVersion",
        "cluster",
        "spec",
        "hoursPerMonth",
        "ok",
        "totals",
        "pools",
        "resources",
        "tenants",
        "costCenters",
        "migRollouts",
        "maxPerPod",
        "queues",
        "queueCeilings",
    }
    assert doc["queues"] == doc["queueCeilings"] == []  # no queueing block here (tests/test_queueing.py has one)
    assert doc["hoursPerMonth"] == 730 and doc["ok"] is True
    assert set(doc["totals"]) == {
        "gpus",
        "gpuEquivalents",
        "pricedGpuEquivalents",
        "unpricedGpuEquivalents",
        "grantedGpuEquivalents",
        "costPerHour",
        "costPerMonth",
        "unallocatedGpuEquivalents",
        "unallocatedPerHour",
        "poolsCostPerHour",
    }
    pool = doc["pools"][0]
    assert set(pool) == {
        "name",
        "gpu",
        "nodes",
        "gpusPerNode",
        "gpus",
        "nodeNames",
        "nodeSelector",
        "sharing",
        "allocation",
        "replicas",
        "pricePerGpuHour",
        "chargeback",
        "resources",
    }
    assert pool["allocation"] == "device-plugin"
    assert set(pool["chargeback"]) == {
        "costPerHour",
        "chargedGpuEquivalents",
        "chargedPerHour",
        "unallocatedGpuEquivalents",
        "unallocatedPerHour",
        "strandedGpus",
        "oversubscribed",
        "reconciles",
    }
    assert set(pool["resources"][0]) == {
        "resource",
        "device",
        "capacity",
        "supply",
        "gpuPerUnit",
        "gpuEquivalents",
        "granted",
        "grantedGpuEquivalents",
        "chargedGpuEquivalents",
        "unallocatedGpuEquivalents",
        "chargeFactor",
    }
    assert set(doc["resources"][0]) == {
        "resource",
        "capacity",
        "granted",
        "maxRatio",
        "allowed",
        "headroom",
        "ratio",
        "pools",
    }
    t = next(t for t in doc["tenants"] if t["name"] == "alpha")
    assert {
        "name",
        "tier",
        "costCenter",
        "offboarded",
        "grants",
        "share",
        "gpuEquivalents",
        "costPerHour",
        "costPerMonth",
        "unpricedGpuEquivalents",
        "allocations",
    } <= set(t)
    assert t["costPerHour"] == 32.2 and t["costPerMonth"] == 23506
    assert {"name", "tenants", "share", "gpuEquivalents", "costPerHour", "costPerMonth"} <= set(doc["costCenters"][0])
    assert doc["totals"]["costPerHour"] == 67.6 == doc["totals"]["poolsCostPerHour"]  # the priced GPUs all granted
    # every key the docs list is in the document
    documented = (ROOT / "docs" / "reference" / "plan-json.md").read_text()
    for key in ("schemaVersion", "costCenters", "allocations", "grantedGpuEquivalents", "unpricedGpuEquivalents"):
        assert f"`{key}`" in documented


def test_csv_line_items_sum_to_totals(plan):
    rows = list(csv.DictReader(io.StringIO(planfmt.format_csv(plan))))
    assert list(rows[0]) == planfmt.CSV_COLUMNS
    alpha = [r for r in rows if r["tenant"] == "alpha"]
    # gpu on h100 and b200, mig on the unpriced pool
    assert sorted((r["pool"], r["units"]) for r in alpha) == [("b200", "4"), ("h100", "1"), ("mig", "4")]
    assert next(r for r in alpha if r["pool"] == "mig")["cost_per_hour"] == ""
    total = sum(float(r["cost_per_hour"]) for r in rows if r["cost_per_hour"])
    assert total == pytest.approx(float(plan.pools_cost_per_hour)) == pytest.approx(67.60)
    # the unpriced MIG pool's 4 ungranted instances are a line item too
    assert [(r["pool"], r["units"], r["gpu_equivalents"]) for r in rows if r["tenant"] == "(unallocated)"] == [
        ("mig", "4", "2.0000")
    ]


def test_table_fits_100_columns_for_prod(capsys):
    assert main(["plan", str(ROOT / "stacks/prod/spec.yaml")]) == 0
    out = capsys.readouterr().out
    widest = max(out.splitlines(), key=len)
    assert len(widest) <= 100, widest
    assert "Headroom by resource" in out and "Chargeback per cost centre" in out


def test_prod_numbers(capsys):
    """Prod: 1.5x policy on gpu.shared (192 x 1.5 = 288 allowed, 280 granted)."""
    result = validate_file(ROOT / "stacks/prod/spec.yaml")
    p = planmod.compute(result.spec)
    shared = p.resource("nvidia.com/gpu.shared")
    assert (shared.capacity, shared.allowed, shared.granted, shared.headroom) == (192, 288, 280, 8)
    # llm-training: 64 nvidia.com/gpu split h100-train 64/80 and b200-train 16/80: 51.2 x 4.10 + 12.8 x 7.50
    llm = p.tenant("llm-training")
    assert llm.cost.per_hour == F("51.2") * F("4.10") + F("12.8") * F("7.50")


def test_golden_markdown_dev():
    golden = GOLDEN / "plan-dev.md"
    spec = validate_file(ROOT / "stacks/dev/spec.yaml", cwd=ROOT).spec
    text = planfmt.format_markdown(planmod.compute(spec))
    if os.environ.get("GPUPOOL_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"{golden} is missing; regenerate with GPUPOOL_UPDATE_GOLDEN=1"
    assert text == golden.read_text(), "plan markdown changed; review and regenerate with GPUPOOL_UPDATE_GOLDEN=1"


def test_cli_exit_codes(tmp_path, capsys):
    assert main(["plan", str(tmp_path / "missing.yaml")]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.replace("tier: standard\n    owners: [b]", "tier: nope\n    owners: [b]"))
    assert main(["plan", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.yaml:" in err and "error:" in err and "Traceback" not in err
    for fmt in ("table", "json", "markdown", "csv"):
        good = tmp_path / "good.yaml"
        good.write_text(SPEC)
        assert main(["plan", str(good), "-o", fmt]) == 0
