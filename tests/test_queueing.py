"""The opt-in `queueing:` block: the Kueue objects gpupool makes and the figures they carry (gpupool.model.queues,
gpupool.k8s.kueue). What Kueue does with them is proven against the real controller in tests/e2e/test_kueue.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpupool.k8s import kueue, manifests
from gpupool.model import queues
from gpupool.rules.engine import load_valid_spec, validate_file

ROOT = Path(__file__).resolve().parents[1]

SMALL = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: test}
nodePools:
  - {name: whole, gpu: L4, gpusPerNode: 4, nodes: [n1]}
  - {name: mig, gpu: A100-40GB, gpusPerNode: 1, nodes: [n2], sharing: {mig: {preset: all-1g.5gb}}}
tiers:
  - {name: inference, priority: 1000}
  - {name: batch, priority: 10}
tenants:
  - {name: serve, tier: inference, owners: [a], gpus: {nvidia.com/gpu: 2, nvidia.com/mig-1g.5gb: 3}}
  - {name: train, tier: batch, owners: [b], gpus: {nvidia.com/gpu: 2}}
  - {name: gone, tier: batch, owners: [c], offboarded: true}
queueing:
  tiers:
    inference: {lendingLimit: 0}
    batch: {reclaim: Never}
"""


def _spec(tmp_path, text=SMALL):
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return load_valid_spec(path)


def _kinds(plan):
    return [o.kind for o in plan.objects if o.manifest["apiVersion"].startswith("kueue.x-k8s.io/")]


def test_dev_has_no_kueue_object_and_prod_has_them_all():
    """Opt-in: a cluster without Kueue's CRDs (dev) gets nothing of Kueue; prod gets every kind."""
    dev = manifests.build(load_valid_spec(ROOT / "stacks/dev/spec.yaml"))
    assert _kinds(dev) == []
    assert not [o for o in dev.objects if o.name.startswith("queue-policy")]
    prod_spec = load_valid_spec(ROOT / "stacks/prod/spec.yaml")
    kinds = _kinds(manifests.build(prod_spec))
    assert kinds.count("ResourceFlavor") == len(prod_spec.pools)
    assert kinds.count("ClusterQueue") == kinds.count("LocalQueue") == len(prod_spec.tenants)
    assert kinds.count("WorkloadPriorityClass") == len(prod_spec.tiers)
    assert kinds.count("Cohort") == 1 + len(prod_spec.queueing.cohorts)


def test_objects_carry_the_grants_the_tiers_and_the_pool_labels(tmp_path):
    spec = _spec(tmp_path)
    objs = {(o.kind, o.manifest["metadata"]["name"]): o for o in manifests.build(spec).objects}
    flavor = objs[("ResourceFlavor", "mig")].manifest
    assert flavor["spec"]["nodeLabels"] == {manifests.LABEL_POOL: "mig"}
    serve = objs[("ClusterQueue", "serve")].manifest["spec"]
    assert serve["cohortName"] == "test"  # the root defaults to the cluster name
    assert serve["namespaceSelector"] == {"matchLabels": {manifests.LABEL_TENANT: "serve"}}
    quota = {(f["name"], r["name"]): r for g in serve["resourceGroups"] for f in g["flavors"] for r in f["resources"]}
    assert quota[("whole", "nvidia.com/gpu")] == {"name": "nvidia.com/gpu", "nominalQuota": 2, "lendingLimit": 0}
    assert quota[("mig", "nvidia.com/mig-1g.5gb")]["nominalQuota"] == 3
    train = objs[("ClusterQueue", "train")].manifest["spec"]
    assert train["preemption"]["reclaimWithinCohort"] == "Never"
    assert objs[("ClusterQueue", "gone")].manifest["spec"]["stopPolicy"] == "Hold"
    lq = objs[("LocalQueue", "default")].manifest
    assert lq["spec"] == {"clusterQueue": lq["metadata"]["namespace"]}
    assert objs[("WorkloadPriorityClass", "inference")].manifest["value"] == 1000


