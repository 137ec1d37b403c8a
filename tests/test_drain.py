"""Drain before reconfigure (gpupool.k8s.drain): which pods are evicted, which stop the drain before anything is
(kubectl v0.36.3 pkg/drain/filters.go), how the API server's answers are read, and the bounded wait. The answers
below are the ones Kubernetes v1.36.3 builds in pkg/registry/core/pod/storage/eviction.go (checkAndDecrement,
createTooManyRequestsError, the "more than one PodDisruptionBudget" status) and in the NamespaceLifecycle admission
plugin (k8s.io/apiserver pkg/admission/plugin/namespace/lifecycle/admission.go: the 403 of a terminating
namespace); tests/e2e/test_mig_rollout.py gets the eviction ones from a real API server."""

from __future__ import annotations

import pytest

from gpupool.k8s import drain

NODE = "gpu-1"


CONTROLLERS = {"ReplicaSet": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1", "StatefulSet": "apps/v1"}


def pod(
    name,
    *,
    node=NODE,
    gpu=True,
    init_gpu=False,
    phase="Running",
    owner="ReplicaSet",
    mirror=False,
    uid=None,
    empty_dir=False,
    grace=None,
    controller=True,
):
    """A pod as the API returns it. By default a ReplicaSet's (its ownerReference marked controller, as the
    ReplicaSet controller writes it); owner=None is a bare pod."""
    resources = {"limits": {"nvidia.com/mig-1g.10gb": "1"}} if gpu else {"requests": {"cpu": "1"}}
    spec = {"nodeName": node, "containers": [{"name": "c", "resources": resources}]}
    if init_gpu:
        spec["initContainers"] = [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    if empty_dir:
        spec["volumes"] = [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "scratch", "emptyDir": {}}]
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    meta = {"name": name, "namespace": "team-a", "uid": uid or f"uid-{name}"}
    if owner:
        ref = {"apiVersion": CONTROLLERS[owner], "kind": owner, "name": f"{name}-owner", "uid": "u"}
        meta["ownerReferences"] = [{**ref, "controller": True} if controller else ref]
    if mirror:
        meta["annotations"] = {drain.MIRROR_ANNOTATION: "abc"}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def too_many(budget_message):
    return 429, {
        "kind": "Status",
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget", "message": budget_message}]},  # StatusCause.Type
        "code": 429,
    }


def test_the_drain_is_about_the_running_gpu_pods_of_the_node():
    pods = [
        pod("gpu"),
        pod("init-gpu", gpu=False, init_gpu=True),
        pod("cpu", gpu=False),
        pod("elsewhere", node="gpu-2"),
        pod("done", phase="Succeeded"),
        pod("failed", phase="Failed"),
        pod("pending", phase="Pending"),
        pod("daemon", owner="DaemonSet"),
        pod("replica", owner="ReplicaSet"),
        pod("static", mirror=True),
    ]
    names = [p["metadata"]["name"] for p in drain.gpu_pods(pods, NODE)]
    assert names == ["gpu", "init-gpu", "pending", "daemon", "replica"]  # the DaemonSet's: refused, not skipped


def test_the_api_servers_answers_are_read_as_eviction_outcomes():
    assert drain.outcome(201, {"status": "Success"}) == drain.Outcome("evicted")
    assert drain.outcome(404, {}) == drain.Outcome("gone")
    blocked = drain.outcome(*too_many("The disruption budget keep-one needs 1 healthy pods and has 1 currently"))
    assert (blocked.kind, blocked.budget) == ("blocked", "keep-one") and "needs 1 healthy" in blocked.reason
    unobserved = drain.outcome(*too_many("The disruption budget keep-one is still being processed by the server."))
    assert (unobserved.kind, unobserved.budget) == ("blocked", "keep-one")
    two = drain.outcome(
        500,
        {"message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."},
    )
    assert two.kind == "blocked" and two.budget == ""
    # An RBAC 403 (no `NamespaceTerminating` cause) is not retried: waiting would not change it.
    with pytest.raises(drain.DrainError, match="403"):
        drain.outcome(403, {"message": "forbidden", "reason": "Forbidden", "details": {"name": "a", "kind": "pods"}})
    terminating = drain.outcome(*namespace_terminating("a", "team-a"))
    assert terminating.kind == "terminating" and "being terminated" in terminating.reason


def namespace_terminating(name, namespace):
    """The NamespaceLifecycle admission plugin's answer to creating an Eviction in a terminating namespace
    (k8s.io/apiserver pkg/admission/plugin/namespace/lifecycle/admission.go, Admit: admission.NewForbidden, which
    is apierrors.NewForbidden on the pods resource, plus a StatusCause of type corev1.NamespaceTerminatingCause,
    serialized as "reason")."""
    return 403, {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": f'pods "{name}" is forbidden: unable to create new content in namespace {namespace} because it '
        "is being terminated",
        "reason": "Forbidden",
        "details": {
            "name": name,
            "kind": "pods",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
        "code": 403,
    }


class FakeApi:
    """Pods by name; `budget_blocks` answers evictions with 429 while it holds; an evicted pod disappears after
    `gone_after` more reads of it (kubelet stopping it), or, given a `clock`, once its terminationGracePeriodSeconds
    has passed (a trainer that uses all of it to checkpoint). `namespace_terminating`: the namespace is being
    terminated, so every eviction answers the admission plugin's 403, and the namespace controller starts deleting
    a pod after `namespace_deletes_after` refused evictions of it (None: never)."""

    def __init__(
        self,
        pods,
        budget_blocks=lambda name: False,
        gone_after=1,
        clock=None,
        namespace_terminating=False,
        namespace_deletes_after=None,
    ):
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.budget_blocks = budget_blocks
        self.gone_after = gone_after
        self.clock = clock
        self.namespace_terminating = namespace_terminating
        self.namespace_deletes_after = namespace_deletes_after
        self.refused: dict[str, int] = {}
        self.terminating: dict[str, float] = {}  # -> reads left, or (with a clock) the time it is gone
        self.evictions: list[str] = []  # the evictions that started a deletion
        self.calls: list[tuple[str, str]] = []

    def _delete(self, name):
        """Deletion starts with the pod's grace period (what the eviction's delete and the namespace controller's do)."""
        if name in self.terminating:
            return
        self.pods[name] = {**self.pods[name], "metadata": {**self.pods[name]["metadata"], "deletionTimestamp": "t"}}
        if self.clock is not None:
            self.terminating[name] = self.clock() + drain.grace_seconds(self.pods[name])
        else:
            self.terminating[name] = self.gone_after

    def __call__(self, method, path, body):
        self.calls.append((method, path))
        if method == "GET" and path.startswith("/api/v1/pods?"):
            assert "fieldSelector=spec.nodeName%3D" + NODE in path
            return 200, {"items": list(self.pods.values())}
        name = path.split("/pods/")[1].removesuffix("/eviction")
        if method == "POST":
            assert body["kind"] == "Eviction" and body["metadata"]["name"] == name
            if self.namespace_terminating:  # admission runs before the eviction's storage (404 or not)
                self.refused[name] = self.refused.get(name, 0) + 1
                if name in self.pods and self.refused[name] == self.namespace_deletes_after:
                    self._delete(name)
                return namespace_terminating(name, "team-a")
            if name not in self.pods:
                return 404, {}
            if self.budget_blocks(name):
                return too_many(f"The disruption budget keep-{name} needs 1 healthy pods and has 1 currently")
            self.evictions.append(name)
            self._delete(name)
            return 201, {"status": "Success"}
        if name in self.terminating:
            if self.clock is not None:
                if self.clock() >= self.terminating[name]:
                    self.pods.pop(name, None)
            else:
                self.terminating[name] -= 1
                if self.terminating[name] < 0:
                    self.pods.pop(name, None)
        return (200, self.pods[name]) if name in self.pods else (404, {})


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds


def run(api, timeout=30.0, clock=None, **care):
    clock = clock or Clock()
    evicted = drain.drain(
        api, NODE, timeout_seconds=timeout, care=drain.Care(**care), interval=2.0, clock=clock, sleep=clock.sleep
    )
    return evicted, clock


def test_a_drain_evicts_the_gpu_pods_and_returns_once_they_are_gone():
    api = FakeApi([pod("a"), pod("b"), pod("cpu", gpu=False)], gone_after=2)
    evicted, clock = run(api)
    assert evicted == ["team-a/a", "team-a/b"] and set(api.pods) == {"cpu"}
    assert clock.t == 4.0  # two reads each until gone: it ended as soon as they were


def test_a_budget_that_blocks_until_the_deadline_stops_the_drain_naming_pod_and_budget():
    api = FakeApi([pod("a"), pod("b")], budget_blocks=lambda name: name == "b")
    with pytest.raises(drain.DrainError) as failure:
        run(api, timeout=10)
    message = str(failure.value)
    assert "pod team-a/b" in message and "PodDisruptionBudget team-a/keep-b" in message, message
    assert "stays cordoned and keeps its MIG config" in message
    assert "a" not in api.pods and "b" in api.pods  # what could be evicted was; nothing deleted around the budget


def test_a_budget_that_frees_up_within_the_deadline_lets_the_drain_finish():
    blocked_until = {"t": 0}

    def blocks(name):
        blocked_until["t"] += 1
        return blocked_until["t"] < 3  # the third attempt passes (another replica became ready)

    api = FakeApi([pod("a")], budget_blocks=blocks)
    evicted, _ = run(api)
    assert evicted == ["team-a/a"] and not api.pods


def test_an_evicted_pod_that_never_goes_stops_the_drain_at_the_deadline():
    api = FakeApi([pod("a", grace=0)], gone_after=10**6)
    timeout = drain.GRACE_MARGIN_SECONDS + 20  # longer than the pod's grace period and the margin: it counts
    with pytest.raises(drain.DrainError, match=f"pod team-a/a was evicted but is still there after {timeout}s"):
        run(api, timeout=timeout)


def test_a_new_pod_of_the_same_name_is_not_the_evicted_one():
    api = FakeApi([pod("a", uid="first")], gone_after=0)
    original = api.__call__

    def recreate(method, path, body):
        status, obj = original(method, path, body)
        if method == "GET" and path.endswith("/pods/a") and status == 404:
            api.pods["a"] = pod("a", uid="second")  # its StatefulSet made it again, on another node later
            return 200, api.pods["a"]
        return status, obj

    evicted, _ = run(recreate)
    assert evicted == ["team-a/a"]


# kubectl drain's care (kubectl v0.36.3 pkg/drain): the filter pass runs over every pod before any eviction
# (drain.go 184-217, GetPodsForDeletion -> filterPods -> errors); unreplicatedFilter (filters.go 236-250) and
# localStorageFilter (218-234) refuse unless --force / --delete-emptydir-data; daemonSetFilter (179-209).


def _posts(api):
    return [path for method, path in api.calls if method == "POST"]


def test_a_bare_pod_and_an_emptydir_pod_stop_the_drain_naming_them_and_nothing_is_evicted():
    pods = [
        pod("replica"),  # listed first: a drain that evicted as it went would have evicted it
        pod("notebook", owner=None),  # a `kubectl run` or JupyterHub pod: nothing recreates it
        pod("loose", controller=False),  # an owner that is not its controller does not recreate it either
        pod("scratch", empty_dir=True),
    ]
    api = FakeApi(pods)
    with pytest.raises(drain.DrainError) as failure:
        run(api)
    message = str(failure.value)
    assert "team-a/loose, team-a/notebook" in message and "rollout.force: true" in message, message
    assert "emptyDir data" in message and "team-a/scratch" in message, message
    assert "rollout.deleteEmptyDirData: true" in message and "team-a/replica" not in message, message
    assert "evicted nothing" in message and "every pod keeps running" in message, message
    assert _posts(api) == [] and set(api.pods) == {p["metadata"]["name"] for p in pods}
    assert not any("deletionTimestamp" in p["metadata"] for p in api.pods.values())


def test_a_bare_pod_with_emptydir_data_is_named_for_both_reasons():
    api = FakeApi([pod("both", owner=None, empty_dir=True)])
    with pytest.raises(drain.DrainError) as failure:
        run(api)
    message = str(failure.value)
    assert message.count("team-a/both") == 2 and "rollout.force" in message and "deleteEmptyDirData" in message


def test_each_opt_in_lets_through_only_its_own_pods():
    pods = [pod("notebook", owner=None), pod("scratch", empty_dir=True)]
    with pytest.raises(drain.DrainError) as failure:
        run(FakeApi(pods), force=True)
    assert "team-a/scratch" in str(failure.value) and "team-a/notebook" not in str(failure.value)
    with pytest.raises(drain.DrainError) as failure:
        run(FakeApi(pods), delete_empty_dir_data=True)
    assert "team-a/notebook" in str(failure.value) and "team-a/scratch" not in str(failure.value)


def test_with_the_opt_ins_bare_and_emptydir_pods_are_evicted():
    api = FakeApi(
        [pod("notebook", owner=None), pod("scratch", empty_dir=True), pod("both", owner=None, empty_dir=True)]
    )
    evicted, _ = run(api, force=True, delete_empty_dir_data=True)
    assert evicted == ["team-a/both", "team-a/notebook", "team-a/scratch"] and not api.pods


def test_a_gpu_daemonset_pod_stops_the_drain_naming_it_and_its_daemonset_before_any_eviction():
    """No opt-in lets it through: its controller tolerates the cordon and would put it back, and MIG Manager fails
    the reconfiguration under it (or reboots the node with it)."""
    api = FakeApi([pod("replica"), pod("monitor", owner="DaemonSet")])
    with pytest.raises(drain.DrainError) as failure:
        run(api, force=True, delete_empty_dir_data=True)
    message = str(failure.value)
    assert "GPU pods of a DaemonSet" in message and "team-a/monitor (DaemonSet team-a/monitor-owner)" in message
    assert _posts(api) == [] and set(api.pods) == {"replica", "monitor"}


def test_daemonset_pods_without_a_gpu_mirror_pods_and_cpu_pods_are_left_alone():
    pods = [
        pod("replica"),
        pod("logs", owner="DaemonSet", gpu=False, empty_dir=True),  # --ignore-daemonsets
        pod("static", owner=None, mirror=True),  # the API cannot evict a mirror pod
        pod("shell", owner=None, gpu=False, empty_dir=True),  # holds no GPU: not the drain's business
    ]
    api = FakeApi(pods)
    evicted, _ = run(api)
    assert evicted == ["team-a/replica"] and set(api.pods) == {"logs", "static", "shell"}
    assert all(path.endswith("/pods/replica/eviction") for path in _posts(api))


def test_a_terminating_namespace_is_retried_until_the_pods_deletion_starts_then_waited_for():
    """kubectl's evictPods (drain.go 315-325): IsForbidden with NamespaceTerminatingCause is retried; once the pod
    is marked deleted (the namespace controller deletes every pod of the namespace) it is waited for."""
    api = FakeApi([pod("a")], namespace_terminating=True, namespace_deletes_after=3)
    evicted, _ = run(api)
    assert not api.pods  # gone: the drain finished without an error
    assert evicted == []  # the namespace controller deleted it; the drain evicted nothing
    assert len(_posts(api)) == 3


def test_a_bare_pod_whose_deletion_already_started_does_not_stop_the_drain():
    """Its namespace is being deleted: its work and its emptyDir go whatever the drain does."""
    going = pod("going", owner=None, empty_dir=True)
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    api = FakeApi([going], namespace_terminating=True)
    api.terminating["going"] = 1  # kubelet is stopping it
    evicted, _ = run(api)
    assert evicted == [] and not api.pods


def test_a_long_refusal_names_the_first_pods_and_counts_the_rest():
    pods = [pod(f"bare-{i:02}", owner=None) for i in range(drain.LISTED + 3)]
    with pytest.raises(drain.DrainError) as failure:
        run(FakeApi(pods))
    message = str(failure.value)
    assert f"team-a/bare-{drain.LISTED - 1:02}" in message and f"team-a/bare-{drain.LISTED:02}" not in message
    assert "and 3 more" in message


def test_a_terminating_namespace_whose_pod_is_never_deleted_stops_the_drain_at_the_deadline():
    api = FakeApi([pod("a")], namespace_terminating=True)
    with pytest.raises(drain.DrainError) as failure:
        run(api, timeout=10)
    message = str(failure.value)
    assert "pod team-a/a cannot be evicted within 10s" in message and "namespace is being terminated" in message
    assert len(_posts(api)) > 1  # retried, not fatal at the first 403


# The deadline and the pods' own grace periods: drainTimeoutSeconds bounds how long budgets may refuse an eviction;
# an evicted pod is given its own terminationGracePeriodSeconds plus drain.GRACE_MARGIN_SECONDS from its eviction.
DEFAULT_TIMEOUT = 300  # the schema's default drainTimeoutSeconds


def test_a_trainer_whose_grace_period_exceeds_the_drain_timeout_is_waited_for():
    grace = DEFAULT_TIMEOUT * 3
    clock = Clock()
    api = FakeApi([pod("trainer", grace=grace), pod("quick", grace=5)], clock=clock)
    evicted, _ = run(api, timeout=DEFAULT_TIMEOUT, clock=clock)
    assert evicted == ["team-a/quick", "team-a/trainer"] and not api.pods
    assert grace <= clock.t < grace + drain.GRACE_MARGIN_SECONDS  # it ended once the trainer was gone


def test_a_pod_evicted_late_still_gets_its_whole_grace_period():
    """A budget holds the eviction until shortly before drainTimeoutSeconds; the pod then checkpoints for its
    grace period, which ends after drainTimeoutSeconds."""
    clock = Clock()
    free_at, grace = DEFAULT_TIMEOUT - 10, 120
    api = FakeApi([pod("trainer", grace=grace)], clock=clock, budget_blocks=lambda name: clock() < free_at)
    evicted, _ = run(api, timeout=DEFAULT_TIMEOUT, clock=clock)
    assert evicted == ["team-a/trainer"] and clock.t >= free_at + grace > DEFAULT_TIMEOUT


def test_an_evicted_pod_still_there_after_its_grace_period_and_the_margin_stops_the_drain():
    grace = DEFAULT_TIMEOUT * 2
    api = FakeApi([pod("stuck", grace=grace)], gone_after=10**6)
    with pytest.raises(drain.DrainError) as failure:
        run(api, timeout=DEFAULT_TIMEOUT)
    message = str(failure.value)
    assert f"pod team-a/stuck was evicted but is still there after {grace + drain.GRACE_MARGIN_SECONDS}s" in message
    assert f"terminationGracePeriodSeconds, {grace}s" in message, message


def test_where_the_node_may_reboot_every_pod_but_gpu_less_daemonset_and_mirror_pods_is_drained_with_kubectls_care():
    """Issue 37: with migRebootOnReconfigure the GPU Operator may reboot the node for a MIG mode change, which
    stops every pod on it, so the drain covers the whole node: CPU pods are evicted too, a CPU-only bare pod with
    emptyDir data is refused for both reasons (kubectl's care applies to every pod it drains), DaemonSet pods
    without a GPU and mirror pods are left as kubectl drain --ignore-daemonsets leaves them."""
    pods = [
        pod("replica"),
        pod("web", gpu=False),
        pod("logs", owner="DaemonSet", gpu=False),
        pod("static", owner=None, mirror=True),
        pod("done", gpu=False, phase="Succeeded"),
    ]
    api = FakeApi(pods)
    evicted, _ = run(api, whole_node=True)
    assert evicted == ["team-a/replica", "team-a/web"] and set(api.pods) == {"logs", "static", "done"}
    shell = FakeApi([pod("replica"), pod("shell", owner=None, gpu=False, empty_dir=True)])
    with pytest.raises(drain.DrainError) as err:
        run(shell, whole_node=True)
    assert "team-a/shell" in str(err.value) and "rollout.force" in str(err.value)
    assert "deleteEmptyDirData" in str(err.value) and _posts(shell) == []
    assert run(FakeApi([pod("web", gpu=False)]))[0] == []  # without it a CPU pod is not the drain's business
