"""Issue 39, first slice: `allocation: dra` on a node pool gives DeviceClasses that map today's resource names, the
DRA forms of every grant in the tenant's quota, the device plugin off on the pool's nodes, and a per-tenant guard
on ResourceClaims. Pure data: what the API server and kube-scheduler do with it is not proven here (docs/explanation/dra.md)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gpupool.k8s import dra, dra_policy, manifests
from gpupool.rules.engine import load_valid_spec

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {name: dev}
nodePools:
  - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1], sharing: {timeSlicing: {replicas: 2}}}
  - name: a100-dra
    gpu: A100-80GB
    gpusPerNode: 4
    nodes: [gpu-a100-1]
    allocation: dra
    sharing: {mig: {perGpu: [{gpus: [0, 1], preset: all-balanced}, {gpus: [2], layout: {1g.10gb+me: 1, 3g.40gb: 1}}]}}
tiers:
  - {name: production, priority: 1000, isolation: dedicated}
  - {name: standard, priority: 100}
tenants:
  - {name: infer, tier: production, owners: [a], gpus: {nvidia.com/mig-1g.10gb: 2, nvidia.com/gpu: 1}}
  - {name: notebooks, tier: standard, owners: [b], gpus: {nvidia.com/gpu.shared: 4}}
"""


def _plan(tmp_path: Path, text: str = SPEC):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    spec = load_valid_spec(path)
    return spec, manifests.build(spec)


def _one(plan, name):
    return next(o.manifest for o in plan.objects if o.name == name)


def test_bundled_stacks_get_nothing_of_dra():
    """Without `allocation: dra` nothing changes: no class, no DRA quota key, no guard, no new node label."""
    for stack in ("dev", "prod"):
        spec = load_valid_spec(ROOT / "stacks" / stack / "spec.yaml")
        assert all(p.allocation == "device-plugin" and not p.dra for p in spec.pools)
        plan = manifests.build(spec)
        assert not [o for o in plan.objects if o.kind == "DeviceClass" or "dra-guard" in o.name]
        for obj in plan.objects:
            if obj.kind == "ResourceQuota":
                assert not [k for k in obj.manifest["spec"]["hard"] if "deviceclass" in k or "resourceclaims" in k]
            if obj.kind == "Node":
                assert dra.DEPLOY_DEVICE_PLUGIN not in obj.manifest["metadata"].get("labels", {})


