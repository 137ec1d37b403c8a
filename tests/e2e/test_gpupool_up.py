"""gpupool end to end: the real Pulumi engine and provider against a local kube-apiserver.

One stack lives through the whole module, in the order a platform team would live it: first `up`, a
no-op preview, edits that must be in-place updates, what the API server then enforces, and finally
removing tenants. Each test builds on the state the previous one left.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from components.program import PLATFORM_NAME

from .mig_manager_sim import MigManagerSim
from .stack import E2EStack

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"

# What the dev stack's nodes advertise (its spec: 4 L4s time-sliced x4; 4 A100-80GB all-balanced).
DEV_NODES = {
    "dev-gpu-l4-1": {"nvidia.com/gpu.shared": "16"},
    "dev-gpu-a100-1": {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"},
}

P = f"{PLATFORM_NAME}-"  # the program's GpuPlatform names every child after itself


@pytest.fixture(scope="module")
def stack(control_plane, toolchain_bin, tmp_path_factory) -> E2EStack:
    for name, resources in DEV_NODES.items():
        control_plane.create_gpu_node(name, resources)
    work = tmp_path_factory.mktemp("gpupool-dev")
    shutil.copytree(REPO / "stacks" / "dev", work / "dev")
    s = E2EStack(toolchain_bin, control_plane.kubeconfig, work, spec=work / "dev" / "spec.yaml", chart=STUB_CHART)
    # A MIG re-layout waits for MIG Manager's success on every node it changes (gpupool.k8s.rollout).
    with MigManagerSim(control_plane, tuple(DEV_NODES), pending_delay=0.2, apply_delay=0.5):
        yield s
    s.close()


def _pod(name: str, resources: dict | None = None, priority_class: str | None = None) -> dict:
    container = {"name": "main", "image": "registry.invalid/app:1"}
    if resources:
        container["resources"] = {"limits": resources}
    spec = {"containers": [container]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _create_pod(control_plane, namespace: str, pod: dict, *, as_user=None, as_groups=()):
    return control_plane.kubectl(
        "create", "-n", namespace, "-f", "-", input=json.dumps(pod), check=False, as_user=as_user, as_groups=as_groups
    )


def test_up_creates_the_dev_stack_and_a_second_preview_changes_nothing(stack, control_plane):
    result = stack.up()
    assert result.summary.result == "succeeded"
    quota = control_plane.get_json("resourcequota", "gpu-quota", "-n", "research")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "8"
    node = control_plane.get_json("node", "dev-gpu-a100-1")
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "a100-80gb-all-balanced"
    assert node["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "exclusive.default"
    ops = stack.preview_ops()
    changed = {urn: op for urn, op in ops.items() if op != "same"}
    assert not changed, f"second preview is not a no-op: {changed}"


def test_operands_keep_the_operators_env_and_get_gpupools_hash(stack, control_plane):
    """The stub chart merges values env per variable into its template, as the operator does: gpupool's
    hash joins the template's env and overrides none of it (DEVICE_LIST_STRATEGY stays the CDI one)."""
    from gpupool.k8s.manifests import HASH_ENV_MIG, HASH_ENV_PLUGIN

    def env(daemonset: str) -> dict:
        ds = control_plane.get_json("daemonset", daemonset, "-n", "gpu-operator")
        return {e["name"]: e.get("value") for e in ds["spec"]["template"]["spec"]["containers"][0]["env"]}

    plugin = env("nvidia-device-plugin-daemonset")
    assert plugin["DEVICE_LIST_STRATEGY"] == "cdi-annotations,cdi-cri"
    assert plugin["PASS_DEVICE_SPECS"] == "true" and plugin["CDI_ENABLED"] == "true"
    assert len(plugin[HASH_ENV_PLUGIN]) == 16
    gfd = env("gpu-feature-discovery")
    assert gfd["GFD_SLEEP_INTERVAL"] == "60s" and HASH_ENV_PLUGIN in gfd
    mig = env("nvidia-mig-manager")
    assert "NODE_NAME" in mig and HASH_ENV_MIG in mig


