"""Per-pod GPU maximums: the model (tier defaults, tenant overrides), the admission objects, plan and diff."""

from __future__ import annotations

import dataclasses

from gpupool.analysis import diff as diffmod
from gpupool.analysis import plan as planmod
from gpupool.k8s import admission, manifests
from gpupool.model import platform as m
from gpupool.present import plan_json
from gpupool.present.plan import format_table


def _spec(tier_max=None, tenant_max=None, offboarded=False) -> m.Spec:
    pool = m.NodePool("h100", "H100-80GB", 8, 2, nodes=("n1", "n2"))
    tier = m.Tier("batch", 1000, max_per_pod=tier_max or {})
    tenant = m.Tenant(
        "team-a",
        "batch",
        gpus={"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 2},
        max_per_pod=tenant_max or {},
        offboarded=offboarded,
    )
    return m.Spec(m.Cluster("c"), (pool,), (tier,), (tenant,))


def _objects(spec: m.Spec) -> dict[str, manifests.Desired]:
    return {o.name: o for o in manifests.build(spec).objects if o.component == "tenant:team-a"}


def test_tenant_values_override_the_tier_default_per_resource():
    spec = _spec({"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 1}, {"nvidia.com/gpu": 2})
    assert spec.max_per_pod(spec.tenants[0]) == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 1}


def test_a_policy_and_a_binding_per_tenant_with_the_limits_inline():
    objs = _objects(_spec({"nvidia.com/mig-1g.10gb": 1}, {"nvidia.com/gpu": 2}))
    policy = objs["tenant-team-a-max-per-pod"]
    binding = objs["tenant-team-a-max-per-pod-binding"]
    assert policy.kind == "ValidatingAdmissionPolicy" and binding.kind == "ValidatingAdmissionPolicyBinding"
    assert "paramKind" not in policy.manifest["spec"] and "paramRef" not in binding.manifest["spec"]
    assert binding.manifest["spec"]["policyName"] == policy.manifest["metadata"]["name"] == "gpupool-max-per-pod.team-a"
    assert binding.manifest["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-a"}
    }
    assert binding.manifest["spec"]["validationActions"] == ["Deny"]
    assert binding.depends_on == (policy.name,)
    validations = policy.manifest["spec"]["validations"]
    assert [v["expression"] for v in validations] == ["variables.request0 <= 2", "variables.request1 <= 1"]
    assert "nvidia.com/gpu, above the per-pod maximum of 2" in validations[0]["messageExpression"]
    assert "tenant team-a" in validations[1]["messageExpression"]
    # Removing a maximum must remove its enforcement: never retained, unlike the tenant's other objects.
    assert not policy.retain_on_delete and not binding.retain_on_delete
    assert objs["tenant-team-a-gpu-quota"].retain_on_delete


def test_pods_are_checked_on_create_and_workloads_on_create_and_update():
    rules = _objects(_spec(tenant_max={"nvidia.com/gpu": 2}))["tenant-team-a-max-per-pod"].manifest["spec"][
        "matchConstraints"
    ]["resourceRules"]
    by = {r: rule["operations"] for rule in rules for r in rule["resources"]}
    assert by["pods"] == ["CREATE"]
    for kind in ("deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs"):
        assert by[kind] == ["CREATE", "UPDATE"], kind


def test_no_maximum_no_policy_and_an_offboarded_tenant_gets_none():
    assert "tenant-team-a-max-per-pod" not in _objects(_spec())
    assert "tenant-team-a-max-per-pod" not in _objects(_spec(tenant_max={"nvidia.com/gpu": 2}, offboarded=True))


def test_the_effective_request_counts_init_containers_and_sidecars_in_order():
    cel = admission.effective_request_cel("nvidia.com/gpu")
    # max over [regular + sidecars] and each ordinary init container plus the sidecars declared before it
    assert cel.startswith("([variables.containers.map(") and cel.endswith(").max()")
    assert "variables.initNames.indexOf(s.name) < variables.initNames.indexOf(c.name)" in cel
    assert "'nvidia.com/gpu' in c.resources.limits" in cel


def test_plan_and_diff_show_the_maximums():
    base = _spec({"nvidia.com/mig-1g.10gb": 1})
    head = _spec({"nvidia.com/mig-1g.10gb": 1}, {"nvidia.com/gpu": 2})
    lines = planmod.compute(head).max_per_pod
    assert [(x.resource, x.limit, x.source, x.quota) for x in lines] == [
        ("nvidia.com/gpu", 2, "tenant", 8),
        ("nvidia.com/mig-1g.10gb", 1, "tier batch", 2),
    ]
    assert "Per-pod maximums" in format_table(planmod.compute(head))
    assert plan_json.to_json(planmod.compute(head))["maxPerPod"][0] == {
        "tenant": "team-a",
        "resource": "nvidia.com/gpu",
        "max": 2,
        "from": "tenant",
        "quota": 8,
    }
    d = diffmod.compute(base, head)
    (change,) = [t for t in d.tenants if t.name == "team-a"]
    assert "max per pod nvidia.com/gpu no limit → 2" in [x.text for x in change.details]
    assert any(o.file == "tenant-team-a-max-per-pod.yaml" and o.kind == "changed" for o in d.objects)
    removed = diffmod.compute(
        head,
        dataclasses.replace(
            head, tiers=(m.Tier("batch", 1000),), tenants=(dataclasses.replace(head.tenants[0], max_per_pod={}),)
        ),
    )
    assert {o.file for o in removed.objects if o.kind == "removed"} == {
        "tenant-team-a-max-per-pod.yaml",
        "tenant-team-a-max-per-pod-binding.yaml",
    }


def _shared_spec(fail: bool, exclusive_too: bool = False) -> m.Spec:
    ts = m.Sharing(time_slicing=m.TimeSlicing(4, rename=not exclusive_too, fail_requests_greater_than_one=fail))
    pools = [m.NodePool("l4", "L4", 4, 1, nodes=("l1",), sharing=ts)]
    if exclusive_too:  # a pool advertising the same name unshared: 2 per container can be allocated there
        pools.append(m.NodePool("h100", "H100-80GB", 8, 1, nodes=("h1",)))
    name = "nvidia.com/gpu" if exclusive_too else "nvidia.com/gpu.shared"
    tenant = m.Tenant("team-a", "batch", gpus={name: 8})
    return m.Spec(m.Cluster("c"), tuple(pools), (m.Tier("batch", 1000),), (tenant,))


def test_fail_requests_greater_than_one_refuses_more_than_one_unit_per_container():
    """k8s-device-plugin v0.20.0 internal/rm/rm.go refuses it per container at Allocate; refuse it at admission."""
    policy = _objects(_shared_spec(True))["tenant-team-a-max-per-pod"].manifest
    (check,) = policy["spec"]["validations"]
    assert check["expression"].startswith("(variables.containers + variables.inits).all(c, ")
    assert "'nvidia.com/gpu.shared'" in check["expression"] and check["expression"].endswith("<= 1)")
    assert "at most one per container (failRequestsGreaterThanOne)" in check["messageExpression"]
    # Without the flag, or where an unshared pool also advertises the name, nothing is refused.
    assert "tenant-team-a-max-per-pod" not in _objects(_shared_spec(False))
    assert "tenant-team-a-max-per-pod" not in _objects(_shared_spec(True, exclusive_too=True))


def test_mps_allocates_one_unit_per_container():
    """v0.20.0 api/config/v1/config.go lines 72-76: an unset MPS failRequestsGreaterThanOne becomes true."""
    assert m.Sharing(mps=m.Mps(4)).one_per_container
    assert not m.Sharing().one_per_container
