"""Drain before a MIG reconfiguration: evict a node's GPU pods through the Eviction API, PodDisruptionBudgets
respected, and wait (bounded) until they are gone.

NVIDIA requires that no user workload runs on GPUs being reconfigured (GPU Operator MIG docs); MIG Manager
pauses only the operator's own GPU clients (mig-parted v0.15.0 `pkg/mig/reconfigure/reconfigure.go` 370-428).

What the API server does with an eviction (Kubernetes v1.36.3 `pkg/registry/core/pod/storage/eviction.go`):
- a pod that is Pending, Succeeded, Failed or already terminating is deleted without looking at budgets
  (`canIgnorePDB`); otherwise the one budget whose selector matches the pod must allow a disruption;
- no disruption allowed, or a budget its controller has not observed yet: 429 TooManyRequests, with a
  `DisruptionBudget` cause naming the budget (`checkAndDecrement`, `createTooManyRequestsError`);
- more than one matching budget: 500, "This pod has more than one PodDisruptionBudget, which the eviction
  subresource does not support";
- otherwise the pod is deleted with its own grace period: it is gone once kubelet has stopped it.
A 429 can pass (another replica becomes ready), so a blocked pod is retried until the deadline, as `kubectl
drain` does; then the drain stops, naming the pod and the budget. Nothing is deleted around a budget.

Pure: the caller passes `api(method, path, body) -> (status, object)` and a clock, so tests can drive it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

Api = Callable[[str, str, Any], tuple[int, Any]]

GPU_RESOURCE_PREFIX = "nvidia.com/"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # a static pod's API mirror: the API cannot evict it
_BUDGET = re.compile(r"The disruption budget (\S+) ")


def requests_gpus(pod: dict[str, Any]) -> bool:
    """Any container, init container included, asking for an `nvidia.com/` resource (requests or limits:
    extended resources must have both equal, so either shows it)."""
    spec = pod.get("spec", {})
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        resources = container.get("resources", {})
        for part in ("requests", "limits"):
            if any(name.startswith(GPU_RESOURCE_PREFIX) for name in resources.get(part, {})):
                return True
    return False


def _owned_by_daemonset(pod: dict[str, Any]) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in pod.get("metadata", {}).get("ownerReferences", []))


def gpu_pods(pods: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    """The pods to evict from NODE: bound to it, holding GPUs, and still running or about to (Succeeded and
    Failed pods hold no device). DaemonSet pods are left alone: a cordon does not keep them off, so their
    controller would put them straight back (and mig-manager pauses the operator's own); mirror pods too."""
    out = []
    for pod in pods:
        meta, status = pod.get("metadata", {}), pod.get("status", {})
        if pod.get("spec", {}).get("nodeName") != node or status.get("phase") in ("Succeeded", "Failed"):
            continue
        if MIRROR_ANNOTATION in meta.get("annotations", {}) or _owned_by_daemonset(pod):
            continue
        if requests_gpus(pod):
            out.append(pod)
    return out


@dataclass(frozen=True)
class Outcome:
    """What one eviction call did: "evicted" (deletion started), "gone" (nothing to evict), "blocked"."""

    kind: str
    budget: str = ""
    reason: str = ""


class DrainError(Exception):
    """The drain stopped: the node stays cordoned, its MIG config label untouched."""


def eviction(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }


def outcome(status: int, body: Any) -> Outcome:
    """Classify the API server's answer to one eviction (see the module docstring for its source)."""
    if status in (200, 201):
        return Outcome("evicted")
    if status == 404:
        return Outcome("gone")
    body = body if isinstance(body, dict) else {}
    message = said(body.get("message", ""))
    if status == 429:
        details = body.get("details")
        causes = details.get("causes") if isinstance(details, dict) else None
        causes = causes if isinstance(causes, list) else []
        # metav1.StatusCause serializes its Type as "reason" (seen against kube-apiserver v1.36.3).
        cause = next(
            (
                said(c.get("message", ""))
                for c in causes
                if isinstance(c, dict) and c.get("reason") == "DisruptionBudget"
            ),
            "",
        )
        match = _BUDGET.match(cause + " ")
        return Outcome("blocked", match.group(1) if match else "", cause or message)
    if status == 500 and "more than one PodDisruptionBudget" in message:
        return Outcome("blocked", "", message)
    raise DrainError(f"eviction answered {status}: {message or said(body)}")


def said(value: Any, limit: int = 300) -> str:
    """What the API server said, as a DrainError quotes it: one line (the step fails with one line), control
    characters dropped, capped."""
    text = " ".join(str(value).split())
    text = "".join(c for c in text if c.isprintable())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def drain(
    api: Api,
    node: str,
    *,
    timeout_seconds: float,
    interval: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Evict NODE's GPU pods and wait until they are gone, each wait ending as soon as its condition holds.
    Returns the evicted pods as "namespace/name". Raises DrainError naming the pod (and its budget) that
    is still blocked, or still there, at the deadline."""
    deadline = clock() + timeout_seconds
    status, listing = api("GET", f"/api/v1/pods?fieldSelector={quote(f'spec.nodeName={node}')}", None)
    if status != 200:
        raise DrainError(f"listing the pods of node {node} answered {status}")
    if not isinstance(listing, dict) or not isinstance(listing.get("items"), list):
        raise DrainError(f"listing the pods of node {node} answered 200 without a list of items")
    waiting = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in gpu_pods(listing["items"], node)}
    evicted: dict[tuple[str, str], str] = {}  # -> uid: a pod of the same name created later is another pod
    blocked: dict[tuple[str, str], Outcome] = {}
    done: list[str] = []
    while True:
        for key, pod in list(waiting.items()):
            result = outcome(*api("POST", _pod_path(*key) + "/eviction", eviction(pod)))
            if result.kind == "blocked":
                blocked[key] = result
                continue
            blocked.pop(key, None)
            del waiting[key]
            if result.kind == "evicted":
                evicted[key] = pod["metadata"].get("uid", "")
                done.append("/".join(key))
        for key, uid in list(evicted.items()):
            status, obj = api("GET", _pod_path(*key), None)
            if status == 404 or (status == 200 and obj.get("metadata", {}).get("uid") != uid):
                del evicted[key]
        if not waiting and not evicted:
            return sorted(done)
        if clock() >= deadline:
            raise DrainError(_stuck(node, blocked, waiting, evicted, timeout_seconds))
        sleep(interval)


def _stuck(
    node: str,
    blocked: dict[tuple[str, str], Outcome],
    waiting: dict[tuple[str, str], Any],
    evicted: dict[tuple[str, str], str],
    timeout: float,
) -> str:
    keep = "the node stays cordoned and keeps its MIG config"
    for key in sorted(waiting):
        result = blocked.get(key)
        if result is not None:
            budget = f"PodDisruptionBudget {key[0]}/{result.budget}" if result.budget else "a PodDisruptionBudget"
            return (
                f"node {node}: pod {key[0]}/{key[1]} cannot be evicted within {timeout:g}s: {budget} allows no "
                f"disruption ({result.reason}); {keep}"
            )
    (ns, name), *_ = sorted(evicted)
    return f"node {node}: pod {ns}/{name} was evicted but is still there after {timeout:g}s; {keep}"
