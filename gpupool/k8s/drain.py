"""Drain before a MIG reconfiguration: evict a node's GPU pods through the Eviction API, with `kubectl drain`'s care
(kubectl v0.36.3 `pkg/drain`), PodDisruptionBudgets respected, and wait (bounded) until they are gone.

NVIDIA requires that no user workload runs on GPUs being reconfigured (GPU Operator MIG docs); MIG Manager
pauses only the operator's own GPU clients (mig-parted v0.15.0 `pkg/mig/reconfigure/reconfigure.go` 370-428).

First a filter pass over every GPU pod of the node, before anything is evicted (kubectl's `GetPodsForDeletion`,
drain.go 184-217, runs `filterPods` and returns its errors before `DeleteOrEvictPods` is called). A pod it
refuses stops the drain with an error naming every refused pod and why; nothing has been evicted then:
- no controller (a bare pod, a `kubectl run` or JupyterHub notebook pod): nothing recreates it once evicted.
  Refused unless the pool's `rollout.force` (kubectl's `--force`, `unreplicatedFilter`, filters.go 236-250;
  the controller is the ownerReference with `controller: true`, `metav1.GetControllerOf`);
- an emptyDir volume: its data goes with the pod. Refused unless `rollout.deleteEmptyDirData` (kubectl's
  `--delete-emptydir-data`, `localStorageFilter` and `hasLocalStorage`, filters.go 163-171 and 218-234);
- controlled by a DaemonSet (apps/v1, `isControllerRefDaemonSet`, filters.go 173-177) and holding a GPU:
  always refused. kubectl errors on every DaemonSet pod unless `--ignore-daemonsets` (filters.go 179-209),
  which then leaves them running; for a pod holding a GPU that is what loses work: MIG Manager fails the
  reconfiguration under it or, with WITH_REBOOT, reboots the node with it and everything else on it
  (reconfigure.go 184-202), and evicting it would not help (its controller tolerates the cordon and puts it
  back). DaemonSet pods without a GPU are left, as `--ignore-daemonsets` does (only GPU pods are evicted).
  Where kubectl reports a pod for its first failing filter only, gpupool names every reason a pod has; and a pod
  whose deletion already started (its namespace is being deleted) is not refused for the first two reasons:
  its work and its emptyDir go whatever the drain does (kubectl refuses it unless --force).
Mirror (static) pods are left (`mirrorPodFilter`, filters.go 211-216: the API cannot evict them), and so are
finished pods (they hold no device).

What the API server does with an eviction (Kubernetes v1.36.3 `pkg/registry/core/pod/storage/eviction.go`):
- a pod that is Pending, Succeeded, Failed or already terminating is deleted without looking at budgets
  (`canIgnorePDB`); otherwise the one budget whose selector matches the pod must allow a disruption;
- no disruption allowed, or a budget its controller has not observed yet: 429 TooManyRequests, with a
  `DisruptionBudget` cause naming the budget (`checkAndDecrement`, `createTooManyRequestsError`);
- more than one matching budget: 500, "This pod has more than one PodDisruptionBudget, which the eviction
  subresource does not support";
- otherwise the pod is deleted with its own grace period: it is gone once kubelet has stopped it.
Before that, the NamespaceLifecycle admission plugin refuses creating anything, an Eviction included, in a
namespace that is being terminated: 403 Forbidden, "unable to create new content in namespace NS because it is
being terminated", with a `NamespaceTerminating` cause (k8s.io/apiserver
`pkg/admission/plugin/namespace/lifecycle/admission.go`, Admit). kubectl retries that 403 until the pod's own
deletion has started, then waits for the pod (`evictPods`, drain.go 315-325, `apierrors.IsForbidden` with
`corev1.NamespaceTerminatingCause`); so does gpupool. Any other 403 (RBAC) stops the drain.

A 429 can pass (another replica becomes ready), so a blocked pod is retried until `timeout_seconds`, as `kubectl
drain` does; then the drain stops, naming the pod and the budget. Nothing is deleted around a budget. A pod
that was evicted is given its own `terminationGracePeriodSeconds` plus GRACE_MARGIN_SECONDS to go, counted from
its eviction, even past `timeout_seconds`: a checkpointing trainer asks for its grace period to save its work,
and a deadline shorter than that would stop the rollout with the node cordoned while the pod does what it was
told to (kubectl's wait for an evicted pod, drain.go 341-354, is bounded only by `--timeout`, 0 = none).

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
# The API's default for spec.terminationGracePeriodSeconds (k8s.io/api core/v1 DefaultTerminationGracePeriodSeconds).
DEFAULT_GRACE_SECONDS = 30
# After its grace period kubelet kills what is left and deletes the pod object (inferred: SIGKILL, then its
# status manager's delete): time for that and for the API server to answer the next read.
GRACE_MARGIN_SECONDS = 30
# corev1.NamespaceTerminatingCause; metav1.StatusCause serializes its Type as "reason".
NAMESPACE_TERMINATING = "NamespaceTerminating"
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


def controller_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference marked `controller: true`, as `metav1.GetControllerOf` finds it (other owners do not
    recreate the pod)."""
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def daemonset_of(pod: dict[str, Any]) -> str | None:
    """The name of the DaemonSet controlling the pod: kind DaemonSet of apps/v1 (filters.go 173-177)."""
    ref = controller_of(pod)
    if ref and ref.get("kind") == "DaemonSet" and ref.get("apiVersion") == "apps/v1":
        return str(ref.get("name", ""))
    return None


