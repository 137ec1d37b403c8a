"""The drain's special cases (issue 37) against a real kube-apiserver: gpupool's own code, `gpupool.k8s.drain.drain`
and `gpupool.k8s.mig_step.run`, called directly with a `gpupool.k8s.kubeclient.Client` (no pulumi: the rollout's
providers call exactly these, gpupool.deploy.mig_step_provider).

- a bare GPU pod, and a GPU pod with emptyDir data, each stop the drain before anything is evicted, with an error
  naming them, and are evicted once the pool opts in (`rollout.force`, `rollout.deleteEmptyDirData`: kubectl
  drain's --force and --delete-emptydir-data);
- a GPU pod of a DaemonSet stops the MIG step at its drain, before any write to the node: its
  `nvidia.com/mig.config` label is unchanged;
- a GPU pod in a namespace being terminated does not fail the drain: the Eviction is refused (403,
  `NamespaceTerminating`), and the drain waits for the pod the namespace controller is deleting;
- a node that may reboot (migRebootOnReconfigure) is drained whole: its CPU pods too, a GPU-less DaemonSet's left.

No kubelet, scheduler, ReplicaSet or DaemonSet controller runs here. Pods are created bound to their node
(spec.nodeName) and reported Running through the status subresource; `kubelet_sim.Kubelet` finishes a deletion
the way kubelet does once the containers stopped. The owners (a ReplicaSet, DaemonSets) are real objects only so
that the ownerReferences are real: the garbage collector, which runs, would delete a pod whose controller does not
exist; nothing creates pods for them. The nodes are not cordoned first, as the rollout's cordon step would: the
drain neither reads nor needs the cordon, and with no scheduler nothing would land on the node anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest

from gpupool.k8s import drain, kubeclient, mig_step
from gpupool.k8s.rollout import LABEL_CHECKED, LABEL_MIG_CONFIG, LABEL_STATE

from .kubelet_sim import Kubelet, report_running

pytestmark = pytest.mark.e2e

GPU = "nvidia.com/mig-1g.10gb"
IMAGE = "registry.invalid/x"
OLD, NEW = "a100-80gb-all-balanced", "a100-80gb-all-1g.10gb"
OPERATOR_NS = "gpu-operator"
DEADLINE = 60  # seconds: every wait is a poll that ends as soon as its condition holds
POLL = 0.2  # the drain's poll interval here (its default, 2 s, would only slow the module down)


@pytest.fixture(scope="module")
def cp(private_control_plane):
    """Its own API server: the MIG step lists the MIG Manager pods of the `gpu-operator` namespace, which other
    modules' stacks create and destroy on the shared one."""
    return private_control_plane


@pytest.fixture(scope="module")
def client(cp):
    """What the rollout's providers build from the Kubernetes provider's kubeconfig."""
    return kubeclient.Client(str(cp.kubeconfig))


# ---------------------------------------------------------------------------------------------- helpers
@dataclass(frozen=True)
class Call:
    method: str
    path: str
    status: int
    body: Any

    @property
    def eviction(self) -> bool:
        return self.method == "POST" and self.path.split("?")[0].endswith("/eviction")


class Spy:
    """The kubeclient.Client, recording every request gpupool makes and the API server's answer; `after(call)`
    runs after each one."""

    def __init__(self, api, after=None):
        self.api, self.after, self.calls = api, after, []

    def __call__(self, method: str, path: str, body: Any = None, content_type: str = "application/json"):
        status, obj = self.api(method, path, body, content_type=content_type)
        call = Call(method, path, status, obj)
        self.calls.append(call)
        if self.after:
            self.after(call)
        return status, obj

    def writes(self) -> list[Call]:
        return [c for c in self.calls if c.method != "GET"]


def _create(cp, path: str, obj: dict) -> dict:
    status, got = cp.api("POST", path, obj)
    assert status == 201, (path, got)
    return got


def _namespace(cp, name: str) -> None:
    _create(cp, "/api/v1/namespaces", {"metadata": {"name": name}})


def _controller(cp, kind: str, namespace: str, name: str) -> dict:
    """A ReplicaSet or DaemonSet object, returned as the ownerReference (controller: true) of its pods."""
    labels = {"app": name}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": IMAGE}]}},
    }
    if kind == "ReplicaSet":
        spec["replicas"] = 1
    obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    made = _create(cp, f"/apis/apps/v1/namespaces/{namespace}/{kind.lower()}s", obj)
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": made["metadata"]["uid"], "controller": True}