def test_quota_edit_is_an_in_place_update_of_exactly_that_quota(stack, control_plane):
    stack.edit("dev/tenants/notebooks.yaml", "nvidia.com/gpu.shared: 6", "nvidia.com/gpu.shared: 4")
    ops = stack.preview_ops()
    changed = {urn.split("::")[-1].removeprefix(P): op for urn, op in ops.items() if op != "same"}
    assert changed == {"tenant-notebooks-gpu-quota": "update"}
    stack.up()
    quota = control_plane.get_json("resourcequota", "gpu-quota", "-n", "notebooks")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "4"


def test_a_tier_priority_edit_previews_and_replaces_its_class_and_the_tiers_pods_stay_admitted(stack, control_plane):
    """Proves: `priority: 10000 -> 20000` of the tier `standard` previews as a replacement of its class (the preview
    `pulumi up` runs first, and `pulumi preview`), then `up` deletes and re-creates the class at 20000 (value is
    immutable: kubernetes pkg/apis/scheduling/validation/validation.go, ValidatePriorityClassUpdate), its tenants'
    guards follow, a pod naming the tier is admitted, and the next preview is a no-op.

    The preview used to fail: the provider dry-runs the new class over the live one ("value: Forbidden: may not be
    changed in an update") and retries under another name only for "field is immutable" (pulumi-kubernetes
    provider/pkg/await/await.go, Creation, 205-228). Now the class's `gpupool.dev/tier-priority` annotation comes from
    the tier's record (a dynamic resource: no preview support, so its output is unknown in this preview), and the
    provider skips the dry run for an input that is unknown (provider/pkg/provider/provider.go, Create,
    hasComputedValue). gpupool/deploy/tier_priority_provider.py has the sources."""
    before = control_plane.get_json("priorityclass", "standard")
    assert before["value"] == 10000
    assert before["metadata"]["annotations"]["gpupool.dev/tier-priority"] == "10000 PreemptLowerPriority"
    stack.edit("dev/spec.yaml", "priority: 10000\n", "priority: 20000\n")  # not production's 100000
    ops = stack.preview_ops()
    changed = {urn.split("::")[-1].removeprefix(P): op for urn, op in ops.items() if op != "same"}
    assert changed.get("tier-standard") in ("replace", "create-replacement", "delete-replaced"), changed
    assert changed.get("tier-standard_priority") == "update", changed
    assert "tier-production" not in changed and "tier-production_priority" not in changed, changed
    assert stack.up().summary.result == "succeeded"
    after = control_plane.get_json("priorityclass", "standard")
    assert after["value"] == 20000 and after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["metadata"]["annotations"]["gpupool.dev/tier-priority"] == "20000 PreemptLowerPriority"
    assert control_plane.get_json("priorityclass", "production")["value"] == 100000
    policy = control_plane.get_json("validatingadmissionpolicy", "gpupool-priority-guard.notebooks")
    assert [v["expression"] for v in policy["spec"]["validations"]] == [
        "variables.className == 'standard' || variables.priority <= 20000"
    ]
    made = _create_pod(control_plane, "notebooks", _pod("tier-pod", priority_class="standard"))
    assert made.returncode == 0, made.stderr
    control_plane.kubectl("delete", "pod", "tier-pod", "-n", "notebooks", "--wait=false", check=False)
    assert not {u: op for u, op in stack.preview_ops().items() if op != "same"}


