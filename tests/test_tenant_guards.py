"""A tenant namespace's admission objects, from the model: the priority guard and the container defaults.

What the API server then does with them is proved in tests/e2e/test_tenant_admission.py."""

from __future__ import annotations

import textwrap

from gpupool.k8s import manifests
from gpupool.rules.engine import load_valid_spec

SPEC = textwrap.dedent("""\
    apiVersion: gpupool.dev/v1alpha1
    kind: GpuPlatform
    cluster: {name: t, gpuOperator: {namespace: gpu-operator}}
    nodePools:
      - {name: h100, gpu: H100-80GB, gpusPerNode: 8, nodes: [n1]}
    tiers:
      - {name: high, priority: 5000}
      - {name: low, priority: 100}
    tenants:
      - {name: top, tier: high, owners: [a], gpus: {nvidia.com/gpu: 4}}
      - {name: bottom, tier: low, owners: [b], gpus: {nvidia.com/gpu: 2},
         containerDefaults: {limits: {memory: 128Mi}}}
    """)


def _objects(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    return {o.name: o for o in manifests.build(load_valid_spec(tmp_path / "spec.yaml")).objects}


def test_every_tenant_gets_a_guard_on_its_tiers_value_even_in_the_top_tier(tmp_path):
    objects = _objects(tmp_path)
    for tenant, tier, value in (("top", "high", 5000), ("bottom", "low", 100)):
        policy = objects[f"tenant-{tenant}-priority-guard-policy"].manifest
        assert policy["kind"] == "ValidatingAdmissionPolicy"
        assert [v["expression"] for v in policy["spec"]["validations"]] == [
            f"variables.className == '{tier}' || variables.priority <= {value}"
        ]
        rules = policy["spec"]["matchConstraints"]["resourceRules"]
        assert rules == [
            {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"], "scope": "*"}
        ]
        binding = objects[f"tenant-{tenant}-priority-guard-binding"]
        assert binding.manifest["spec"]["policyName"] == policy["metadata"]["name"]
        assert binding.manifest["spec"]["matchResources"] == {
            "matchPolicy": "Equivalent",
            "objectSelector": {},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tenant}},
        }
        # Kept when the tenant leaves the spec, like its namespace and quotas.
        assert objects[f"tenant-{tenant}-priority-guard-policy"].retain_on_delete
        assert binding.retain_on_delete


def test_container_defaults_set_requests_and_a_limit_only_where_the_spec_names_one(tmp_path):
    objects = _objects(tmp_path)
    (top,) = objects["tenant-top-container-defaults"].manifest["spec"]["limits"]
    assert "default" not in top, top  # no injected limit: it would refuse a bigger request, or OOM-kill
    assert top["defaultRequest"] == {"cpu": "100m", "memory": "256Mi"}
    (bottom,) = objects["tenant-bottom-container-defaults"].manifest["spec"]["limits"]
    assert bottom["default"] == {"memory": "128Mi"}
    # The default request follows a named limit below it (a LimitRange with request > limit is invalid).
    assert bottom["defaultRequest"] == {"cpu": "100m", "memory": "128Mi"}


def test_plan_says_a_tier_is_a_ceiling(tmp_path, capsys):
    from gpupool.cli.main import main

    (tmp_path / "spec.yaml").write_text(SPEC)
    assert main(["plan", str(tmp_path / "spec.yaml")]) == 0
    out = capsys.readouterr().out
    assert "tiers are ceilings: a pod without priorityClassName runs at priority 0" in out


def test_a_tenant_raised_to_the_top_tier_loses_its_guard_quota_rather_than_keeping_it(tmp_path):
    """The quota names the tiers above the tenant's; in the top tier there are none, so it leaves the spec.
    Retained (as the tenant's other objects are), the old quota would stay in the cluster and refuse the
    tenant's pods at the tier it was just given. The guard policy, which is retained, still bounds it."""
    objects = _objects(tmp_path)
    bottom_guard = objects["tenant-bottom-priority-guard"]
    assert bottom_guard.manifest["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == ["high"]
    assert "tenant-top-priority-guard" not in objects  # the top tier has no tier above it
    (tmp_path / "spec.yaml").write_text(SPEC.replace("{name: bottom, tier: low", "{name: bottom, tier: high"))
    raised = {o.name for o in manifests.build(load_valid_spec(tmp_path / "spec.yaml")).objects}
    assert "tenant-bottom-priority-guard" not in raised
    # Removed from the spec, pulumi deletes it: it must not be retained.
    assert not bottom_guard.retain_on_delete
    assert objects["tenant-bottom-priority-guard-policy"].retain_on_delete