def _place(
    cp,
    namespace: str,
    name: str,
    node: str,
    *,
    gpu: bool = True,
    owner: dict | None = None,
    empty_dir: bool = False,
    labels: dict | None = None,
    grace: int | None = None,
) -> dict:
    """A pod bound to NODE, Running and Ready (what kubelet would report), asking for one GPU or only for CPU."""
    resources = {"limits": {GPU: "1"}} if gpu else {"requests": {"cpu": "100m"}}
    container: dict[str, Any] = {"name": "c", "image": IMAGE, "resources": resources}
    spec: dict[str, Any] = {"nodeName": node, "containers": [container]}
    if empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {"app": name}}
    if owner:
        meta["ownerReferences"] = [owner]
    made = _create(
        cp, f"/api/v1/namespaces/{namespace}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    )
    report_running(cp, namespace, name)
    return made


def _pods(cp, node: str) -> dict[str, dict]:
    """NODE's pods, "namespace/name" -> pod."""
    status, obj = cp.api("GET", f"/api/v1/pods?fieldSelector={quote(f'spec.nodeName={node}')}")
    assert status == 200, obj
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in obj["items"]}


def _untouched(cp, node: str, before: dict[str, dict]) -> None:
    """Every pod of BEFORE still there, the same pod (uid), its deletion not started."""
    now = _pods(cp, node)
    assert set(now) == set(before), (sorted(now), sorted(before))
    for key, pod in now.items():
        assert pod["metadata"]["uid"] == before[key]["metadata"]["uid"], key
        assert not pod["metadata"].get("deletionTimestamp"), key


def _refused(client, node: str, care: drain.Care) -> tuple[str, Spy]:
    spy = Spy(client)
    with pytest.raises(drain.DrainError) as stopped:
        drain.drain(spy, node, timeout_seconds=DEADLINE, care=care, interval=POLL)
    return str(stopped.value), spy


# ---------------------------------------------------------------------------------------------- (a)
def test_a_bare_gpu_pod_blocks_the_drain_until_force(cp, client):
    """Proves: a GPU pod that no controller owns stops the drain, with an error naming it under the no-controller
    reason (and telling of `rollout.force`), before anything is evicted: not it, not the replicated GPU pod beside
    it (no eviction is even sent); `deleteEmptyDirData` does not lift that; with `force` both GPU pods are evicted
    through the real Eviction API and gone, and a bare CPU-only pod on the node is left alone."""
    node, ns = "drain-bare", "team-bare"
    cp.create_gpu_node(node, {GPU: "4"})
    _namespace(cp, ns)
    replicas = _controller(cp, "ReplicaSet", ns, "trainer")
    _place(cp, ns, "notebook", node)  # bare, as a `kubectl run` or JupyterHub notebook pod is
    _place(cp, ns, "trainer-1", node, owner=replicas, labels={"app": "trainer"})
    _place(cp, ns, "cpu-only", node, gpu=False)  # bare too, but holds no GPU: not the drain's business
    before = _pods(cp, node)

    for care in (drain.Care(), drain.Care(delete_empty_dir_data=True)):
        message, spy = _refused(client, node, care)
        assert f"node {node}: the drain evicted nothing: {drain.NO_CONTROLLER}: {ns}/notebook;" in message, message
        assert "rollout.force" in message and "trainer-1" not in message and "cpu-only" not in message, message
        assert drain.EMPTY_DIR not in message, message
        assert not spy.writes(), spy.writes()  # the filter pass comes first: not one eviction was sent
        _untouched(cp, node, before)

    spy = Spy(client)
    with Kubelet(cp, (node,)):
        evicted = drain.drain(spy, node, timeout_seconds=DEADLINE, care=drain.Care(force=True), interval=POLL)
    assert evicted == [f"{ns}/notebook", f"{ns}/trainer-1"]
    assert set(_pods(cp, node)) == {f"{ns}/cpu-only"}
    # Evicted through pods/eviction (answered 2xx), never deleted by the drain itself.
    assert sorted(c.path.split("/")[-2] for c in spy.writes()) == ["notebook", "trainer-1"], spy.writes()
    assert all(c.eviction and c.status in (200, 201) for c in spy.writes()), spy.writes()


