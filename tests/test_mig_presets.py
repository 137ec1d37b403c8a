"""A node labelled with a GPU Operator preset keeps working: gpupool's MIG ConfigMap carries the operator's presets.

The presets are the v26.7.0 operator's own `default-mig-parted-config` (gpu-operator
assets/state-mig-manager/0400_configmap.yaml at tag v26.7.0), checked in byte for byte: with a custom config
name the operator mounts that ConfigMap alone (controllers/object_controls.go, TransformMigManager, lines
2069-2092), and mig-manager refuses a label naming a config its mounted file lacks (mig-parted v0.15.0
`assert.go`: "selected mig-config not present"), so without them such a node turns `failed`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from gpupool.gpu import operator_presets
from gpupool.gpu.mig import catalog
from gpupool.gpu.operator_facts import mig_presets_fact
from gpupool.k8s import manifests
from gpupool.rules.engine import load_valid_spec
from tests.pulumi_mocks import run_program

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(p.parent.name for p in (ROOT / "stacks").glob("*/spec.yaml"))


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_preset_file_is_the_operators_file_byte_for_byte():
    """Its git blob id is upstream's (`git rev-parse v26.7.0:assets/state-mig-manager/0400_configmap.yaml`
    in NVIDIA/gpu-operator): one changed byte, and this fails."""
    fact = mig_presets_fact()
    assert _git_blob_id(operator_presets.preset_file_bytes()) == fact["git_blob"]
    assert "v26.7.0" in str(fact["source"]) and "0400_configmap.yaml" in str(fact["source"])


def test_the_v26_7_0_list_has_its_81_presets():
    names = list(operator_presets.presets())
    assert len(names) == mig_presets_fact()["count"] == 81
    assert len(set(names)) == len(names)
    # Spot checks against the upstream file (0400_configmap.yaml lines 11-13, 20-24, and all-balanced's entries).
    assert {"all-disabled", "all-enabled", "all-balanced", "all-1g.10gb", "all-1g.5gb.me", "all-7g.278gb"} <= set(names)
    assert operator_presets.presets()["all-1g.5gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}
    ]
    assert len(operator_presets.presets()["all-balanced"]) == 12  # one entry per device-filter group (GB200 ... GB300)


def _mig_configs(config_map: dict) -> dict:
    return yaml.safe_load(config_map["data"]["config.yaml"])["mig-configs"]


@pytest.mark.parametrize("stack", STACKS)
def test_the_rendered_config_holds_every_preset_beside_gpupools_configs(stack):
    spec = load_valid_spec(ROOT / f"stacks/{stack}/spec.yaml")
    plan = manifests.build(spec)
    config_map = next(o.manifest for o in plan.objects if o.name == "mig-config")
    configs = _mig_configs(config_map)
    for name, entries in operator_presets.presets().items():
        assert configs[name] == entries, name
    # And every config a gpupool pool uses, which the presets alone would not have.
    _, by_pool = manifests.mig_config(spec)
    assert set(by_pool.values()) <= set(configs)
    assert set(by_pool.values()) - set(operator_presets.presets()), "the stack has no gpupool layout to check"


def test_the_registered_config_map_holds_every_preset(monkeypatch):
    """The Pulumi path registers the same ConfigMap (render == registered is tests/test_program.py)."""
    monkeypatch.chdir(ROOT)
    mocks, _, error = run_program({"spec": "stacks/prod/spec.yaml"}, stack="prod")
    assert error is None, error
    registered = next(
        a for a in mocks.created if a.typ == "kubernetes:core/v1:ConfigMap" and a.name.endswith("-mig-config")
    )
    configs = _mig_configs(registered.inputs)
    assert {n: configs.get(n) for n in operator_presets.presets()} == operator_presets.presets()


def test_a_gpupool_config_that_differs_from_a_preset_of_its_name_is_a_build_error():
    with pytest.raises(ValueError, match="all-1g.10gb"):
        manifests.with_operator_presets({"all-1g.10gb": [{"devices": "all", "mig-enabled": False}]})
    same = {"all-1g.10gb": operator_presets.presets()["all-1g.10gb"]}
    assert manifests.with_operator_presets(same)["all-1g.10gb"] == same["all-1g.10gb"]


def test_no_gpupool_config_name_can_take_a_presets_name():
    """gpupool's names start with the model (manifests.mig_config_name) and every preset with `all-`, so the
    only shared name is all-disabled, which gpupool writes exactly as the operator does."""
    for name in catalog().names():
        assert not name.lower().startswith("all-") and name.lower() != "all", name
    assert operator_presets.presets()[manifests.MIG_DISABLED] == [{"devices": "all", "mig-enabled": False}]
    assert all(n.startswith("all-") for n in operator_presets.presets())
