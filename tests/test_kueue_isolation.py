"""Issue 35: with `queueing:` on, Kueue is the only way to GPUs (the queue policy, gpupool.k8s.kueue_policy),
grants keep their meaning across flavors (flavorFungibility), and `gpupool plan` states each tenant's ceiling
outside Kueue. What the API server and Kueue do with these objects is proven in tests/e2e/test_kueue.py."""

from __future__ import annotations

import json
from pathlib import Path

from gpupool.analysis import plan as capacity_plan
from gpupool.k8s import kueue, manifests
from gpupool.present import plan as planfmt
from gpupool.rules.engine import load_valid_spec

ROOT = Path(__file__).resolve().parents[1]
PROD = ROOT / "stacks/prod/spec.yaml"


def _prod():
    spec = load_valid_spec(PROD)
    return spec, manifests.build(spec)


def _policy(plan):
    return next(o.manifest for o in plan.objects if o.name == "queue-policy")


def test_the_queue_policy_covers_every_kind_that_makes_gpu_pods():
    """Pods, Jobs, Deployments, StatefulSets, JobSets and LeaderWorkerSets, on create and update (before: Jobs
    only, so a Deployment or bare pod in a tenant namespace took GPUs Kueue never saw)."""
    _, plan = _prod()
    rules = _policy(plan)["spec"]["matchConstraints"]["resourceRules"]
    matched = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert {
        ("", "pods"),
        ("batch", "jobs"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("jobset.x-k8s.io", "jobsets"),
        ("leaderworkerset.x-k8s.io", "leaderworkersets"),
    } <= matched
    assert all(set(rule["operations"]) == {"CREATE", "UPDATE"} for rule in rules)


def test_every_quoted_resource_is_gated_and_no_tenant_identity_is_a_controller():
    """The pod check names every resource a tenant's GPU ResourceQuota lists (so nothing it can ask for escapes
    the gate), and the 'controller' test excludes every tenant owner group and every tenant namespace's
    service accounts (so a tenant cannot pass as the job controller or a JobSet's)."""
    spec, plan = _prod()
    variables = {v["name"]: v["expression"] for v in _policy(plan)["spec"]["variables"]}
    quotas = [
        o.manifest for o in plan.objects if o.kind == "ResourceQuota" and o.manifest["metadata"]["name"] == "gpu-quota"
    ]
    assert quotas
    for quota in quotas:
        for key in quota["spec"]["hard"]:
            assert json.dumps(key.removeprefix("requests.")) in variables["gpu"] or key.startswith(
                "requests.nvidia.com/"
            )
    assert "kueue.x-k8s.io/admission" in variables["gated"]
    for tenant in spec.tenants:
        assert json.dumps(tenant.namespace) in variables["controller"]
        for owner in tenant.owners:
            if not owner.startswith("serviceaccount:"):
                assert json.dumps(owner.removeprefix("group:")) in variables["controller"]


def test_the_kueue_configuration_manages_every_tenant_workload():
    """The documented configuration: the integrations whose pods the policy lets through, every workload of a
    tenant namespace managed, only covered resources checked, pods-ready eviction on."""
    config = kueue.configuration(manifests.LABEL_TENANT)
    frameworks = set(config["integrations"]["frameworks"])
    assert {"batch/job", "pod", "deployment", "statefulset", "jobset.x-k8s.io/jobset"} <= frameworks
    assert config["manageJobsWithoutQueueName"] is True
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": manifests.LABEL_TENANT, "operator": "Exists"}]
    }
    assert config["resources"] == {"quotaCheckStrategy": "IgnoreUndeclared"}  # no excludeResourcePrefixes with it
    assert config["waitForPodsReady"]["timeout"]
    doc = (ROOT / "docs/explanation/queueing.md").read_text()
    for name in frameworks:
        assert name in doc


def test_plan_states_each_tenants_ceiling_outside_kueue():
    """`plan -o json` has a row per tenant and granted resource; outside Kueue is 0 (at most the grant) for
    every tenant of the bundled prod stack, and through Kueue is what the gpu-quota ResourceQuota holds.
    speech (granted 2 of 1g.10gb) could take 72 of them and 80 whole GPUs outside Kueue before."""
    spec, plan = _prod()
    doc = json.loads(planfmt.format_json(capacity_plan.compute(spec)))
    rows = doc["queueCeilings"]
    assert {r["tenant"] for r in rows} == {t.name for t in spec.active_tenants}  # offboarded: nothing to hold
    for t in spec.active_tenants:
        for resource, n in t.gpus.items():
            assert any(r["tenant"] == t.name and r["resource"] == resource and r["grant"] == n for r in rows)
    assert all(r["outsideKueue"] == 0 <= r["grant"] for r in rows)
    quota = {
        (o.manifest["metadata"]["namespace"], k.removeprefix("requests.")): int(v)
        for o in plan.objects
        if o.kind == "ResourceQuota" and o.manifest["metadata"]["name"] == "gpu-quota"
        for k, v in o.manifest["spec"]["hard"].items()
    }
    namespaces = {t.name: t.namespace for t in spec.tenants}
    for r in rows:
        assert quota[(namespaces[r["tenant"]], r["resource"])] == r["throughKueue"]
    speech = {r["resource"]: r for r in rows if r["tenant"] == "speech"}
    assert speech["nvidia.com/mig-1g.10gb"]["grant"] == 2 and speech["nvidia.com/mig-1g.10gb"]["outsideKueue"] == 0
    text = planfmt.format_table(capacity_plan.compute(spec))
    assert "OUTSIDE KUEUE" in text