def test_a_gpu_pod_with_emptydir_data_blocks_the_drain_until_delete_emptydir_data(cp, client):
    """Proves: a replicated GPU pod with an emptyDir volume stops the drain, with an error naming it under the
    emptyDir reason (and telling of `rollout.deleteEmptyDirData`), before anything is evicted, its replicated
    neighbour without emptyDir included; `force` does not lift that; with `deleteEmptyDirData` both are evicted
    and gone."""
    node, ns = "drain-scratch", "team-scratch"
    cp.create_gpu_node(node, {GPU: "4"})
    _namespace(cp, ns)
    replicas = _controller(cp, "ReplicaSet", ns, "trainer")
    _place(cp, ns, "scratch-1", node, owner=replicas, empty_dir=True, labels={"app": "trainer"})
    _place(cp, ns, "plain-1", node, owner=replicas, labels={"app": "trainer"})
    before = _pods(cp, node)

    for care in (drain.Care(), drain.Care(force=True)):
        message, spy = _refused(client, node, care)
        assert f"node {node}: the drain evicted nothing: {drain.EMPTY_DIR}: {ns}/scratch-1;" in message, message
        assert "rollout.deleteEmptyDirData" in message and "plain-1" not in message, message
        assert drain.NO_CONTROLLER not in message, message  # it has a controller: one reason, the right one
        assert not spy.writes(), spy.writes()
        _untouched(cp, node, before)

    spy = Spy(client)
    with Kubelet(cp, (node,)):
        evicted = drain.drain(
            spy, node, timeout_seconds=DEADLINE, care=drain.Care(delete_empty_dir_data=True), interval=POLL
        )
    assert evicted == [f"{ns}/plain-1", f"{ns}/scratch-1"]
    assert not _pods(cp, node)
    assert len(spy.writes()) == 2, spy.writes()
    assert all(c.eviction and c.status in (200, 201) for c in spy.writes()), spy.writes()


# ---------------------------------------------------------------------------------------------- (b)
def test_a_gpu_daemonset_pod_stops_the_mig_step_before_any_write_to_the_node(cp, client):
    """Proves: `mig_step.run` with the drain on, against a node whose MIG Manager runs and that has a DaemonSet's
    GPU pod, raises DrainError naming that pod and its DaemonSet, even with `force` and `deleteEmptyDirData` both
    set, and writes nothing: the node's labels (`nvidia.com/mig.config` and its state included) are what they
    were, its MIG Manager pod is not restarted, no pod is evicted (the replicated GPU pod beside it neither), and
    no PATCH, POST or DELETE was sent at all. The MIG Manager's own pod (a DaemonSet's, without a GPU) is not
    named."""
    node, ns = "mig-daemon", "probes"
    labels = {LABEL_MIG_CONFIG: OLD, LABEL_STATE: "success", LABEL_CHECKED: OLD}
    cp.create_gpu_node(node, {GPU: "4"}, labels)
    _namespace(cp, OPERATOR_NS)
    manager = _controller(cp, "DaemonSet", OPERATOR_NS, "nvidia-mig-manager")
    _place(
        cp,
        OPERATOR_NS,
        f"nvidia-mig-manager-{node}",
        node,
        gpu=False,
        owner=manager,
        labels={"app": "nvidia-mig-manager"},
    )
    _namespace(cp, ns)
    probe = _controller(cp, "DaemonSet", ns, "gpu-probe")
    _place(cp, ns, f"gpu-probe-{node}", node, owner=probe, labels={"app": "gpu-probe"})
    replicas = _controller(cp, "ReplicaSet", ns, "trainer")
    _place(cp, ns, "trainer-1", node, owner=replicas, labels={"app": "trainer"})
    before, labelled = _pods(cp, node), cp.api("GET", f"/api/v1/nodes/{node}")[1]["metadata"]["labels"]
    assert {k: labelled.get(k) for k in labels} == labels, labelled
    assert len(mig_step.mig_manager_pods(client, OPERATOR_NS, node)) == 1  # so the step drains (not "unmanaged")

    settings = mig_step.Settings(
        node=node,
        config=NEW,
        namespace=OPERATOR_NS,
        timeout_seconds=DEADLINE,
        drain=True,
        drain_timeout_seconds=DEADLINE,
        care=drain.Care(force=True, delete_empty_dir_data=True),
    )
    spy = Spy(client)
    with pytest.raises(drain.DrainError) as stopped:
        mig_step.run(spy, settings)
    message = str(stopped.value)
    assert f"{drain.GPU_DAEMONSET}: {ns}/gpu-probe-{node} (DaemonSet {ns}/gpu-probe);" in message, message
    assert "nvidia-mig-manager" not in message and "trainer-1" not in message, message
    assert not spy.writes(), spy.writes()
    assert cp.api("GET", f"/api/v1/nodes/{node}")[1]["metadata"]["labels"] == labelled
    _untouched(cp, node, before)


