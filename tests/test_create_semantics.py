"""Why upserting creates is safe for gpupool (docs/explanation/create-semantics.md), proven on the desired objects.

pulumi-kubernetes #2926: when a resource's Pulumi name (its URN) changes while the object's name stays, the
engine plans create-then-delete; with upsert the create adopts the live object and the delete then removes
it. gpupool rules that out by tying each object's Pulumi name and component to the object's identity
(apiVersion group, kind, namespace, name): one identity never appears under two names, in one plan or
across edits of the spec. The exceptions are Patch resources (node labels), which the released provider
always creates by server-side apply whatever the setting (await.go `Creation`: `... ||
kinds.IsPatchResource(...)`) and which are retained on delete, so their delete only drops them from the
state; a test below pins both.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gpupool.k8s import manifests
from gpupool.rules.engine import load_valid_spec

ROOT = Path(__file__).resolve().parent.parent


def identity(obj: manifests.Desired) -> tuple[str, str, str, str]:
    meta = obj.manifest["metadata"]
    group = obj.manifest["apiVersion"].rpartition("/")[0]
    return group, obj.kind, meta.get("namespace", ""), meta["name"]


def _edit_tenants(stack_dir: Path, edit) -> None:
    for path in sorted((stack_dir / "tenants").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        edit(data)
        path.write_text(yaml.safe_dump(data))


EDITS = {
    "as-is": lambda t: None,
    "owner-role-view": lambda t: t.update(ownerRole="view"),
    "offboarded": lambda t: t.update(offboarded=True),
    "tier-and-cost-center": lambda t: t.update(tier="standard", costCenter="cc-9"),
}


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, manifests.DesiredObjects]:
    out = {}
    for stack in ("dev", "prod"):
        for edit_name, edit in EDITS.items():
            copy = tmp_path_factory.mktemp(f"{stack}-{edit_name}") / stack
            shutil.copytree(ROOT / "stacks" / stack, copy)
            _edit_tenants(copy, edit)
            out[f"{stack}/{edit_name}"] = manifests.build(load_valid_spec(copy / "spec.yaml"))
    return out


def test_one_identity_is_one_object_per_plan(plans):
    for key, plan in plans.items():
        seen: dict[tuple, str] = {}
        for obj in plan.objects:
            if obj.patch:
                continue
            assert identity(obj) not in seen, (key, obj.name, seen.get(identity(obj)))
            seen[identity(obj)] = obj.name


def test_an_identity_keeps_its_pulumi_name_and_component_across_edits(plans):
    """A spec edit never moves a live object to another URN, so no plan creates-then-deletes the same object."""
    where: dict[tuple, tuple[str, str, str]] = {}
    for key, plan in plans.items():
        for obj in plan.objects:
            if obj.patch:
                continue
            before = where.setdefault(identity(obj), (obj.component, obj.name, key))
            assert before[:2] == (obj.component, obj.name), (identity(obj), before, key)


def test_patches_are_retained_so_a_moved_patch_only_leaves_the_state(plans):
    for plan in plans.values():
        patches = [o for o in plan.objects if o.patch]
        assert patches
        assert all(o.retain_on_delete for o in patches), [o.name for o in patches if not o.retain_on_delete]