def test_time_slicing_edit_updates_the_config_map_in_place_and_rolls_the_device_plugin(stack, control_plane):
    stack.edit("dev/spec.yaml", "replicas: 4", "replicas: 6")
    ops = stack.preview_ops()
    changed = {urn.split("::")[-1].removeprefix(P): op for urn, op in ops.items() if op != "same"}
    assert changed.get("device-plugin-config") == "update", changed  # not "replace"
    assert "mig-config" not in changed
    assert not any(op in ("replace", "create-replacement", "delete-replaced") for op in changed.values()), changed
    text = stack.preview_diff_text()
    assert "+-" not in text.split("Resources:")[0], text  # no replacement anywhere in the step list
    # The embedded config is diffed as YAML, field by field: what a reviewer needs to read.
    assert "~ l4-shared: (yaml)" in text and "replicas: 4 => 6" in text, text
    uid = control_plane.get_json("configmap", "gpupool-device-plugin-config", "-n", "gpu-operator")["metadata"]["uid"]
    before = control_plane.get_json("daemonset", "nvidia-device-plugin-daemonset", "-n", "gpu-operator")
    mig_before = control_plane.get_json("daemonset", "nvidia-mig-manager", "-n", "gpu-operator")
    stack.up()
    cm = control_plane.get_json("configmap", "gpupool-device-plugin-config", "-n", "gpu-operator")
    assert "replicas: 6" in cm["data"]["l4-shared"]
    assert cm["metadata"]["uid"] == uid  # the same object, updated in place
    after = control_plane.get_json("daemonset", "nvidia-device-plugin-daemonset", "-n", "gpu-operator")
    mig_after = control_plane.get_json("daemonset", "nvidia-mig-manager", "-n", "gpu-operator")
    env = lambda ds: ds["spec"]["template"]["spec"]["containers"][0]["env"]  # noqa: E731
    assert env(before) != env(after), "device plugin pod template unchanged: it would not reload its config"
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert env(mig_before) == env(mig_after), "a sharing edit must not restart the MIG Manager"


def test_mig_layout_edit_updates_the_mig_config_in_place_and_relabels_the_node(stack, control_plane):
    stack.edit(
        "dev/spec.yaml",
        "        preset: all-balanced",
        "        perGpu:\n          - {gpus: [0, 1, 2], preset: all-balanced}\n"
        "          - {gpus: [3], layout: {1g.10gb: 7}}",
    )
    ops = stack.preview_ops()
    changed = {urn.split("::")[-1].removeprefix(P): op for urn, op in ops.items() if op != "same"}
    assert changed.get("mig-config") == "update", changed
    # The node's rollout chain relabels it (cordon, the mig step, uncordon: gpupool.k8s.rollout); its pool patch,
    # which carries the final labels, after it.
    for step in ("cordon", "mig", "uncordon"):
        assert changed.get(f"pool-a100-mig.dev-gpu-a100-1_{step}") == "update", changed
    assert changed.get("pool-a100-mig.dev-gpu-a100-1") == "update", changed
    assert "device-plugin-config" not in changed
    stack.up()
    node = control_plane.get_json("node", "dev-gpu-a100-1")
    label = node["metadata"]["labels"]["nvidia.com/mig.config"]
    assert label != "a100-80gb-all-balanced"
    cm = control_plane.get_json("configmap", "gpupool-mig-config", "-n", "gpu-operator")
    configs = yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"]
    assert label in configs, f"node label {label} names no mig-parted config: {sorted(configs)}"
    assert configs[label][1] == {"devices": [3], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}


def test_quota_rejects_a_pod_over_the_tenant_gpu_quota(stack, control_plane):
    # Nine containers of one: a container of more is refused first, by failRequestsGreaterThanOne's check.
    too_many = _pod("too-many", {"nvidia.com/gpu.shared": "1"})
    too_many["spec"]["containers"] = [dict(too_many["spec"]["containers"][0], name=f"c{i}") for i in range(9)]
    out = _create_pod(control_plane, "research", too_many)
    assert out.returncode != 0 and "exceeded quota" in out.stderr, out.stderr
    out = _create_pod(control_plane, "research", _pod("whole-gpu", {"nvidia.com/gpu": "1"}))
    assert out.returncode != 0 and "exceeded quota" in out.stderr, out.stderr
    ok = _create_pod(control_plane, "research", _pod("fits", {"nvidia.com/gpu.shared": "1"}))
    assert ok.returncode == 0, ok.stderr


