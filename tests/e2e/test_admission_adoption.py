"""The per-pod maximum's policy and binding can be adopted by another field manager, on the shared control
plane. A killed run may leave them created under a field manager that never reached its state; the rerun
applies them again under a new one (pulumi-kubernetes names a manager per resource) and must adopt them.

``MatchResources`` is an atomic struct (k8s.io/api v0.36.3, admissionregistration/v1/types.go line 603,
``+structType=atomic``), owned by one manager as a whole and stored with defaults filled in
(pkg/apis/admissionregistration/v1/defaults.go: ``matchPolicy``, ``namespaceSelector``, ``objectSelector``,
each rule's ``scope``). Without those defaults in what gpupool sends, the second manager's value differs
from the stored one and its apply conflicts on ``.spec.matchConstraints`` (found by the gated kill of
test_sharding.py's move test); with them, it adopts."""

from __future__ import annotations

import copy
import json

import pytest

from gpupool.k8s import admission
from gpupool.model import platform as m

pytestmark = pytest.mark.e2e


def _objects(name: str) -> list[dict]:
    tenant = m.Tenant(name, "batch", gpus={"nvidia.com/gpu": 2}, max_per_pod={"nvidia.com/gpu": 1})
    labels = {"app.kubernetes.io/managed-by": "gpupool-e2e"}
    return [admission.policy(tenant, {"nvidia.com/gpu": 1}, labels), admission.binding(tenant, labels)]


def _apply(control_plane, obj: dict, manager: str):
    return control_plane.kubectl(
        "apply", "--server-side", f"--field-manager={manager}", "-f", "-", input=json.dumps(obj), check=False
    )


def test_a_second_field_manager_adopts_the_policy_and_the_binding(control_plane, unique):
    for obj in _objects(unique):
        first = _apply(control_plane, obj, "killed-run")
        assert first.returncode == 0, first.stderr
        again = _apply(control_plane, obj, "rerun")
        assert again.returncode == 0, (obj["kind"], again.stderr)
        control_plane.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], check=False)


def test_without_the_defaults_the_second_manager_conflicts(control_plane, unique):
    """Why the defaults are sent: the same objects without them conflict (the API server's behaviour)."""
    for obj in _objects(unique):
        bare = copy.deepcopy(obj)
        match = bare["spec"].get("matchConstraints") or bare["spec"]["matchResources"]
        for key in admission.MATCH_DEFAULTS:
            if match.get(key) == admission.MATCH_DEFAULTS[key]:
                match.pop(key)
        for rule in match.get("resourceRules", []):
            rule.pop("scope")
        assert _apply(control_plane, bare, "killed-run").returncode == 0
        again = _apply(control_plane, bare, "rerun")
        assert again.returncode != 0 and "conflict" in again.stderr, (obj["kind"], again.stderr)
        control_plane.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], check=False)