def test_a_class_per_profile_and_for_whole_gpus_mapping_todays_names(tmp_path):
    spec, plan = _plan(tmp_path)
    classes = {o.manifest["metadata"]["name"]: o.manifest for o in plan.objects if o.kind == "DeviceClass"}
    pool = spec.pools[1]
    assert {c["spec"]["extendedResourceName"] for c in classes.values()} == set(pool.resources_per_node())
    assert set(classes) == {
        "gpupool-a100-dra-gpu",
        "gpupool-a100-dra-mig-1g.10gb",
        "gpupool-a100-dra-mig-1g.10gb.me",
        "gpupool-a100-dra-mig-2g.20gb",
        "gpupool-a100-dra-mig-3g.40gb",
    }
    for c in classes.values():
        assert c["apiVersion"] == "resource.k8s.io/v1"
        assert c["metadata"]["labels"]["gpupool.dev/pool"] == "a100-dra"
    me = classes["gpupool-a100-dra-mig-1g.10gb.me"]["spec"]["selectors"][0]["cel"]["expression"]
    # The driver publishes the profile with its `+` (the resource name writes it `.`).
    assert "device.driver == 'gpu.nvidia.com'" in me
    assert "device.attributes['gpu.nvidia.com'].type == 'mig'" in me
    assert "device.attributes['gpu.nvidia.com'].profile == '1g.10gb+me'" in me
    assert "'NVIDIA-A100-SXM4-80GB'" in me and "productName.replace(' ', '-')" in me
    whole = classes["gpupool-a100-dra-gpu"]["spec"]["selectors"][0]["cel"]["expression"]
    assert "type == 'gpu'" in whole and "profile" not in whole
    assert classes["gpupool-a100-dra-gpu"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"


def test_the_device_plugin_is_off_on_dra_nodes_only(tmp_path):
    _, plan = _plan(tmp_path)
    dra_node = _one(plan, "pool-a100-dra.gpu-a100-1")["metadata"]["labels"]
    plugin_node = _one(plan, "pool-l4.gpu-l4-1")["metadata"]["labels"]
    assert dra_node[dra.DEPLOY_DEVICE_PLUGIN] == "false"
    assert dra.DEPLOY_DEVICE_PLUGIN not in plugin_node
    # MIG Manager still lays out the partitions the driver publishes; the plugin config is the unshared one.
    assert dra_node[manifests.LABEL_MIG_CONFIG] != manifests.MIG_DISABLED
    assert dra_node[manifests.LABEL_PLUGIN_CONFIG] == manifests.EXCLUSIVE_KEY


def test_quota_keys_are_spelled_as_kube_apiserver_v1_36_3_counts_them(tmp_path):
    """k8s.io/api v0.36.3 core/v1/types.go 7786-7788 and pkg/quota/v1/evaluator/core/resource_claims.go 47."""
    assert dra.PER_CLASS_SUFFIX == ".deviceclass.resource.k8s.io/devices"
    assert dra.IMPLICIT_PREFIX == "requests.deviceclass.resource.kubernetes.io/"
    assert dra.CLAIM_COUNT == "count/resourceclaims.resource.k8s.io"
    _, plan = _plan(tmp_path)
    hard = _one(plan, "tenant-infer-gpu-quota")["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "2"  # the extended resource name, as before
    assert hard["gpupool-a100-dra-mig-1g.10gb.deviceclass.resource.k8s.io/devices"] == "2"
    assert hard["requests.deviceclass.resource.kubernetes.io/gpupool-a100-dra-mig-1g.10gb"] == "2"
    assert hard["gpupool-a100-dra-gpu.deviceclass.resource.k8s.io/devices"] == "1"
    for ungranted in ("gpupool-a100-dra-mig-2g.20gb", "gpupool-a100-dra-mig-1g.10gb.me", *dra.DRIVER_CLASSES):
        assert hard[ungranted + ".deviceclass.resource.k8s.io/devices"] == "0"
        assert hard["requests.deviceclass.resource.kubernetes.io/" + ungranted] == "0"
    assert hard["count/resourceclaims.resource.k8s.io"] == "3"
    other = _one(plan, "tenant-notebooks-gpu-quota")["spec"]["hard"]
    assert other["count/resourceclaims.resource.k8s.io"] == "0"
    assert all(v == "0" for k, v in other.items() if "deviceclass" in k)


def test_an_offboarded_tenant_gets_zero_everywhere(tmp_path):
    text = SPEC.replace(
        "gpus: {nvidia.com/mig-1g.10gb: 2, nvidia.com/gpu: 1}", "offboarded: true, gpus: {nvidia.com/gpu: 1}"
    )
    _, plan = _plan(tmp_path, text)
    hard = _one(plan, "tenant-infer-gpu-quota")["spec"]["hard"]
    assert all(v == "0" for k, v in hard.items() if "deviceclass" in k or "resourceclaims" in k)
    assert _granted(_one(plan, "tenant-infer-dra-guard")) == "none (no DRA grant)"


def _granted(policy) -> str:
    rule = next(v for v in policy["spec"]["validations"] if "dra-ungranted-class" in v["message"])
    return rule["message"].split("granted: ")[1].split(" (gpupool")[0]


def test_the_guard_names_each_rule_and_only_granted_classes(tmp_path):
    _, plan = _plan(tmp_path)
    policy = _one(plan, "tenant-infer-dra-guard")
    binding = _one(plan, "tenant-infer-dra-guard-binding")
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == "gpupool-dra-guard.infer"
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "infer"}
    }
    rule = policy["spec"]["matchConstraints"]["resourceRules"][0]
    assert rule["apiGroups"] == ["resource.k8s.io"]
    assert set(rule["resources"]) == {"resourceclaims", "resourceclaimtemplates"}
    status_rule = policy["spec"]["matchConstraints"]["resourceRules"][1]
    assert status_rule["resources"] == ["resourceclaims/status"] and status_rule["operations"] == ["UPDATE"]
    messages = [v["message"] for v in policy["spec"]["validations"]]
    rules = ("dra-forged-claim", "dra-allocation-all", "dra-admin-access", "dra-shared-claim", "dra-ungranted-class")
    for name in rules:
        assert sum(f"rule {name})" in msg for msg in messages) == 1
    assert _granted(policy) == "gpupool-a100-dra-gpu, gpupool-a100-dra-mig-1g.10gb"
    text = yaml.safe_dump(policy)
    assert "resource.kubernetes.io/extended-resource-claim" in text and "system:kube-scheduler" in text
    ungranted = next(v["expression"] for v in policy["spec"]["validations"] if "ungranted" in v["message"])
    assert "firstAvailable" in ungranted and "'gpupool-a100-dra-mig-2g.20gb'" not in ungranted
    assert _granted(_one(plan, "tenant-notebooks-dra-guard")) == "none (no DRA grant)"