def test_quota_rejects_a_mig_profile_the_tenant_was_not_granted(stack, control_plane):
    out = _create_pod(control_plane, "research", _pod("mig", {"nvidia.com/mig-1g.10gb": "1"}))
    assert out.returncode != 0 and "exceeded quota" in out.stderr, out.stderr
    ok = _create_pod(control_plane, "inference", _pod("mig", {"nvidia.com/mig-3g.40gb": "1"}))
    assert ok.returncode == 0, ok.stderr


def test_a_container_that_asks_for_no_gpu_gets_none_but_gets_cpu_memory_defaults(stack, control_plane):
    ok = _create_pod(control_plane, "inference", _pod("cpu-only"))
    assert ok.returncode == 0, ok.stderr
    pod = control_plane.get_json("pod", "cpu-only", "-n", "inference")
    resources = pod["spec"]["containers"][0]["resources"]
    names = set(resources.get("limits", {})) | set(resources.get("requests", {}))
    assert not [n for n in names if n.startswith("nvidia.com/")], resources
    assert resources["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert resources["limits"] == {"cpu": "2", "memory": "4Gi"}


def test_a_tenant_may_not_use_a_higher_tier_priority_class(stack, control_plane):
    out = _create_pod(control_plane, "research", _pod("vip", priority_class="production"))
    # The guard policy refuses it before quota admission (which would refuse it too) runs.
    assert out.returncode != 0 and "gpupool-priority-guard.research" in out.stderr, out.stderr
    ok = _create_pod(control_plane, "research", _pod("batch", priority_class="batch"))
    assert ok.returncode == 0, ok.stderr


def test_tenant_owner_runs_workloads_but_cannot_change_quotas_or_see_other_tenants(stack, control_plane):
    who = {"as_user": "rita", "as_groups": ["research-admins"]}  # research's owners get the default role, edit
    ok = _create_pod(control_plane, "research", _pod("by-owner", {"nvidia.com/gpu.shared": "1"}), **who)
    assert ok.returncode == 0, ok.stderr
    out = control_plane.kubectl(
        "patch",
        "resourcequota",
        "gpu-quota",
        "-n",
        "research",
        "--type=merge",
        "-p",
        '{"spec":{"hard":{"requests.nvidia.com/gpu.shared":"100"}}}',
        check=False,
        **who,
    )
    assert out.returncode != 0 and "forbidden" in out.stderr.lower(), out.stderr
    out = control_plane.kubectl("delete", "limitrange", "container-defaults", "-n", "research", check=False, **who)
    assert out.returncode != 0 and "forbidden" in out.stderr.lower(), out.stderr
    assert control_plane.kubectl("get", "resourcequota", "-n", "research", check=False, **who).returncode == 0
    # Kubernetes' aggregated edit role: the objects the old hand-written role denied tenants are theirs now.
    for kind in (
        "networkpolicies.networking.k8s.io",
        "poddisruptionbudgets.policy",
        "horizontalpodautoscalers.autoscaling",
        "ingresses.networking.k8s.io",
    ):
        assert _can(control_plane, "create", kind, "research", **who), kind
    for verb in (("get", "pods"), ("create", "configmap", "x")):
        out = control_plane.kubectl(*verb, "-n", "inference", check=False, **who)
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), out.stderr


def _can(control_plane, verb: str, resource: str, namespace: str, **who) -> bool:
    out = control_plane.kubectl("auth", "can-i", verb, resource, "-n", namespace, check=False, **who)
    assert out.stdout.strip() in ("yes", "no"), out.stdout + out.stderr
    return out.stdout.strip() == "yes"


