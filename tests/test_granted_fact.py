"""A tenant's granted GPU-equivalents are a fact of the model (gpupool.model.grants), read by the capacity
plan, the recording rules and `gpupool usage` alike, and one program run no longer runs the plan or builds
the MIG configs more than once to get at them (issue 38 item 2)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction as F
from pathlib import Path

import pytest
from pulumi_mocks import run_program

from gpupool.analysis import plan as capacity_plan
from gpupool.analysis import usage
from gpupool.k8s import manifests
from gpupool.model import grants
from gpupool.monitoring import promql as q
from gpupool.monitoring import rules
from gpupool.monitoring.series import Window
from gpupool.rules.engine import validate_file
from tests.usage_fake import FakeSource

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(ROOT.glob("stacks/*/spec.yaml"))


def _spec(path: Path):
    result = validate_file(path, cwd=ROOT)
    assert result.spec is not None, [d.render() for d in result.report.sorted()]
    return result.spec


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.parent.name)
def test_granted_figure_is_the_plans_line_items(path):
    """The fact adds up to what the plan's own line items (each grant split over its pools by capacity, times
    the pool's unit weight) say, tenant by tenant; an offboarded tenant is granted nothing."""
    spec = _spec(path)
    fact = grants.granted_gpu_equivalents(spec)
    plan = capacity_plan.compute(spec)
    assert set(fact) == {t.name for t in spec.tenants}
    assert any(fact.values())
    for line in plan.tenants:
        assert fact[line.name] == sum((a.granted_gpu_equivalents for a in line.allocations), F(0)), line.name
        assert line.cost.granted_gpu_equivalents == fact[line.name], line.name
    for t in spec.tenants:
        if t.offboarded:
            assert fact[t.name] == 0


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.parent.name)
def test_unit_weight_of_a_one_pool_resource_is_the_pools(path):
    spec = _spec(path)
    weights = grants.unit_weights(spec)
    suppliers: dict[str, list] = {}
    for pool in spec.pools:
        for r in pool.resources_per_node():
            suppliers.setdefault(r, []).append(pool)
    assert set(weights) == set(suppliers)
    for r, pools in suppliers.items():
        if len(pools) == 1:
            assert weights[r] == pools[0].unit_gpu_fraction(r), r


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.parent.name)
def test_rules_and_usage_read_the_same_figure(path):
    spec = _spec(path)
    fact = grants.granted_gpu_equivalents(spec)
    by_namespace = {t.namespace: fact[t.name] for t in spec.tenants}
    static = [r for g in rules.groups(spec) for r in g["rules"] if r.get("record") == q.TENANT_GRANTED]
    assert {r["labels"]["namespace"] for r in static} == set(by_namespace)
    for r in static:
        assert r["expr"] == f"vector({float(by_namespace[r['labels']['namespace']]):.12g})"
    report = usage.compute(spec, Window(0.0, 3600.0, 300.0), FakeSource())
    for t in report.tenants:
        if t.namespace in by_namespace:
            assert t.granted == float(by_namespace[t.namespace]), t.name


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.parent.name)
def test_resource_lines_are_the_plans(path):
    """The stack outputs read plan.resource_lines: the same lines the whole plan carries."""
    spec = _spec(path)
    assert capacity_plan.resource_lines(spec) == capacity_plan.compute(spec).resources


def _counting(monkeypatch, calls: Counter, module, name: str) -> None:
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls[name] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_one_program_run_builds_the_mig_configs_once_and_no_plan(monkeypatch, stack):
    """Before, prod's run (monitoring on) built the MIG configs three times (the objects, the recording rules'
    plan, the stack outputs' plan) and the plan twice, to read one figure per tenant."""
    calls: Counter = Counter()
    for module, name in ((manifests, "build"), (manifests, "mig_configs"), (capacity_plan, "compute")):
        _counting(monkeypatch, calls, module, name)
    mocks, _, error = run_program({"spec": f"stacks/{stack}/spec.yaml"}, stack=stack)
    assert error is None, error
    assert mocks.created
    assert calls["build"] >= 1
    assert calls["mig_configs"] <= calls["build"], calls
    assert calls["compute"] == 0, calls