def test_resource_quota_fits_the_most_kueue_can_admit(tmp_path):
    """serve lends nothing, so train can borrow none of serve's quota; serve may borrow train's idle GPUs.
    Each tenant's ResourceQuota is exactly nominal + what it can borrow (Kueue does not read quotas)."""
    spec = _spec(tmp_path)
    most = queues.max_admitted(spec, spec.queueing)
    assert most["serve"]["nvidia.com/gpu"] == 2 + 2
    assert most["train"]["nvidia.com/gpu"] == 2
    assert most["train"]["nvidia.com/mig-1g.5gb"] == 0
    assert most["gone"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 0}
    quotas = {o.name: o.manifest["spec"]["hard"] for o in manifests.build(spec).objects if o.kind == "ResourceQuota"}
    assert quotas["tenant-serve-gpu-quota"]["requests.nvidia.com/gpu"] == "4"
    assert quotas["tenant-train-gpu-quota"]["requests.nvidia.com/gpu"] == "2"


def test_a_grant_several_pools_supply_fills_them_in_order_higher_tiers_first():
    spec = load_valid_spec(ROOT / "stacks/prod/spec.yaml")
    split = queues.nominal_split(spec, spec.queueing)
    # nvidia.com/gpu comes from h100-train (64) and b200-train (16): the production tenants fill h100-train
    # by name (ads 8, then llm-training 56), the rest spills to b200-train.
    gpu = {(t, p): n for (t, p, r), n in split.items() if r == "nvidia.com/gpu" and n}
    assert sum(n for (t, p), n in gpu.items() if p == "h100-train") == 64
    assert sum(n for (t, p), n in gpu.items() if p == "b200-train") <= 16
    for tenant in spec.active_tenants:
        for resource in tenant.gpus:
            placed = sum(n for (t, p, r), n in split.items() if t == tenant.name and r == resource)
            assert placed == queues.guaranteed(spec, tenant, resource)
    for line in queues.flavor_lines(spec, spec.queueing):
        assert line.nominal + line.cohort_quota <= line.capacity, line


def test_an_oversubscribed_resource_guarantees_the_grant_divided_by_the_ratio():
    spec = load_valid_spec(ROOT / "stacks/prod/spec.yaml")
    notebooks = next(t for t in spec.tenants if t.name == "notebooks")
    assert spec.oversubscription.ratio_for("nvidia.com/gpu.shared") == 1.5
    assert queues.guaranteed(spec, notebooks, "nvidia.com/gpu.shared") == 133  # floor(200 / 1.5)


@pytest.mark.parametrize("stack", ["prod"])
def test_resource_groups_are_what_kuenes_webhook_and_cel_accept(stack):
    """Mirrors kueue v0.19.2: every flavor lists exactly the covered resources, in their order (CEL,
    apis/kueue/v1beta2/clusterqueue_types.go:254 and the webhook's name check, pkg/webhooks/
    clusterqueue_webhook.go:339-341); no resource and no flavor in two groups (:302-329); at most 16 groups
    (clusterqueue_types.go:74); lendingLimit <= nominalQuota (clusterqueue_webhook.go:382-388)."""
    spec = load_valid_spec(ROOT / f"stacks/{stack}/spec.yaml")
    for obj in manifests.build(spec).objects:
        if obj.kind != "ClusterQueue":
            continue
        groups = obj.manifest["spec"]["resourceGroups"]
        assert len(groups) <= 16
        resources = [r for g in groups for r in g["coveredResources"]]
        flavors = [f["name"] for g in groups for f in g["flavors"]]
        assert len(resources) == len(set(resources)) and len(flavors) == len(set(flavors))
        for g in groups:
            for f in g["flavors"]:
                assert [r["name"] for r in f["resources"]] == g["coveredResources"]
                for r in f["resources"]:
                    assert r.get("lendingLimit", 0) <= r["nominalQuota"]


def test_queue_policy_allows_only_the_own_tier_and_lower():
    spec = load_valid_spec(ROOT / "stacks/prod/spec.yaml")
    allowed = kueue.allowed_priority_classes(spec)
    assert allowed["preemptible"] == ["preemptible"]
    assert set(allowed["critical"]) == {t.name for t in spec.tiers}
    assert "critical" not in allowed["production"]