def test_no_owner_role_can_change_its_quotas_or_limit_ranges(stack, control_plane):
    """admin, edit and view (the roles ownerRole offers) against the real API server's RBAC, service-account
    owners included: every role runs (or reads) what it should, none can touch ResourceQuotas or LimitRanges."""
    stack.edit(
        "dev/tenants/inference.yaml",
        "owners: [inference-oncall]",
        'owners: [inference-oncall, "serviceaccount:ci:deployer"]\nownerRole: admin',
    )
    stack.edit("dev/tenants/notebooks.yaml", "owners: [data-science]", "owners: [data-science]\nownerRole: view")
    stack.up()
    binding = control_plane.get_json("rolebinding", "tenant-owners-admin", "-n", "inference")
    # roleRef is immutable: the edit binding was replaced by the admin one, not left beside it
    gone = control_plane.kubectl("get", "rolebinding", "tenant-owners-edit", "-n", "inference", check=False)
    assert gone.returncode != 0 and "notfound" in gone.stderr.lower().replace(" ", ""), gone.stderr
    assert binding["roleRef"]["name"] == "admin"
    assert {"kind": "ServiceAccount", "name": "deployer", "namespace": "ci"} in binding["subjects"]
    owners = {
        "admin": ("inference", {"as_user": "olga", "as_groups": ["inference-oncall"]}),
        "admin (service account)": (
            "inference",
            {
                "as_user": "system:serviceaccount:ci:deployer",
                "as_groups": ["system:serviceaccounts", "system:serviceaccounts:ci"],
            },
        ),
        "edit": ("research", {"as_user": "rita", "as_groups": ["research-admins"]}),
        "view": ("notebooks", {"as_user": "dora", "as_groups": ["data-science"]}),
    }
    for role, (ns, who) in owners.items():
        for resource in ("resourcequotas", "limitranges"):
            assert _can(control_plane, "get", resource, ns, **who), (role, resource)
            for verb in ("create", "update", "patch", "delete", "deletecollection"):
                assert not _can(control_plane, verb, resource, ns, **who), (role, verb, resource)
        out = control_plane.kubectl(
            "patch",
            "limitrange",
            "container-defaults",
            "-n",
            ns,
            "--type=merge",
            "-p",
            '{"spec":{"limits":[]}}',
            check=False,
            **who,
        )
        assert out.returncode != 0 and "forbidden" in out.stderr.lower(), (role, out.stderr)
        assert _can(control_plane, "create", "pods", ns, **who) == (role != "view"), role
        assert _can(control_plane, "create", "rolebindings.rbac.authorization.k8s.io", ns, **who) == role.startswith(
            "admin"
        ), role
        assert not _can(control_plane, "get", "pods", "research" if ns != "research" else "inference", **who), role


def test_removing_a_tenant_keeps_its_namespace_and_workloads(stack, control_plane):
    (stack.work / "dev/tenants/research.yaml").unlink()
    stack.up()
    ns = control_plane.get_json("namespace", "research")
    assert ns["status"]["phase"] == "Active"
    pods = control_plane.get_json("pods", "-n", "research")["items"]
    assert {p["metadata"]["name"] for p in pods} >= {"fits", "by-owner"}
    assert control_plane.kubectl("get", "resourcequota", "gpu-quota", "-n", "research", check=False).returncode == 0


def test_offboarding_then_removal_deletes_the_namespace(stack, control_plane):
    stack.edit("dev/tenants/notebooks.yaml", "tier: standard", "tier: standard\noffboarded: true")
    stack.up()
    quota = control_plane.get_json("resourcequota", "gpu-quota", "-n", "notebooks")
    assert set(quota["spec"]["hard"].values()) == {"0"}
    (stack.work / "dev/tenants/notebooks.yaml").unlink()
    stack.up()
    gone = control_plane.kubectl("get", "namespace", "notebooks", "-o", "json", check=False)
    assert gone.returncode != 0 or json.loads(gone.stdout)["status"]["phase"] == "Terminating"
