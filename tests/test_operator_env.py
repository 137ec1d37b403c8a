"""Operand env: gpupool sets only its own variables; a spec that sets an operator-managed one is warned (GP150)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpupool.gpu.operator_facts import OPERANDS, operator_managed_env
from gpupool.k8s import manifests
from gpupool.rules.engine import validate_file

ROOT = Path(__file__).resolve().parent.parent


def _dev_with_values(tmp_path: Path, values_yaml: str) -> Path:
    stack = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks" / "dev", stack)
    spec = stack / "spec.yaml"
    text = spec.read_text()
    assert "    namespace: gpu-operator\n" in text
    spec.write_text(
        text.replace("    namespace: gpu-operator\n", "    namespace: gpu-operator\n    values:\n" + values_yaml, 1)
    )
    return spec


def test_the_facts_name_the_operands_gpupool_writes():
    managed = operator_managed_env()
    assert set(managed) == set(OPERANDS)
    assert {"DEVICE_LIST_STRATEGY", "PASS_DEVICE_SPECS", "DEVICE_ID_STRATEGY"} <= set(managed["devicePlugin"])
    assert {"GFD_SLEEP_INTERVAL", "GFD_FAIL_ON_INIT_ERROR"} <= set(managed["gfd"])


@pytest.mark.parametrize(
    "operand, name",
    [("devicePlugin", "DEVICE_LIST_STRATEGY"), ("gfd", "GFD_SLEEP_INTERVAL"), ("migManager", "NODE_NAME")],
)
def test_a_spec_setting_an_operator_managed_variable_is_warned(operand, name, tmp_path):
    spec = _dev_with_values(
        tmp_path,
        f"      {operand}:\n        env:\n          - {{name: MY_FLAG, value: '1'}}\n"
        f"          - {{name: {name}, value: x}}\n",
    )
    result = validate_file(str(spec))
    assert result.spec is not None  # a warning, not an error
    found = [d for d in result.report.sorted() if d.rule == "GP150"]
    assert len(found) == 1, [d.render() for d in result.report.sorted()]
    text = found[0].render()
    assert f"cluster.gpuOperator.values.{operand}.env[{name}].name:" in text
    assert "spec.yaml:15:20:" in text  # the name of the second env entry
    # gpupool keeps the spec's list (Helm replaces lists) and adds its hash after it
    env = manifests.build(result.spec).chart.values[operand]["env"]
    assert [e["name"] for e in env][:2] == ["MY_FLAG", name]


def test_a_variable_of_ones_own_is_not_warned(tmp_path):
    spec = _dev_with_values(tmp_path, "      devicePlugin:\n        env: [{name: MY_FLAG, value: '1'}]\n")
    result = validate_file(str(spec))
    assert result.spec is not None
    assert not [d for d in result.report.sorted() if d.rule == "GP150"]