# ---------------------------------------------------------------------------------------------- (c)
def test_a_pod_in_a_terminating_namespace_does_not_fail_the_drain(cp, client):
    """Proves: a GPU pod of a namespace being deleted (bare and with emptyDir, as a departed user's notebook is),
    whose deletion the namespace controller has started, neither stops the drain at the filter pass nor fails
    it: the real API server refuses its Eviction with 403 and a `NamespaceTerminating` cause (the shape
    gpupool.k8s.drain reads), the drain reads the pod again, waits for it instead, and returns once it is gone,
    having evicted the GPU pod of a live namespace on the same node (and only that one)."""
    node, ending, live = "drain-ending", "leaving", "staying"
    cp.create_gpu_node(node, {GPU: "4"})
    _namespace(cp, ending)
    _place(cp, ending, "notebook", node, empty_dir=True, grace=5)
    _namespace(cp, live)
    _place(cp, live, "trainer-1", node, owner=_controller(cp, "ReplicaSet", live, "trainer"), labels={"app": "trainer"})
    status, obj = cp.api("DELETE", f"/api/v1/namespaces/{ending}")
    assert status == 200 and obj["status"]["phase"] == "Terminating", obj

    # The namespace controller deletes the namespace's pods; with no kubelet, this one then stays Terminating.
    def deletion_started() -> bool:
        status, pod = cp.api("GET", f"/api/v1/namespaces/{ending}/pods/notebook")
        return status == 200 and bool(pod["metadata"].get("deletionTimestamp"))

    cp.wait_for(deletion_started, timeout=DEADLINE, what="the namespace controller to delete the notebook pod")
    # Waited for so that the filter pass meets the pod with its deletionTimestamp: a bare pod with emptyDir whose
    # deletion has started is not refused (its work and data go whatever the drain does), where kubectl drain would
    # refuse it without --force (gpupool.k8s.drain, `refusals`). Listed before that, it would be refused.

    # kubelet would stop the pod within its grace period, whenever that ends; here it is held back until the
    # drain, after the eviction's 403, has read the pod again (or, failing that, evicted the other pod: the pods
    # are listed, and so evicted, in namespace order, the notebook's first), so the drain meets the pod still
    # there. Had kubelet been faster, the eviction would be answered 403 and the read 404 ("gone"), with nothing
    # to wait for.
    notebook = f"/api/v1/namespaces/{ending}/pods/notebook"
    kubelet = Kubelet(cp, (node,))
    started: list[bool] = []

    def start_kubelet(call: Call) -> None:
        reread = call.method == "GET" and call.path == notebook
        if (reread or (call.eviction and live in call.path)) and not started:
            started.append(True)
            kubelet.__enter__()

    spy = Spy(client, after=start_kubelet)
    try:
        evicted = drain.drain(spy, node, timeout_seconds=DEADLINE, interval=POLL)
    finally:
        if started:
            kubelet.__exit__(None, None, None)

    assert evicted == [f"{live}/trainer-1"]
    assert not _pods(cp, node)  # the drain returned only once both were gone
    assert f"{ending}/notebook" in kubelet.gone, kubelet.gone
    evictions = [c for c in spy.calls if c.eviction]
    first = evictions[0]
    assert first.path == f"{notebook}/eviction", evictions
    assert first.status == 403 and first.body.get("reason") == "Forbidden", first
    causes = first.body.get("details", {}).get("causes", [])
    assert any(c.get("reason") == drain.NAMESPACE_TERMINATING for c in causes), first
    assert "being terminated" in first.body.get("message", ""), first
    # After the 403 the drain read the pod again, found its deletion started, and did not evict it again.
    after = spy.calls[spy.calls.index(first) + 1]
    assert (after.method, after.path, after.status) == ("GET", notebook, 200), after
    assert [c.path for c in evictions].count(first.path) == 1, evictions


# ---------------------------------------------------------------------------------------------- (e)
def test_a_node_that_may_reboot_is_drained_whole(cp, client):
    """Proves (migRebootOnReconfigure: MIG Manager's WITH_REBOOT may reboot the node, stopping every pod on it):
    with Care.whole_node the drain evicts the node's CPU pods too, through the real Eviction API, and leaves a
    GPU-less DaemonSet pod (kubectl drain --ignore-daemonsets); without it the CPU pod stays."""
    node, ns = "drain-whole", "team-whole"
    cp.create_gpu_node(node, {GPU: "4"})
    _namespace(cp, ns)
    web = _controller(cp, "ReplicaSet", ns, "web")
    logs = _controller(cp, "DaemonSet", ns, "logs")
    _place(cp, ns, "web-1", node, gpu=False, owner=web, labels={"app": "web"})
    _place(cp, ns, "logs-1", node, gpu=False, owner=logs, labels={"app": "logs"})
    with Kubelet(cp, (node,)):
        assert drain.drain(client, node, timeout_seconds=DEADLINE, care=drain.Care(), interval=POLL) == []
        assert set(_pods(cp, node)) == {f"{ns}/web-1", f"{ns}/logs-1"}
        evicted = drain.drain(client, node, timeout_seconds=DEADLINE, care=drain.Care(whole_node=True), interval=POLL)
    assert evicted == [f"{ns}/web-1"]
    assert set(_pods(cp, node)) == {f"{ns}/logs-1"}
