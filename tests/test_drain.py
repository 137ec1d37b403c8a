"""Drain before reconfigure (gpupool.k8s.drain): which pods are evicted, how the API server's answers are read, and
the bounded wait. The answers below are the ones Kubernetes v1.36.3 builds in
pkg/registry/core/pod/storage/eviction.go (checkAndDecrement, createTooManyRequestsError, the "more than one
PodDisruptionBudget" status); tests/e2e/test_drain.py gets them from a real API server."""

from __future__ import annotations

import pytest

from gpupool.k8s import drain

NODE = "gpu-1"


def pod(name, *, node=NODE, gpu=True, init_gpu=False, phase="Running", owner=None, mirror=False, uid=None):
    resources = {"limits": {"nvidia.com/mig-1g.10gb": "1"}} if gpu else {"requests": {"cpu": "1"}}
    spec = {"nodeName": node, "containers": [{"name": "c", "resources": resources}]}
    if init_gpu:
        spec["initContainers"] = [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    meta = {"name": name, "namespace": "team-a", "uid": uid or f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
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


def test_only_running_gpu_pods_of_the_node_are_evicted():
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
    assert [p["metadata"]["name"] for p in drain.gpu_pods(pods, NODE)] == ["gpu", "init-gpu", "pending", "replica"]


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
    with pytest.raises(drain.DrainError, match="403"):
        drain.outcome(403, {"message": "forbidden"})


class FakeApi:
    """Pods by name; `budget_blocks` answers evictions with 429 while it holds; an evicted pod disappears after
    `gone_after` more reads of it (kubelet stopping it)."""

    def __init__(self, pods, budget_blocks=lambda name: False, gone_after=1):
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.budget_blocks = budget_blocks
        self.gone_after = gone_after
        self.terminating: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, method, path, body):
        self.calls.append((method, path))
        if method == "GET" and path.startswith("/api/v1/pods?"):
            assert "fieldSelector=spec.nodeName%3D" + NODE in path
            return 200, {"items": list(self.pods.values())}
        name = path.split("/pods/")[1].removesuffix("/eviction")
        if method == "POST":
            assert body["kind"] == "Eviction" and body["metadata"]["name"] == name
            if name not in self.pods:
                return 404, {}
            if self.budget_blocks(name):
                return too_many(f"The disruption budget keep-{name} needs 1 healthy pods and has 1 currently")
            self.terminating.setdefault(name, self.gone_after)
            return 201, {"status": "Success"}
        if name in self.terminating:
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


def run(api, timeout=30.0):
    clock = Clock()
    return drain.drain(api, NODE, timeout_seconds=timeout, interval=2.0, clock=clock, sleep=clock.sleep), clock


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
    api = FakeApi([pod("a")], gone_after=10**6)
    with pytest.raises(drain.DrainError, match="pod team-a/a was evicted but is still there after 10s"):
        run(api, timeout=10)


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
