"""Every number gpupool hands to Pulumi, the provider or the API server is bounded by what that consumer takes
(gpupool.spec.bounds): the schema's maximum, a rule id of its own, and the value at the bound still passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpupool.rules.engine import validate_file
from gpupool.spec import bounds
from gpupool.spec.schema import SPEC_SCHEMA

ROOT = Path(__file__).resolve().parent.parent


def _schema_value(at: str, keyword: str):
    node = json.loads(SPEC_SCHEMA.read_text())
    for part in at.split("/"):
        node = node[part]
    return node.get(keyword)


@pytest.mark.parametrize("bound", bounds.BOUNDS, ids=lambda b: f"{b.rule}-{b.keyword}")
def test_the_schema_states_each_bound(bound):
    assert _schema_value(bound.at, bound.keyword) == bound.limit


def test_the_consumers_limits():
    # Go: time.Duration is an int64 of nanoseconds; ParseDuration("9223372037s") overflows.
    assert bounds.GO_DURATION_SECONDS * 10**9 <= 2**63 - 1 < (bounds.GO_DURATION_SECONDS + 1) * 10**9
    # Pulumi's protobuf numbers are doubles: the next whole number after 2^53 - 1 that survives is 2^53.
    assert float(bounds.PULUMI_EXACT_INTEGER) == bounds.PULUMI_EXACT_INTEGER
    assert float(bounds.PULUMI_EXACT_INTEGER + 2) != bounds.PULUMI_EXACT_INTEGER + 2


@pytest.fixture
def stack(tmp_path):
    shutil.copytree(ROOT / "stacks/dev", tmp_path / "dev")
    return tmp_path / "dev"


def _errors(spec: Path) -> list[tuple[str, str]]:
    return [(d.rule, d.path) for d in validate_file(spec, cwd=spec.parent).report.sorted() if d.is_error]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "old,template,limit,rule,where",
    [
        (
            "    nodes: [dev-gpu-a100-1]\n",
            "    nodes: [dev-gpu-a100-1]\n    rollout: {{nodeTimeoutSeconds: {}}}\n",
            bounds.GO_DURATION_SECONDS,
            "GP730",
            "nodePools[a100-mig].rollout.nodeTimeoutSeconds",
        ),
        ("priority: 10000\n", "priority: {}\n", 1_000_000_000, "GP731", "tiers[standard].priority"),
    ],
)
def test_a_bound_holds_at_its_limit_and_refuses_one_more(stack, old, template, limit, rule, where):
    spec = stack / "spec.yaml"
    original = spec.read_text()
    _edit(spec, old, template.format(limit))
    assert _errors(spec) == []
    spec.write_text(original)
    _edit(spec, old, template.format(limit + 1))
    assert _errors(spec)[:1] == [(rule, where)]


def test_a_priority_below_int32_is_refused(stack):
    spec = stack / "spec.yaml"
    _edit(spec, "priority: 10000\n", f"priority: {-(2**31) - 1}\n")
    assert ("GP731", "tiers[standard].priority") in _errors(spec)


@pytest.mark.parametrize(
    "file,old,new,where",
    [
        (
            "tenants/research.yaml",
            "nvidia.com/gpu.shared: 8",
            "nvidia.com/gpu.shared: {}",
            'tenants[2].gpus["nvidia.com/gpu.shared"]',
        ),
        (
            "spec.yaml",
            "namespace: gpu-operator\n",
            "namespace: gpu-operator\n    values: {{x: {}}}\n",
            "cluster.gpuOperator.values.x",
        ),
        (
            "spec.yaml",
            "namespace: gpu-operator\n",
            "namespace: gpu-operator\n    values: {{x: -{}}}\n",
            "cluster.gpuOperator.values.x",
        ),
    ],
)
def test_whole_numbers_beyond_what_pulumi_carries_exactly(stack, file, old, new, where):
    path = stack / file
    original = path.read_text()
    _edit(path, old, new.format(bounds.PULUMI_EXACT_INTEGER + 1))
    assert ("GP020", where) in _errors(stack / "spec.yaml")
    path.write_text(original)
    _edit(path, old, new.format(bounds.PULUMI_EXACT_INTEGER))
    assert not [e for e in _errors(stack / "spec.yaml") if e[0] == "GP020"]


@pytest.mark.parametrize(
    "value,refused", [("1e30", True), ("8Ei", True), ("9223372036854775808", True), ("7Ei", False), ("512Gi", False)]
)
def test_quantities_beyond_what_the_api_server_stores(stack, value, refused):
    tenant = stack / "tenants/inference.yaml"
    _edit(tenant, "memory: 128Gi", f'memory: "{value}"')
    found = ("GP021", "tenants[inference].compute.memory") in _errors(stack / "spec.yaml")
    assert found is refused