def has_local_storage(pod: dict[str, Any]) -> bool:
    """An emptyDir volume (filters.go 163-171, `hasLocalStorage`): its data is deleted with the pod."""
    return any(isinstance(v, dict) and "emptyDir" in v for v in pod.get("spec", {}).get("volumes") or [])


def grace_seconds(pod: dict[str, Any]) -> int:
    """How long kubelet gives the pod to stop once evicted: its terminationGracePeriodSeconds (the eviction
    sends no DeleteOptions, so the pod's own applies)."""
    value = pod.get("spec", {}).get("terminationGracePeriodSeconds")
    return value if isinstance(value, int) and value >= 0 else DEFAULT_GRACE_SECONDS


def gpu_pods(pods: list[dict[str, Any]], node: str, whole_node: bool = False) -> list[dict[str, Any]]:
    """The pods the drain is about: bound to NODE, holding GPUs, and still running or about to (Succeeded and
    Failed pods hold no device), mirror pods left out. DaemonSet pods are among them: `refusals` stops at them.
    WHOLE_NODE (Care.whole_node): every such pod, GPU or not, except DaemonSet pods without a GPU, which kubectl's
    --ignore-daemonsets leaves too (their controller tolerates the cordon and they come back with the node)."""
    out = []
    for pod in pods:
        meta, status = pod.get("metadata", {}), pod.get("status", {})
        if pod.get("spec", {}).get("nodeName") != node or status.get("phase") in ("Succeeded", "Failed"):
            continue
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            continue
        if requests_gpus(pod) or (whole_node and daemonset_of(pod) is None):
            out.append(pod)
    return out


@dataclass(frozen=True)
class Care:
    """What the drain may evict beyond kubectl's defaults: the pool's `rollout.force` and
    `rollout.deleteEmptyDirData`, named after kubectl drain's `--force` and `--delete-emptydir-data`
    (both off by default, as in kubectl)."""

    force: bool = False
    delete_empty_dir_data: bool = False
    # Every pod of the node, not only its GPU pods: the GPU Operator may reboot the node for a MIG mode change
    # (`migRebootOnReconfigure`, MIG Manager's WITH_REBOOT: reconfigure.go 184-202), which stops every pod on it.
    whole_node: bool = False


# Why a pod is refused, and what would let the drain go on (one line each, said once for all its pods).
NO_CONTROLLER = (
    "pods that no controller owns (nothing recreates them once evicted; move them off the node, or set the "
    "pool's rollout.force: true to evict them anyway, as kubectl drain --force does)"
)
EMPTY_DIR = (
    "pods with emptyDir data (evicting them deletes it; set the pool's rollout.deleteEmptyDirData: true to "
    "evict them anyway, as kubectl drain --delete-emptydir-data does)"
)
GPU_DAEMONSET = (
    "GPU pods of a DaemonSet (a cordon does not keep them off, so evicting them does not free the GPU, and MIG "
    "Manager would fail under them or reboot the node with them; take the DaemonSet off this node or drop its GPU "
    "request)"
)