def test_flavor_fungibility_uses_own_quota_before_borrowing(tmp_path):
    """Two flavors of one resource (two whole-GPU pools): a tenant whose grant lands on the second must be
    tried there before it borrows on the first, so each ClusterQueue says TryNextFlavor when it could borrow
    (Kueue's default MayStopSearch stops at the first flavor where borrowing fits)."""
    path = tmp_path / "spec.yaml"
    path.write_text(
        """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: t}
nodePools:
  - {name: h100, gpu: H100-80GB, gpusPerNode: 8, nodes: [a]}
  - {name: b200, gpu: B200-180GB, gpusPerNode: 8, nodes: [b]}
tiers:
  - {name: batch, priority: 10}
tenants:
  - {name: big, tier: batch, owners: [x], gpus: {nvidia.com/gpu: 8}}
  - {name: small, tier: batch, owners: [y], gpus: {nvidia.com/gpu: 8}}
queueing: {}
"""
    )
    spec = load_valid_spec(path)
    queues = {
        o.manifest["metadata"]["name"]: o.manifest for o in manifests.build(spec).objects if o.kind == "ClusterQueue"
    }
    small = queues["small"]["spec"]
    # the grant of `small` lands on the second flavor (big fills h100 first, by name), and both are listed
    flavors = small["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in flavors] == ["h100", "b200"]
    assert [f["resources"][0]["nominalQuota"] for f in flavors] == [0, 8]
    assert small["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    assert all(q["spec"]["flavorFungibility"]["whenCanBorrow"] == "TryNextFlavor" for q in queues.values())


def _validate(tmp_path, text):
    from gpupool.rules.engine import validate_file

    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return [(d.rule, d.message) for d in validate_file(path).report.sorted()]


def test_gp528_checks_the_totals_kueues_webhook_enforces(tmp_path):
    """260 pools in 5 resource groups of 52 flavors: each group is within the CRD's 64, but Kueue's
    ClusterQueue webhook allows 256 flavors in all (clusterqueue_webhook.go:187-197)."""
    kinds = [
        ("L4", ""),
        ("L4", ", sharing: {timeSlicing: {replicas: 2}}"),
        ("A100-40GB", ", sharing: {mig: {preset: all-1g.5gb}}"),
        ("A100-40GB", ", sharing: {mig: {preset: all-2g.10gb}}"),
        ("A100-40GB", ", sharing: {mig: {preset: all-3g.20gb}}"),
    ]
    pools = "".join(
        f"  - {{name: p{k}-{i}, gpu: {gpu}, gpusPerNode: 1, nodes: [n{k}-{i}]{extra}}}\n"
        for k, (gpu, extra) in enumerate(kinds)
        for i in range(52)
    )
    text = (
        "apiVersion: gpupool.dev/v1alpha1\nkind: GpuPlatform\ncluster: {name: t}\nnodePools:\n"
        + pools
        + "tiers:\n  - {name: batch, priority: 10}\n"
        + "tenants:\n  - {name: a, tier: batch, owners: [x], gpus: {nvidia.com/gpu: 1}}\nqueueing: {}\n"
    )
    found = [m for rule, m in _validate(tmp_path, text) if rule == "GP528"]
    assert found and "260 flavors" in found[0] and "256" in found[0], found


def test_gp530_warns_borrow_within_cohort_with_weights(tmp_path):
    base = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: t}
nodePools:
  - {name: whole, gpu: L4, gpusPerNode: 4, nodes: [n1]}
tiers:
  - {name: batch, priority: 10}
tenants:
  - {name: a, tier: batch, owners: [x], gpus: {nvidia.com/gpu: 2}}
queueing:
  tiers:
    batch: {borrowWithinCohort: LowerPriority%s}
"""
    assert "GP530" not in [r for r, _ in _validate(tmp_path, base % "")]
    assert "GP530" in [r for r, _ in _validate(tmp_path, base % ", weight: 3")]
