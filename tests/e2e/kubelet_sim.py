"""A stand-in for kubelet's pod teardown: no kubelet runs against the e2e control plane, so a pod whose deletion
started (an eviction deletes it with its grace period) would stay Terminating for ever.

What it does is what kubelet does once it has stopped a pod's containers: delete the object with grace period 0
and the pod's uid as precondition (Kubernetes v1.36.3 pkg/kubelet/status/status_manager.go, syncPod ->
canBeDeleted -> Delete with `NewDeleteOptions(0)` and `Preconditions{UID: &pod.UID}`)."""

from __future__ import annotations

import threading
import time

from .cluster import ControlPlane


class Kubelet:
    """Deletes (grace period 0) every pod bound to NODES whose deletion has started; `.gone` records when."""

    def __init__(self, cp: ControlPlane, nodes: tuple[str, ...], clock=time.monotonic, interval: float = 0.3):
        self.cp, self.nodes, self.clock, self.interval = cp, set(nodes), clock, interval
        self.gone: dict[str, float] = {}  # "namespace/name" -> clock() at its delete
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            status, obj = self.cp.api("GET", "/api/v1/pods")
            for pod in obj.get("items", []) if status == 200 else []:
                meta = pod["metadata"]
                if pod.get("spec", {}).get("nodeName") not in self.nodes or not meta.get("deletionTimestamp"):
                    continue
                body = {
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": meta["uid"]},
                }
                status, _ = self.cp.api("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", body)
                if status in (200, 404):
                    self.gone.setdefault(f"{meta['namespace']}/{meta['name']}", self.clock())
            self._stop.wait(self.interval)


def running_pod(cp: ControlPlane, namespace: str, name: str, node: str, *, app: str, gpu: str | None) -> None:
    """A pod bound to NODE and reported Running and Ready through the status subresource (what kubelet would write),
    asking for one GPU resource GPU, or only for CPU."""
    resources = {"limits": {gpu: "1"}} if gpu else {"requests": {"cpu": "100m"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "registry.invalid/x", "resources": resources}],
        },
    }
    status, obj = cp.api("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
    assert status == 201, obj
    report_running(cp, namespace, name)


def report_running(cp: ControlPlane, namespace: str, name: str) -> None:
    """Pod NAMESPACE/NAME Running and Ready, written through the status subresource as kubelet would."""
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    status, obj = cp.api(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{name}/status",
        {"status": {"phase": "Running", "conditions": [ready]}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, obj