def test_rules_point_at_the_spec(tmp_path):
    """A lending limit above a tenant's nominal quota, and a cohort quota more than the pool places."""
    text = SMALL.replace("inference: {lendingLimit: 0}", "inference: {lendingLimit: 3}").replace(
        "  tiers:\n",
        "  cohorts:\n    - {name: extra, tenants: [train], quota: {whole: {nvidia.com/gpu: 1}}}\n  tiers:\n",
    )
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    report = validate_file(path).report
    found = {(d.rule, d.location.line) for d in report.sorted()}
    lines = text.splitlines()
    assert ("GP524", next(i + 1 for i, s in enumerate(lines) if "lendingLimit: 3" in s)) in found
    assert any(rule == "GP620" for rule, _ in found)


def test_plan_shows_nominal_lendable_and_borrowable_per_flavor(tmp_path):
    import json

    from gpupool.analysis import plan as capacity_plan
    from gpupool.present import plan as planfmt

    spec = _spec(tmp_path)
    plan = capacity_plan.compute(spec)
    rows = {(x["flavor"], x["resource"]): x for x in json.loads(planfmt.format_json(plan))["queues"]}
    whole = rows[("whole", "nvidia.com/gpu")]
    # serve (2, lends nothing) and train (2): 4 nominal of 4, train's 2 lendable
    assert (whole["capacity"], whole["nominal"], whole["lendable"], whole["borrowable"]) == (4, 4, 2, 2)
    assert "Kueue quota by flavor" in planfmt.format_table(plan)


def test_kueue_quotas_wait_for_every_node_patch_and_plain_quotas_do_not(tmp_path):
    """Issue 35 item 5, quotas follow the hardware: a tenant's ClusterQueue, LocalQueue and the ResourceQuota sized
    to them are applied after every named node's pool patch, the last step of its re-layout (gpupool.k8s.rollout),
    so Kueue never hears of a profile before the nodes offer it, and keeps the old one until none carries it.
    Without queueing the ResourceQuota is the grant itself and waits for nothing but its namespace."""
    spec = _spec(tmp_path)
    plan = manifests.build(spec)
    patches = {manifests.node_patch_name(p, n) for p in spec.pools for n in p.nodes}
    assert patches == {"pool-whole.n1", "pool-mig.n2"}
    assert patches <= {o.name for o in plan.objects if o.patch and o.kind == "Node"}
    for tenant in spec.tenants:
        base = f"tenant-{tenant.name}"
        objs = {o.name: o for o in plan.objects if o.component == f"tenant:{tenant.name}"}
        for name in (f"{base}-clusterqueue", f"{base}-localqueue", f"{base}-gpu-quota"):
            assert set(objs[name].depends_on) == {f"{base}-ns"} | patches, (name, objs[name].depends_on)
        # the rest of the tenant (namespace, RBAC, defaults) does not wait for a rollout
        assert not set(objs[f"{base}-container-defaults"].depends_on) & patches
    plain = manifests.build(_spec(tmp_path, SMALL.split("queueing:")[0]))
    quota = next(o for o in plain.objects if o.name == "tenant-serve-gpu-quota")
    assert quota.depends_on == ("tenant-serve-ns",)


def test_registered_clusterqueues_depend_on_the_node_patches(monkeypatch):
    """The same ordering as Pulumi receives it (prod, under mocks): each ClusterQueue's dependencies name every
    pool patch of a named node, so the engine applies it only after the rollout's last relabel."""
    from tests.pulumi_mocks import run_program

    monkeypatch.chdir(ROOT)
    _, monitor, error = run_program({"spec": "stacks/prod/spec.yaml"}, stack="prod")
    assert error is None, error
    spec = load_valid_spec(ROOT / "stacks/prod/spec.yaml")
    names = {f"gpupool-{manifests.node_patch_name(p, n)}" for p in spec.pools for n in p.nodes}
    patches = {
        r["urn"]
        for r in monitor.requests.values()
        if r["type"] == "kubernetes:core/v1:NodePatch" and r["urn"].rsplit("::", 1)[1] in names
    }
    assert names and len(patches) == len(names)
    queues_ = [r for r in monitor.requests.values() if r["type"] == "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"]
    assert queues_
    for cq in queues_:
        assert patches <= set(cq["dependencies"]), cq["urn"]
