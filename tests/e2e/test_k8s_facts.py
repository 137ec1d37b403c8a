"""Settle the quota / LimitRange facts of gpu-sharing.md §5 that gpupool relies on, against a real
kube-apiserver (+ kube-controller-manager for quota status). Plain HTTP through ControlPlane.api;
no gpupool code involved. Each test asserts what the API server actually does (see toolchain/README.md)."""

from __future__ import annotations

import uuid

import pytest

pytestmark = pytest.mark.e2e

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"


# ---------------------------------------------------------------------------------------------- helpers
def pod(name, *, limits=None, requests=None, priority_class=None, containers=1):
    res = {}
    if limits is not None:
        res["limits"] = {k: str(v) for k, v in limits.items()}
    if requests is not None:
        res["requests"] = {k: str(v) for k, v in requests.items()}
    spec = {
        "containers": [
            {"name": f"c{i}", "image": "registry.invalid/pause:never-pulled", "resources": res}
            for i in range(containers)
        ]
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def create_pod(cp, ns, manifest):
    return cp.api("POST", f"/api/v1/namespaces/{ns}/pods", manifest)


def create_quota(cp, ns, name, hard, scope_selector=None, wait=True):
    spec = {"hard": {k: str(v) for k, v in hard.items()}}
    if scope_selector:
        spec["scopeSelector"] = scope_selector
    status, obj = cp.api(
        "POST",
        f"/api/v1/namespaces/{ns}/resourcequotas",
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": spec},
    )
    if status == 201 and wait:
        wait_quota_synced(cp, ns, name)
    return status, obj


def get_quota(cp, ns, name):
    status, obj = cp.api("GET", f"/api/v1/namespaces/{ns}/resourcequotas/{name}")
    assert status == 200, obj
    return obj


def wait_quota_synced(cp, ns, name, timeout=60):
    """Quota admission refuses pods while status.hard is unset; the resourcequota controller fills it."""

    def synced():
        q = get_quota(cp, ns, name)
        hard = q.get("status", {}).get("hard")
        return q if hard and set(hard) == set(q["spec"]["hard"]) else None

    return cp.wait_for(synced, timeout=timeout, what=f"quota {ns}/{name} status")


def wait_used(cp, ns, name, key, value, timeout=60):
    return cp.wait_for(
        lambda: get_quota(cp, ns, name)["status"].get("used", {}).get(key) == value,
        timeout=timeout,
        what=f"quota {ns}/{name} used[{key}] == {value}",
    )


def message(obj):
    return obj.get("message", "") if isinstance(obj, dict) else str(obj)


def uniq(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ---------------------------------------------------------------------------------------------- infrastructure
def test_control_plane_basics(control_plane, namespace):
    """Admin identity, RBAC through impersonation, simulated GPU node, namespace finalisation by KCM."""
    cp = control_plane
    assert "gpupool-e2e-admin" in cp.kubectl("auth", "whoami").stdout
    # RBAC is really on: an impersonated nobody is forbidden, then allowed after a RoleBinding.
    denied = cp.kubectl("get", "pods", "-n", namespace, as_user="alice", check=False)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower()
    cp.kubectl("create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice", "-n", namespace)
    cp.wait_for(
        lambda: cp.as_user("alice")("get", "pods", "-n", namespace, check=False).returncode == 0,
        timeout=30,
        what="alice allowed",
    )
    # group impersonation
    assert (
        cp.kubectl(
            "auth", "can-i", "create", "pods", "-n", namespace, as_user="bob", as_groups=["system:masters"], check=False
        ).stdout.strip()
        == "yes"
    )
    # a real (non-impersonated) identity from a client certificate
    kc = cp.user_kubeconfig("carol", ["tenant-a"])
    assert cp.kubectl("auth", "whoami", "-o", "json", kubeconfig=kc).stdout.count("tenant-a") == 1

    node = cp.create_gpu_node(
        uniq("gpu-node"), {GPU: "8", MIG: "14"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    )
    assert node["status"]["allocatable"][GPU] == "8"
    assert node["status"]["capacity"][MIG] == "14"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"

    # kube-controller-manager finalises namespace deletion
    ns2 = uniq("e2e-del")
    cp.kubectl("create", "namespace", ns2)
    create_quota(cp, ns2, "q", {"requests.nvidia.com/gpu": 1})
    cp.kubectl("delete", "namespace", ns2, "--wait=false")
    cp.wait_for(
        lambda: cp.api("GET", f"/api/v1/namespaces/{ns2}")[0] == 404, timeout=60, what="namespace deletion to finish"
    )


# ---------------------------------------------------------------------------------------------- §5.1
def test_extended_resource_container_rules(control_plane, namespace):
    """§5.1: request without limit is invalid; request != limit invalid; limit-only defaults the request."""
    cp = control_plane
    st, obj = create_pod(cp, namespace, pod("req-only", requests={GPU: 1}))
    assert st == 422 and "Limit must be set" in message(obj), obj
    st, obj = create_pod(cp, namespace, pod("req-ne-lim", requests={GPU: 1}, limits={GPU: 2}))
    assert st == 422 and "must be equal to" in message(obj), obj
    st, obj = create_pod(cp, namespace, pod("fractional", limits={GPU: "500m"}))
    assert st == 422 and "must be an integer" in message(obj), obj
    st, obj = create_pod(cp, namespace, pod("lim-only", limits={GPU: 2}))
    assert st == 201, obj
    assert obj["spec"]["containers"][0]["resources"]["requests"] == {GPU: "2"}


# ---------------------------------------------------------------------------------------------- (a)
def test_a_requests_gpu_quota_enforces(control_plane, namespace):
    cp = control_plane
    st, obj = create_quota(cp, namespace, "gpu", {"requests.nvidia.com/gpu": 1})
    assert st == 201, obj
    st, obj = create_pod(cp, namespace, pod("two", limits={GPU: 2}))  # requests default from limits
    assert st == 403, obj
    assert "exceeded quota: gpu" in message(obj) and "requested: requests.nvidia.com/gpu=2" in message(obj)
    st, obj = create_pod(cp, namespace, pod("one", limits={GPU: 1}))
    assert st == 201, obj
    wait_used(cp, namespace, "gpu", "requests.nvidia.com/gpu", "1")
    st, obj = create_pod(cp, namespace, pod("one-more", limits={GPU: 1}))
    assert st == 403 and "used: requests.nvidia.com/gpu=1" in message(obj), obj


# ---------------------------------------------------------------------------------------------- (b)
def test_b_limits_and_bare_gpu_keys_are_accepted_but_enforce_nothing(control_plane, namespace):
    cp = control_plane
    st, obj = create_quota(cp, namespace, "lim", {"limits.nvidia.com/gpu": 1})
    assert st == 201, obj
    st, obj = create_quota(cp, namespace, "bare", {"nvidia.com/gpu": 1})
    assert st == 201, obj
    st, obj = create_pod(cp, namespace, pod("four", limits={GPU: 4}))
    assert st == 201, f"limits./bare GPU quota keys enforced something: {obj}"
    st, obj = create_pod(cp, namespace, pod("four-more", limits={GPU: 4}))
    assert st == 201, obj
    # the controller copies them into status.hard but never tracks usage: status.used does not list them
    # at all (with 8 GPUs in the namespace), while a requests.* key in the same namespace is charged.
    st, obj = create_quota(cp, namespace, "req", {"requests.nvidia.com/gpu": 100})
    assert st == 201, obj
    wait_used(cp, namespace, "req", "requests.nvidia.com/gpu", "8")
    for name, key in (("lim", "limits.nvidia.com/gpu"), ("bare", "nvidia.com/gpu")):
        q = get_quota(cp, namespace, name)
        assert q["status"]["hard"] == {key: "1"}
        assert key not in q["status"].get("used", {}), q["status"]


# ---------------------------------------------------------------------------------------------- (c)
def test_c_mig_quota_zero_rejects_and_omitted_key_does_not_limit(control_plane, namespace):
    cp = control_plane
    st, obj = create_quota(cp, namespace, "mig-zero", {"requests.nvidia.com/mig-1g.10gb": 0})
    assert st == 201, obj
    st, obj = create_pod(cp, namespace, pod("mig", limits={MIG: 1}))
    assert st == 403 and "exceeded quota: mig-zero" in message(obj), obj

    ns2 = uniq("e2e-omit")
    cp.kubectl("create", "namespace", ns2)
    try:
        # a quota that lists other GPU keys but omits the MIG profile entirely
        st, obj = create_quota(cp, ns2, "gpu-only", {"requests.nvidia.com/gpu": 0, "requests.cpu": 100})
        assert st == 201, obj
        st, obj = create_pod(cp, ns2, pod("mig", limits={MIG: 3, "cpu": "1"}))
        assert st == 201, f"a quota omitting {MIG} limited it: {obj}"
        st, obj = create_pod(cp, ns2, pod("gpu", limits={GPU: 1, "cpu": "1"}))
        assert st == 403, obj
    finally:
        cp.kubectl("delete", "namespace", ns2, "--wait=false", check=False)


# ---------------------------------------------------------------------------------------------- (d)
def _limitrange(cp, ns, name, item):
    st, obj = cp.api(
        "POST",
        f"/api/v1/namespaces/{ns}/limitranges",
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}, "spec": {"limits": [item]}},
    )
    assert st == 201, obj
    return obj


def test_d_limitrange_gpu_max_defaults_and_injects_gpus(control_plane, namespace):
    cp = control_plane
    lr = _limitrange(cp, namespace, "gpu-max", {"type": "Container", "max": {GPU: "2"}})
    item = lr["spec"]["limits"][0]
    assert item["max"] == {GPU: "2"}
    assert item["default"] == {GPU: "2"}, item  # defaulted from max
    assert item["defaultRequest"] == {GPU: "2"}, item  # defaulted from default
    # a container that asked for nothing gets 2 GPUs injected (limits and requests)
    st, obj = create_pod(cp, namespace, pod("cpu-only", containers=2))
    assert st == 201, obj
    for c in obj["spec"]["containers"]:
        assert c["resources"]["limits"] == {GPU: "2"}, c
        assert c["resources"]["requests"] == {GPU: "2"}, c
    # asking for more than max is rejected by LimitRanger
    st, obj = create_pod(cp, namespace, pod("three", limits={GPU: 3}))
    assert st == 403 and "maximum" in message(obj), obj


def test_d_limitrange_cpu_memory_only_injects_no_gpu(control_plane, namespace):
    cp = control_plane
    _limitrange(
        cp,
        namespace,
        "defaults",
        {
            "type": "Container",
            "default": {"cpu": "1", "memory": "2Gi"},
            "defaultRequest": {"cpu": "500m", "memory": "1Gi"},
        },
    )
    st, obj = create_pod(cp, namespace, pod("plain"))
    assert st == 201, obj
    res = obj["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert res["requests"] == {"cpu": "500m", "memory": "1Gi"}
    st, obj = create_pod(cp, namespace, pod("gpu", limits={GPU: 1}))
    assert st == 201, obj
    res = obj["spec"]["containers"][0]["resources"]
    assert res["limits"] == {"cpu": "1", "memory": "2Gi", GPU: "1"}
    assert res["requests"] == {"cpu": "500m", "memory": "1Gi", GPU: "1"}


def test_d_limitrange_gpu_min_and_pod_max_break_non_gpu_pods(control_plane, namespace):
    """More §5.4 pitfalls: ``min`` alone becomes defaultRequest (no default limit) so every non-GPU pod
    turns invalid; a ``type: Pod`` max is not defaulted but rejects every pod without a GPU limit;
    default != defaultRequest is invalid for GPUs."""
    cp = control_plane
    st, obj = cp.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/limitranges",
        {
            "metadata": {"name": "bad"},
            "spec": {"limits": [{"type": "Container", "default": {GPU: "2"}, "defaultRequest": {GPU: "1"}}]},
        },
    )
    assert st == 422 and "must equal to defaultRequest" in message(obj), obj

    lr = _limitrange(cp, namespace, "gpu-min", {"type": "Container", "min": {GPU: "1"}})
    item = lr["spec"]["limits"][0]
    assert item["defaultRequest"] == {GPU: "1"} and "default" not in item, item
    st, obj = create_pod(cp, namespace, pod("no-gpu"))
    assert st == 422 and "Limit must be set for non overcommitable resources" in message(obj), obj
    st, obj = create_pod(cp, namespace, pod("gpu", limits={GPU: 1}))
    assert st == 201, obj
    cp.api("DELETE", f"/api/v1/namespaces/{namespace}/limitranges/gpu-min")

    lr = _limitrange(cp, namespace, "gpu-pod-max", {"type": "Pod", "max": {GPU: "2"}})
    assert lr["spec"]["limits"][0] == {"type": "Pod", "max": {GPU: "2"}}
    st, obj = create_pod(cp, namespace, pod("no-gpu-2"))
    assert st == 403 and "No limit is specified" in message(obj), obj
    st, obj = create_pod(cp, namespace, pod("three", limits={GPU: 1}, containers=3))
    assert st == 403 and "but limit is 3" in message(obj), obj
    st, obj = create_pod(cp, namespace, pod("two", limits={GPU: 1}, containers=2))
    assert st == 201, obj


# ---------------------------------------------------------------------------------------------- (e)
def test_e_priorityclass_scoped_gpu_quota(control_plane, namespace):
    cp = control_plane
    high, low = uniq("gpu-high"), uniq("gpu-low")
    for name, value in ((high, 1000), (low, 10)):
        st, obj = cp.api(
            "POST",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value},
        )
        assert st == 201, obj
    try:
        sel = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": [high]}]}
        st, obj = create_quota(cp, namespace, "high", {"requests.nvidia.com/gpu": 1}, scope_selector=sel)
        assert st == 201, f"PriorityClass-scoped GPU quota rejected: {obj}"
        # pods of other (or no) priority class are not counted
        for name, pc in (("none", None), ("low", low)):
            st, obj = create_pod(cp, namespace, pod(name, limits={GPU: 4}, priority_class=pc))
            assert st == 201, obj
        st, obj = create_pod(cp, namespace, pod("high-2", limits={GPU: 2}, priority_class=high))
        assert st == 403 and "exceeded quota: high" in message(obj), obj
        st, obj = create_pod(cp, namespace, pod("high-1", limits={GPU: 1}, priority_class=high))
        assert st == 201, obj
        assert obj["spec"]["priority"] == 1000
        q = wait_used(cp, namespace, "high", "requests.nvidia.com/gpu", "1")
        assert q
        # QoS is computed from cpu/memory only: a GPU-only pod is BestEffort
        assert obj["status"]["qosClass"] == "BestEffort"
    finally:
        for name in (high, low):
            cp.api("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


def test_e_gpu_keys_are_accepted_under_every_scope(control_plane, namespace):
    """§5.3: "unsupported scope applied to resource" is only raised for standard names (e.g. requests.cpu
    under BestEffort); requests.nvidia.com/gpu is accepted under every scope (checked with dryRun)."""
    cp = control_plane
    for scope in ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating"):
        for key, ok in (("requests.nvidia.com/gpu", True), ("requests.cpu", scope != "BestEffort"), ("pods", True)):
            st, obj = cp.api(
                "POST",
                f"/api/v1/namespaces/{namespace}/resourcequotas",
                {"metadata": {"name": "scoped"}, "spec": {"hard": {key: "1"}, "scopes": [scope]}},
                params={"dryRun": "All"},
            )
            if ok:
                assert st == 201, (scope, key, obj)
            else:
                assert st == 422 and "unsupported scope applied to resource" in message(obj), (scope, key, obj)


# ---------------------------------------------------------------------------------------------- (f)
def test_f_cpu_memory_quota_forces_declaration_gpu_quota_does_not(control_plane, namespace):
    cp = control_plane
    ns2 = uniq("e2e-cpu")
    cp.kubectl("create", "namespace", ns2)
    try:
        st, obj = create_quota(
            cp, ns2, "compute", {"requests.cpu": 4, "requests.memory": "8Gi", "limits.cpu": 8, "limits.memory": "16Gi"}
        )
        assert st == 201, obj
        st, obj = create_pod(cp, ns2, pod("bare"))
        assert st == 403, obj
        msg = message(obj)
        assert "must specify" in msg and "requests.cpu" in msg and "limits.memory" in msg, msg
        st, obj = create_pod(cp, ns2, pod("declared", limits={"cpu": "1", "memory": "1Gi"}))
        assert st == 201, obj
    finally:
        cp.kubectl("delete", "namespace", ns2, "--wait=false", check=False)

    st, obj = create_quota(cp, namespace, "gpu", {"requests.nvidia.com/gpu": 2, "requests.nvidia.com/mig-1g.10gb": 2})
    assert st == 201, obj
    st, obj = create_pod(cp, namespace, pod("no-gpu"))
    assert st == 201, f"a GPU quota forced a non-GPU pod to declare GPUs: {obj}"
    st, obj = create_pod(cp, namespace, pod("cpu-only", limits={"cpu": "1"}))
    assert st == 201, obj


# ---------------------------------------------------------------------------------------------- (g)
def test_g_aggregated_owner_roles_cannot_change_quotas_or_limit_ranges(control_plane, namespace):
    """gpupool binds tenant owners to Kubernetes' own admin/edit/view ClusterRoles (ownerRole). None of them
    may write a ResourceQuota or a LimitRange; admin and edit run workloads and get what the hand-written role
    denied (NetworkPolicies, PDBs, HPAs, Ingresses); only admin may bind roles (escalation-checked)."""
    cp = control_plane
    for role in ("admin", "edit", "view"):
        group = f"owners-{role}"
        cp.kubectl(
            "create", "rolebinding", f"owners-{role}", f"--clusterrole={role}", f"--group={group}", "-n", namespace
        )
    cp.kubectl(
        "create", "rolebinding", "owners-sa", "--clusterrole=edit", "--serviceaccount=ci:deployer", "-n", namespace
    )

    def can(verb, resource, as_user, groups):
        out = cp.kubectl(
            "auth", "can-i", verb, resource, "-n", namespace, as_user=as_user, as_groups=groups, check=False
        )
        assert out.stdout.strip() in ("yes", "no"), out.stdout + out.stderr
        return out.stdout.strip() == "yes"

    who = {role: (f"u-{role}", [f"owners-{role}"]) for role in ("admin", "edit", "view")}
    who["sa"] = ("system:serviceaccount:ci:deployer", ["system:serviceaccounts", "system:serviceaccounts:ci"])
    # The aggregation controller fills the roles in shortly after start-up.
    cp.wait_for(lambda: can("create", "pods", *who["edit"]), timeout=60, what="edit role aggregated")
    for name, (user, groups) in who.items():
        for resource in ("resourcequotas", "limitranges"):
            assert can("get", resource, user, groups), (name, resource)
            for verb in ("create", "update", "patch", "delete", "deletecollection"):
                assert not can(verb, resource, user, groups), (name, verb, resource)
        writes = name != "view"
        assert can("create", "pods", user, groups) == writes, name
        for resource in (
            "networkpolicies.networking.k8s.io",
            "poddisruptionbudgets.policy",
            "horizontalpodautoscalers.autoscaling",
            "ingresses.networking.k8s.io",
        ):
            assert can("create", resource, user, groups) == writes, (name, resource)
        assert can("create", "rolebindings.rbac.authorization.k8s.io", user, groups) == (name == "admin"), name
        assert not can("update", "namespaces", user, groups), name
