"""One node's MIG reconfiguration (gpupool.k8s.rollout's `<node>_mig` step): drain, restart that node's MIG Manager,
relabel, wait, record; written so that a rerun after an interrupt anywhere in it finishes the job.

What MIG Manager does (NVIDIA/mig-parted v0.15.0, as the GPU Operator v26.7.0 runs it):
- it reacts to a *changed* `nvidia.com/mig.config` label only: the informer's UpdateFunc hands a new value to the
  loop only when it differs from the old one (`cmd/nvidia-mig-manager/main.go` 572-577), never the state label;
- a pod that starts lists the node and runs once for the label it finds (AddFunc, 569-571; the loop, 436-446):
  its *start-up run*. It asserts the name against the config file the pod mounted when it started (the
  operator mounts the MIG ConfigMap, `assets/state-mig-manager/0600_daemonset.yaml`; kubelet refreshes a running
  pod's copy only on its own sync) and writes `failed` if it is missing (`pkg/mig/reconfigure/reconfigure.go`
  137-140), `success` if the GPUs already have it (142-146), otherwise `pending` (158) and, once applied,
  `success` (or `failed`);
- its pods carry `app: nvidia-mig-manager` (0600_daemonset.yaml lines 7-15), one per node (a DaemonSet, which
  tolerates a cordon: the DaemonSet controller adds the unschedulable toleration).

So instead of waiting for the operator's DaemonSet roll to reach the node (one node at a time across the whole
fleet, in its own order), the step restarts the node's own pod and waits for that pod's start-up run:

1. read the node: its label L, state S and gpupool's record K (`gpupool.dev/mig-config-checked`);
2. L is the target and S `success`: done (a rerun after the job finished, or nodes adopted as they are);
3. no MIG Manager pod on the node (new nodes, the operator not there yet): drain (as in 4: the pod, when it comes,
   applies the label whatever runs there), set L, write no `pending` (nothing answers it now) and do not wait;
4. drain (the pool's rollout.drain), unless K and L already are the target (the GPUs have it: a stale state);
5. `pending`, then delete the pod and wait until the state leaves `pending`: the replacement mounted the current
   ConfigMap (which keeps L while a node carries it, gpupool.k8s.mig_in_use) and ran once for L. A node without
   L has no start-up run to wait for: the pod is deleted and 6 follows at once;
6. if L is not the target: the label and `pending` in one merge patch, then wait for `success` or `failed`
   with the label the target (the idle new pod sees a changed label). If L already was the target (a rerun
   after an interrupt, or after a failure was fixed), the start-up run of step 5 was the run for the target;
7. `success`: record K; `failed`: an error naming the node, which stays cordoned.

`pending` is written only in 5 and 6, where the step then waits. A rerun after an interrupt at any point finds
one of: L old (5 and 6 again), L the target with S pending or failed (5 restarts the pod, whose start-up run is
the run for the target), L the target with S success (2). No person needs to restart anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gpupool.k8s import drain as drain_mod
from gpupool.k8s.rollout import LABEL_CHECKED, LABEL_MIG_CONFIG, LABEL_STATE

Api = Callable[..., tuple[int, Any]]  # kubeclient.Client
MIG_MANAGER_SELECTOR = "app=nvidia-mig-manager"
MERGE = "application/merge-patch+json"
POLL_SECONDS = 0.5


class MigStepError(Exception):
    """The step cannot finish: the node failed, timed out, or the API refused; said for a person."""


@dataclass(frozen=True)
class Settings:
    node: str
    config: str  # the target `nvidia.com/mig.config`
    namespace: str  # the GPU Operator's namespace (where the MIG Manager pods run)
    timeout_seconds: float  # the pool's nodeTimeoutSeconds, for each of the two waits
    drain: bool = False
    drain_timeout_seconds: float = 0
    care: drain_mod.Care | None = None


def _node(api: Api, node: str) -> dict[str, Any]:
    status, obj = api("GET", f"/api/v1/nodes/{quote(node, safe='')}")
    if status != 200 or not isinstance(obj, dict):
        raise MigStepError(f"node {node}: reading it answered HTTP {status}")
    return obj


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _patch_labels(api: Api, node: str, labels: dict[str, str]) -> None:
    # A JSON merge patch, as MIG Manager writes the state (reconfigure.go setNodeLabels): it sets these labels and
    # touches no other field, and unlike a server-side apply it never releases a label another apply wrote.
    path = f"/api/v1/nodes/{quote(node, safe='')}?fieldManager=gpupool-rollout"
    status, _ = api("PATCH", path, {"metadata": {"labels": labels}}, content_type=MERGE)
    if status != 200:
        raise MigStepError(f"node {node}: writing labels {sorted(labels)} answered HTTP {status}")


def mig_manager_pods(api: Api, namespace: str, node: str) -> list[dict[str, Any]]:
    """The MIG Manager pods scheduled on NODE (not already being deleted)."""
    query = (
        f"labelSelector={quote(MIG_MANAGER_SELECTOR, safe='')}&fieldSelector={quote(f'spec.nodeName={node}', safe='')}"
    )
    status, body = api("GET", f"/api/v1/namespaces/{quote(namespace, safe='')}/pods?{query}")
    if status != 200 or not isinstance(body, dict):
        raise MigStepError(f"node {node}: listing MIG Manager pods in namespace {namespace} answered HTTP {status}")
    return [p for p in body.get("items") or [] if not (p.get("metadata") or {}).get("deletionTimestamp")]


def _restart(api: Api, namespace: str, pods: list[dict[str, Any]], node: str) -> None:
    for pod in pods:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(meta['name'], safe='')}"
        # Only this very pod (uid precondition): a replacement the DaemonSet already made is left alone.
        status, _ = api("DELETE", path, {"preconditions": {"uid": meta.get("uid")}})
        if status not in (200, 202, 404, 409):
            raise MigStepError(f"node {node}: deleting its MIG Manager pod {meta['name']} answered HTTP {status}")


def _wait(
    api: Api,
    s: Settings,
    done: Callable[[dict[str, str]], bool],
    what: str,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> dict[str, str]:
    deadline = clock() + s.timeout_seconds
    while True:
        labels = _labels(_node(api, s.node))
        if done(labels):
            return labels
        if clock() >= deadline:
            state = labels.get(LABEL_STATE, "(none)")
            raise MigStepError(
                f"node {s.node}: {what} within nodeTimeoutSeconds ({s.timeout_seconds:g}s); its "
                f"{LABEL_STATE} is {state!r}. The node stays cordoned; see docs/howto/recover-failed-run.md"
            )
        sleep(POLL_SECONDS)


def run(
    api: Api,
    s: Settings,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Steps 1-7 of the module docstring. Returns what happened, one word: "already", "unmanaged" (no MIG
    Manager pod: labelled, not waited for), "reconfigured"."""
    labels = _labels(_node(api, s.node))
    label, state, checked = labels.get(LABEL_MIG_CONFIG), labels.get(LABEL_STATE), labels.get(LABEL_CHECKED)
    if label == s.config and state == "success":
        if checked != s.config:
            _patch_labels(api, s.node, {LABEL_CHECKED: s.config})
        return "already"
    pods = mig_manager_pods(api, s.namespace, s.node)
    if not pods:
        if label != s.config:
            # Drained all the same: MIG Manager, when its pod comes (the operator installed, upgraded or its pod
            # back), applies the label at its start-up run, with whatever GPU pods are still on the node; mig-parted
            # then fails the node, or with WITH_REBOOT reboots it (reconfigure.go 184-202).
            if s.drain:
                drain_mod.drain(
                    api, s.node, timeout_seconds=s.drain_timeout_seconds, care=s.care, clock=clock, sleep=sleep
                )
            _patch_labels(api, s.node, {LABEL_MIG_CONFIG: s.config})
        return "unmanaged"
    if s.drain and not (label == s.config and checked == s.config):
        drain_mod.drain(api, s.node, timeout_seconds=s.drain_timeout_seconds, care=s.care, clock=clock, sleep=sleep)
    if label:
        _patch_labels(api, s.node, {LABEL_STATE: "pending"})
        _restart(api, s.namespace, pods, s.node)
        started = _wait(
            api,
            s,
            lambda lb: lb.get(LABEL_STATE) in ("success", "failed"),
            "its restarted MIG Manager pod did not finish its start-up run",
            clock,
            sleep,
        )
    else:
        # No label yet (a node gpupool meets first, where the operator set none): a start-up run has nothing to
        # run for and writes no state, so nothing would answer a wait for it (the first `up` on such a node
        # waited out nodeTimeoutSeconds; e2e test_gpupool_up). The restart still gives the replacement the
        # current ConfigMap; it, or the old pod seeing the label appear (a change), runs for the label below.
        _restart(api, s.namespace, pods, s.node)
        started = labels
    if started.get(LABEL_MIG_CONFIG) != s.config:
        _patch_labels(api, s.node, {LABEL_MIG_CONFIG: s.config, LABEL_STATE: "pending"})
        started = _wait(
            api,
            s,
            lambda lb: lb.get(LABEL_MIG_CONFIG) == s.config and lb.get(LABEL_STATE) in ("success", "failed"),
            f"MIG Manager did not apply {s.config}",
            clock,
            sleep,
        )
    if started.get(LABEL_STATE) != "success":
        raise MigStepError(
            f"node {s.node}: MIG Manager reports {LABEL_STATE}={started.get(LABEL_STATE)} for {s.config}; the node "
            "stays cordoned and the later nodes keep their layout. Fix the node (its MIG Manager log says why), "
            "then rerun: the rerun restarts its MIG Manager and continues"
        )
    _patch_labels(api, s.node, {LABEL_CHECKED: s.config})
    return "reconfigured"
