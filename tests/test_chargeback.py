"""Chargeback reconciles: per pool, the tenants' charges plus the explicitly reported unallocated capacity
are exactly what the pool costs, for MIG layouts that strand slices, oversubscribed shared pools and
resources supplied by several pools (docs/explanation/chargeback.md). Every expected figure is computed here from the
MIG catalog's compute slices and the spec, not read back from gpupool."""

from __future__ import annotations

import csv
import io
import random
from fractions import Fraction as F
from pathlib import Path

import pytest

from gpupool.analysis import plan as planmod
from gpupool.gpu.mig import catalog, check_layout, layout_weights
from gpupool.present import plan as planfmt
from gpupool.rules.engine import validate_file

ROOT = Path(__file__).resolve().parent.parent


def _compute(path: Path) -> planmod.CapacityPlan:
    result = validate_file(path, cwd=ROOT)
    assert result.spec is not None, [d.render() for d in result.report.sorted()]
    return planmod.compute(result.spec)


def _assert_reconciles(p: planmod.CapacityPlan) -> None:
    for pool in p.pools:
        assert pool.charged_gpu_equivalents + pool.unallocated_gpu_equivalents == pool.gpus, pool.name
        assert pool.charged_gpu_equivalents <= pool.gpus, pool.name  # never more GPUs than exist
    assert p.total.gpu_equivalents + p.unallocated.gpu_equivalents == p.total_gpus
    assert p.total.per_hour + p.unallocated.per_hour == p.pools_cost_per_hour
    # the tenants' charges, summed from their own lines, are the pools' charged part
    assert sum((t.cost.per_hour for t in p.tenants), F(0)) == sum(
        (p_.per_hour(p_.charged_gpu_equivalents) or F(0) for p_ in p.pools), F(0)
    )
    # the CSV line items (tenants and "(unallocated)") add up to what the pools cost
    rows = list(csv.DictReader(io.StringIO(planfmt.format_csv(p))))
    assert sum(float(r["cost_per_hour"]) for r in rows if r["cost_per_hour"]) == pytest.approx(
        float(p.pools_cost_per_hour), abs=1e-3
    )
    assert sum(float(r["gpu_equivalents"]) for r in rows) == pytest.approx(p.total_gpus, abs=1e-3)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_bundled_stacks_reconcile(stack):
    _assert_reconciles(_compute(ROOT / f"stacks/{stack}/spec.yaml"))


def test_prod_stranding_layout_bills_the_whole_pool():
    """h100-infer is fully granted; by SM share (compute slices / 7) it would bill 16 x 2 x 3/7 + 16 x 7 x 1/7
    = 29.71 of its 32 GPUs. With layout weights the 2 x 3g.40gb GPUs bill 1/2 per instance."""
    p = _compute(ROOT / "stacks/prod/spec.yaml")
    pool = next(x for x in p.pools if x.name == "h100-infer")
    h100 = catalog().resolve("H100-80GB")
    assert h100 is not None
    sm = {name: F(prof.compute, h100.compute_slices) for name, prof in h100.profiles.items()}
    by_sm_share = 16 * 2 * sm["3g.40gb"] + 16 * 7 * sm["1g.10gb"]
    assert round(float(by_sm_share), 2) == 29.71  # the under-billing the old weight had
    assert pool.charged_gpu_equivalents == 32 and pool.unallocated_gpu_equivalents == 0
    assert p.supply("h100-infer", "nvidia.com/mig-3g.40gb").gpu_per_unit == F(1, 2)
    assert p.supply("h100-infer", "nvidia.com/mig-1g.10gb").gpu_per_unit == F(1, 7)
    assert pool.stranded_gpus == 16 * (1 - 2 * sm["3g.40gb"])  # one slice of 7 on each of 16 GPUs
    assert pool.per_hour(pool.charged_gpu_equivalents) == pool.cost_per_hour == 32 * F("4.10")


def test_prod_oversubscribed_pool_bills_its_gpus_not_its_grants():
    """l40s-notebooks: 24 GPUs x 8 replicas = 192 gpu.shared; 280 granted (1.5x policy). As written that is
    35 GPUs; charged, every replica costs 192/280 of 1/8 GPU, so the pool bills 24."""
    p = _compute(ROOT / "stacks/prod/spec.yaml")
    pool = next(x for x in p.pools if x.name == "l40s-notebooks")
    s = p.supply("l40s-notebooks", "nvidia.com/gpu.shared")
    assert s.granted_gpu_equivalents == 35 and s.charged_gpu_equivalents == 24
    assert s.charge_factor == F(192, 280) and pool.oversubscribed
    notebooks, experiments = p.tenant("notebooks"), p.tenant("experiments")
    assert notebooks.resource_gpu_equivalents("nvidia.com/gpu.shared") == 200 * F(1, 8) * F(192, 280)
    assert experiments.resource_gpu_equivalents("nvidia.com/gpu.shared") == 80 * F(1, 8) * F(192, 280)
    out = planfmt.format_table(p)
    assert "l40s-notebooks: nvidia.com/gpu.shared oversubscribed 1.46x (280 on 192)" in out