def test_class_names_fit_a_resource_name_part():
    """The implicit extended resource `deviceclass.resource.kubernetes.io/<class>` is a quota key: its name
    part holds at most 63 characters, so a long pool name is cut and made unique by a hash."""
    from gpupool.model import platform as m

    long = m.NodePool("p" * 63, "A100-80GB", 1, 1, allocation=m.DRA)
    other = m.NodePool("p" * 62 + "q", "A100-80GB", 1, 1, allocation=m.DRA)
    names = {dra.class_name(pool, "nvidia.com/mig-1g.10gb.me") for pool in (long, other)}
    assert len(names) == 2 and all(len(n) <= dra.MAX_CLASS_NAME for n in names)


def test_policy_module_constants_match_upstream():
    """The annotation kube-scheduler v1.36.3 writes (k8s.io/api v0.36.3 resource/v1/types.go 37)."""
    assert dra_policy.EXTENDED_CLAIM_ANNOTATION == "resource.kubernetes.io/extended-resource-claim"


def test_plan_shows_each_pools_allocation_only_where_a_pool_uses_dra(capsys):
    """`gpupool plan` names who hands out a pool's devices: an ALLOCATION column (and `allocation` in JSON) for
    the DRA stack; the table of a platform without DRA pools is as before."""
    from gpupool.cli.main import main

    assert main(["plan", str(ROOT / "stacks" / "dra" / "spec.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("Pools") + 1
    assert lines[header].split() == ["POOL", "GPU", "NODES", "GPUS", "SHARING", "ALLOCATION", "PRICE/GPU-H"]
    rows = {line.split()[0]: line.split() for line in lines[header + 1 : header + 3]}
    assert rows["a100-mig"][5] == "dra" and rows["l4-shared"][5] == "device-plugin"
    assert main(["plan", str(ROOT / "stacks" / "dra" / "spec.yaml"), "-o", "json"]) == 0
    pools = {p["name"]: p["allocation"] for p in json.loads(capsys.readouterr().out)["pools"]}
    assert pools == {"l4-shared": "device-plugin", "a100-mig": "dra"}
    assert main(["plan", str(ROOT / "stacks" / "dev" / "spec.yaml")]) == 0
    assert "ALLOCATION" not in capsys.readouterr().out


def _dra_with_queueing(tmp_path: Path):
    import shutil

    stack = tmp_path / "dra"
    shutil.copytree(ROOT / "stacks" / "dra", stack)
    (stack / "spec.yaml").write_text((stack / "spec.yaml").read_text() + "\nqueueing: {}\n")
    return load_valid_spec(stack / "spec.yaml")


def test_kueue_counts_each_dra_class_under_the_name_the_queues_hold(tmp_path):
    """With queueing, Kueue's Configuration maps each DRA class to the resource name it serves (the name the
    ClusterQueues give quota), so claims from templates and pods asking the name draw on one quota; render writes
    it out for Kueue's install. Expected: from the DeviceClass objects themselves."""
    from gpupool.k8s.render import KUEUE_CONFIG_FILE, render_documents

    plan = manifests.build(_dra_with_queueing(tmp_path))
    classes = [o.manifest for o in plan.objects if o.kind == "DeviceClass"]
    expected = sorted(
        ({"name": c["spec"]["extendedResourceName"], "deviceClassNames": [c["metadata"]["name"]]} for c in classes),
        key=lambda x: x["name"],
    )
    assert plan.queues is not None and len(expected) == 3
    config = plan.queues.configuration
    assert config["resources"]["deviceClassMappings"] == expected
    assert config["resources"]["quotaCheckStrategy"] == "IgnoreUndeclared"
    queued = {r["name"] for q in plan.queues.by_tenant.values() for r in _cq_resources(q)}
    assert {m["name"] for m in expected} <= queued
    assert yaml.safe_load(render_documents(plan)[KUEUE_CONFIG_FILE]) == config
    prod = manifests.build(load_valid_spec(ROOT / "stacks" / "prod" / "spec.yaml"))
    assert prod.queues is not None and "deviceClassMappings" not in prod.queues.configuration["resources"]
    assert KUEUE_CONFIG_FILE not in render_documents(manifests.build(load_valid_spec(ROOT / "stacks/dra/spec.yaml")))


def _cq_resources(objects: list[dict]) -> list[dict]:
    cq = next(o for o in objects if o["kind"] == "ClusterQueue")
    return [r for group in cq["spec"]["resourceGroups"] for f in group["flavors"] for r in f["resources"]]


def test_the_queue_policy_sends_dra_pods_through_templates(tmp_path):
    """With DRA pools and queueing, a pod with any ResourceClaim is a GPU pod (it goes through Kueue), and neither a
    pod nor a workload's pod template may name a ResourceClaim directly: Kueue counts templates only."""
    from gpupool.k8s import kueue_policy

    plan = manifests.build(_dra_with_queueing(tmp_path))
    policy = next(o.manifest for o in plan.objects if o.name == "queue-policy")
    gpu = next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == "gpu")
    assert "resourceClaims" in gpu
    assert kueue_policy.DIRECT_CLAIM_VALIDATION in policy["spec"]["validations"]
    prod = manifests.build(load_valid_spec(ROOT / "stacks" / "prod" / "spec.yaml"))
    prod_policy = next(o.manifest for o in prod.objects if o.name == "queue-policy")
    assert kueue_policy.DIRECT_CLAIM_VALIDATION not in prod_policy["spec"]["validations"]
    assert "resourceClaims" not in json.dumps(prod_policy)


def test_a_pool_switching_to_dra_is_a_cutover_with_each_tenants_grant_before_and_after(tmp_path, capsys):
    """`gpupool diff` of dev against dev with its MIG pool on DRA: a ⚠ cutover alert naming the pool, and one row
    per tenant and name the pool serves, equal before and after (the tenants' files are read here for the expected
    rows), each with the class that serves it; back again, the same rows, each naming the class that goes."""
    import shutil

    from gpupool.cli.main import main

    head = tmp_path / "dev"
    shutil.copytree(ROOT / "stacks" / "dev", head)
    text = (head / "spec.yaml").read_text()
    assert text.count("nodes: [dev-gpu-a100-1]\n") == 1
    (head / "spec.yaml").write_text(
        text.replace("nodes: [dev-gpu-a100-1]\n", "nodes: [dev-gpu-a100-1]\n    allocation: dra\n")
    )
    mig_names = {"nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"}
    expected = sorted(
        (t["name"], r, n, n)
        for f in sorted((ROOT / "stacks" / "dev" / "tenants").glob("*.yaml"))
        for t in [yaml.safe_load(f.read_text())]
        for r, n in t.get("gpus", {}).items()
        if r in mig_names
    )
    assert expected  # dev grants MIG names
    for base, after, before in (
        (ROOT / "stacks" / "dev" / "spec.yaml", "dra", "device-plugin"),
        (head / "spec.yaml", "device-plugin", "dra"),
    ):
        other = head / "spec.yaml" if after == "dra" else ROOT / "stacks" / "dev" / "spec.yaml"
        assert main(["diff", str(base), str(other), "-o", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert {"risk": "allocationCutover", "count": 1, "names": ["a100-mig"]} in doc["alerts"]
        assert doc["verdict"] == "risky" and doc["summary"]["poolsCuttingOver"] == 1
        [cut] = doc["allocationCutovers"]
        assert (cut["pool"], cut["before"], cut["after"], cut["nodes"]) == (
            "a100-mig",
            before,
            after,
            ["dev-gpu-a100-1"],
        )
        rows = sorted((g["tenant"], g["resource"], g["before"], g["after"]) for g in cut["grants"])
        assert rows == expected
        classes = {g["resource"]: g["deviceClass"] for g in cut["grants"]}
        assert classes["nvidia.com/mig-1g.10gb"] == "gpupool-a100-mig-mig-1g.10gb"
        assert cut["driverInstalled"] is True  # the default: gpupool installs the driver
    assert main(["diff", str(ROOT / "stacks" / "dev" / "spec.yaml"), str(head / "spec.yaml")]) == 0
    out = capsys.readouterr().out
    assert "⚠ HEAD applies, but it switches 1 pool between the device plugin and DRA." in out
    assert "allocation device-plugin → dra: the device plugin stops on dev-gpu-a100-1" in out
    assert "NVIDIA's DRA driver, which gpupool installs beside the GPU Operator" in out
    # A cluster that runs the driver itself: the reviewer is told it must be there first.
    text = (head / "spec.yaml").read_text()
    (head / "spec.yaml").write_text(text.replace("  name: dev\n", "  name: dev\n  draDriver: {install: false}\n", 1))
    assert main(["diff", str(ROOT / "stacks" / "dev" / "spec.yaml"), str(head / "spec.yaml"), "-o", "json"]) == 0
    [cut] = json.loads(capsys.readouterr().out)["allocationCutovers"]
    assert cut["driverInstalled"] is False
    assert main(["diff", str(ROOT / "stacks" / "dev" / "spec.yaml"), str(head / "spec.yaml")]) == 0
    assert "which the cluster must run there first (cluster.draDriver.install: false)" in capsys.readouterr().out