def refusals(pods: list[dict[str, Any]], care: Care) -> dict[str, list[str]]:
    """kubectl's filter pass over the drain's pods: reason -> the pods it refuses ("namespace/name", a DaemonSet's
    pod with its DaemonSet). Empty: every pod may be evicted. A pod whose deletion already started (its
    namespace is being deleted, say) loses its work and its emptyDir whatever the drain does, so only its
    DaemonSet can refuse it (kubectl, without --skip-wait-for-delete-timeout, would refuse it too)."""
    out: dict[str, list[str]] = {}
    for pod in pods:
        meta = pod.get("metadata", {})
        namespace = said(meta.get("namespace"), 63)
        name = f"{namespace}/{said(meta.get('name'), 253)}"
        daemonset = daemonset_of(pod)
        if daemonset is not None:
            out.setdefault(GPU_DAEMONSET, []).append(f"{name} (DaemonSet {namespace}/{said(daemonset, 253)})")
            continue
        if meta.get("deletionTimestamp"):
            continue
        if has_local_storage(pod) and not care.delete_empty_dir_data:
            out.setdefault(EMPTY_DIR, []).append(name)
        if controller_of(pod) is None and not care.force:
            out.setdefault(NO_CONTROLLER, []).append(name)
    return {reason: sorted(names) for reason, names in out.items()}


LISTED = 20  # pods named per reason in an error; the rest are counted


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:LISTED])
    return shown if len(names) <= LISTED else f"{shown} and {len(names) - LISTED} more"


@dataclass(frozen=True)
class Outcome:
    """What one eviction call did: "evicted" (deletion started), "gone" (nothing to evict), "blocked" (by a
    budget: retried), "terminating" (its namespace is being terminated: retried until its deletion starts),
    "deleting" (the namespace controller started its deletion: waited for, not evicted by the drain)."""

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