def test_partly_granted_pool_reports_unallocated(tmp_path):
    """dev: the a100-mig balanced pool's ungranted instances are unallocated, at their layout weight."""
    p = _compute(ROOT / "stacks/dev/spec.yaml")
    pool = next(x for x in p.pools if x.name == "a100-mig")
    expected = F(0)
    for s in pool.supplies:
        expected += max(s.capacity - s.granted, F(0)) * s.gpu_per_unit
    assert pool.unallocated_gpu_equivalents == expected > 0
    # all-balanced uses all 7 compute slices: the layout weight equals the SM share there
    assert p.supply("a100-mig", "nvidia.com/mig-3g.40gb").gpu_per_unit == F(3, 7)


def test_layout_weights_of_every_preset_add_up_to_one_gpu():
    for model in catalog().models.values():
        for name, layout in model.presets.items():
            weights = layout_weights(model, layout)
            if not any(layout.values()):
                continue
            total = sum((weights[p] * n for p, n in layout.items() if n), F(0))
            assert total == 1, (model.name, name)


def _random_spec(rng: random.Random, n_pools: int) -> str:
    models = [m for m in catalog().models.values() if m.presets]
    pools = []
    for i in range(n_pools):
        kind = rng.choice(["exclusive", "mig", "ts", "mig-ts"])
        gpus = rng.choice([1, 2, 4, 8])
        nodes = ", ".join(f"p{i}-n{j}" for j in range(rng.randint(1, 3)))
        price = f"    pricePerGpuHour: {rng.choice(['0.80', '1.90', '4.10', '7.50'])}\n" if rng.random() < 0.8 else ""
        if kind == "exclusive":
            gpu, sharing = "L4", ""
        elif kind == "ts":
            gpu, sharing = "L40S", f"    sharing:\n      timeSlicing: {{replicas: {rng.randint(2, 8)}}}\n"
        else:
            model = rng.choice(models)
            layouts = [k for k, v in model.presets.items() if check_layout(model, v).ok and "+" not in str(v)]
            preset = rng.choice(layouts)
            gpu = model.name
            sharing = f"    sharing:\n      mig:\n        preset: {preset}\n"
            if kind == "mig-ts":
                sharing += f"      timeSlicing: {{replicas: {rng.randint(2, 4)}}}\n"
        pools.append(f"  - name: p{i}\n    gpu: {gpu}\n    gpusPerNode: {gpus}\n    nodes: [{nodes}]\n{price}{sharing}")
    text = "apiVersion: gpupool.dev/v1alpha1\nkind: GpuPlatform\ncluster: {name: r}\n"
    text += "oversubscription: {maxRatio: 2.0}\nnodePools:\n" + "".join(pools)
    text += "tiers:\n  - {name: standard, priority: 100}\ntenants: []\n"
    return text


def test_random_platforms_reconcile(tmp_path):
    """Random pools (MIG presets of every catalog model, time-slicing on MIG and on whole GPUs, unpriced
    pools) and random grants up to twice the capacity: every pool and the whole platform still reconcile."""
    rng = random.Random(23)
    checked = oversubscribed = stranding = 0
    for case in range(40):
        text = _random_spec(rng, rng.randint(1, 4))
        path = tmp_path / f"base{case}.yaml"
        path.write_text(text)
        base = validate_file(path)
        if base.spec is None:
            continue
        capacity = base.spec.capacity()
        tenants = []
        for t in range(rng.randint(1, 4)):
            grants = {r: rng.randint(0, c) for r, c in capacity.items() if rng.random() < 0.7}
            body = ", ".join(f"{r}: {n}" for r, n in grants.items())
            tenants.append(f"  - {{name: t{t}, tier: standard, owners: [o], costCenter: cc-{t % 2}, gpus: {{{body}}}}}")
        path.write_text(text.replace("tenants: []\n", "tenants:\n" + "\n".join(tenants) + "\n"))
        result = validate_file(path)
        if result.spec is None:  # a random grant over the 2x policy: the validator refuses it, nothing to bill
            continue
        p = planmod.compute(result.spec)
        _assert_reconciles(p)
        checked += 1
        oversubscribed += any(x.oversubscribed for x in p.pools)
        stranding += any(x.stranded_gpus for x in p.pools)
    assert checked >= 30 and oversubscribed >= 5 and stranding >= 5, (checked, oversubscribed, stranding)