def _causes(body: dict[str, Any]) -> list[dict[str, Any]]:
    details = body.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    return [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []


def outcome(status: int, body: Any) -> Outcome:
    """Classify the API server's answer to one eviction (see the module docstring for its source)."""
    if status in (200, 201):
        return Outcome("evicted")
    if status == 404:
        return Outcome("gone")
    body = body if isinstance(body, dict) else {}
    message = said(body.get("message", ""))
    causes = _causes(body)
    if status == 429:
        # metav1.StatusCause serializes its Type as "reason" (seen against kube-apiserver v1.36.3).
        cause = next((said(c.get("message", "")) for c in causes if c.get("reason") == "DisruptionBudget"), "")
        match = _BUDGET.match(cause + " ")
        return Outcome("blocked", match.group(1) if match else "", cause or message)
    if status == 500 and "more than one PodDisruptionBudget" in message:
        return Outcome("blocked", "", message)
    # kubectl: apierrors.IsForbidden (reason Forbidden or code 403) && HasStatusCause(NamespaceTerminatingCause).
    if status == 403 and any(c.get("reason") == NAMESPACE_TERMINATING for c in causes):
        return Outcome("terminating", "", message)
    raise DrainError(f"eviction answered {status}: {message or said(body)}")


def said(value: Any, limit: int = 300) -> str:
    """What the API server said, as a DrainError quotes it: one line (the step fails with one line), control
    characters dropped, capped."""
    text = " ".join(str(value).split())
    text = "".join(c for c in text if c.isprintable())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


KEEP = "the node stays cordoned and keeps its MIG config"


@dataclass(frozen=True)
class _Evicted:
    uid: str  # a pod of the same name created later is another pod
    grace: int
    gone_by: float  # clock() by which it must be gone


def drain(
    api: Api,
    node: str,
    *,
    timeout_seconds: float,
    care: Care | None = None,
    interval: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Evict NODE's GPU pods and wait until they are gone, each wait ending as soon as its condition holds.
    Returns the evicted pods as "namespace/name". Raises DrainError, before evicting anything, naming the pods
    the filter pass refuses; or naming the pod (and its budget) still blocked at `timeout_seconds`, or an evicted
    pod still there after the later of `timeout_seconds` and its grace period plus GRACE_MARGIN_SECONDS."""
    start = clock()
    deadline = start + timeout_seconds
    status, listing = api("GET", f"/api/v1/pods?fieldSelector={quote(f'spec.nodeName={node}')}", None)
    if status != 200:
        raise DrainError(f"listing the pods of node {node} answered {status}")
    if not isinstance(listing, dict) or not isinstance(listing.get("items"), list):
        raise DrainError(f"listing the pods of node {node} answered 200 without a list of items")
    care = care or Care()
    pods = gpu_pods(listing["items"], node, care.whole_node)
    refused = refusals(pods, care)
    if refused:
        found = "; ".join(f"{reason}: {_listed(names)}" for reason, names in refused.items())
        raise DrainError(f"node {node}: the drain evicted nothing: {found}; every pod keeps running and {KEEP}")
    waiting = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
    evicted: dict[tuple[str, str], _Evicted] = {}
    blocked: dict[tuple[str, str], Outcome] = {}
    done: list[str] = []
    while True:
        for key, pod in list(waiting.items()):
            result = outcome(*api("POST", _pod_path(*key) + "/eviction", eviction(pod)))
            if result.kind == "terminating":
                result, pod = _terminating(api, key, pod, result)
            if result.kind in ("blocked", "terminating"):
                blocked[key] = result
                continue
            blocked.pop(key, None)
            del waiting[key]
            if result.kind in ("evicted", "deleting"):
                grace = grace_seconds(pod)
                gone_by = max(deadline, clock() + grace + GRACE_MARGIN_SECONDS)
                evicted[key] = _Evicted(pod["metadata"].get("uid", ""), grace, gone_by)
            if result.kind == "evicted":
                done.append("/".join(key))
        for key, e in list(evicted.items()):
            status, obj = api("GET", _pod_path(*key), None)
            if status == 404 or (status == 200 and obj.get("metadata", {}).get("uid") != e.uid):
                del evicted[key]
        if not waiting and not evicted:
            return sorted(done)
        now = clock()
        if waiting and now >= deadline:
            raise DrainError(_blocked(node, blocked, waiting, timeout_seconds))
        late = sorted(key for key, e in evicted.items() if now >= e.gone_by)
        if late:
            (ns, name), grace = late[0], evicted[late[0]].grace
            raise DrainError(
                f"node {node}: pod {ns}/{name} was evicted but is still there after {now - start:.0f}s (the later of "
                f"drainTimeoutSeconds, {timeout_seconds:g}s, and its terminationGracePeriodSeconds, {grace}s, + "
                f"{GRACE_MARGIN_SECONDS}s); {KEEP}"
            )
        sleep(interval)


def _terminating(
    api: Api, key: tuple[str, str], pod: dict[str, Any], result: Outcome
) -> tuple[Outcome, dict[str, Any]]:
    """A 403 from a terminating namespace: read the pod again (kubectl refreshes it after each retry, drain.go
    331-335). Gone: nothing to wait for. Its deletion started (the namespace controller deletes every pod of
    the namespace): wait for it as for an evicted pod (drain.go 315-319). Otherwise retry."""
    status, fresh = api("GET", _pod_path(*key), None)
    if status == 404:
        return Outcome("gone"), pod
    if status == 200 and isinstance(fresh, dict) and fresh.get("metadata", {}).get("deletionTimestamp"):
        return Outcome("deleting"), fresh
    return result, pod


def _blocked(
    node: str, blocked: dict[tuple[str, str], Outcome], waiting: dict[tuple[str, str], Any], timeout: float
) -> str:
    key = min((k for k in waiting if k in blocked), default=min(waiting))
    result = blocked.get(key, Outcome("blocked"))
    pod = f"pod {key[0]}/{key[1]} cannot be evicted within {timeout:g}s"
    if result.kind == "terminating":
        return (
            f"node {node}: {pod}: its namespace is being terminated, which refuses evictions, and the pod's "
            f"deletion has not started ({result.reason}); {KEEP}"
        )
    budget = f"PodDisruptionBudget {key[0]}/{result.budget}" if result.budget else "a PodDisruptionBudget"
    return f"node {node}: {pod}: {budget} allows no disruption ({result.reason}); {KEEP}"
