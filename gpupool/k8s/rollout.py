"""Rolling MIG re-layout: the per-node chain that reconfigures a pool a few nodes at a time.

MIG Manager (NVIDIA/mig-parted `cmd/nvidia-mig-manager`) reconfigures a node when its `nvidia.com/mig.config`
label *changes* (or when its pod starts), reports `nvidia.com/mig.config.state` = pending, then success or failed,
and drains nothing itself. Relabelling a whole pool at once reconfigures every node at once. So for each named
node of a MIG-capable pool gpupool registers, in this order:

1. `<node>_cordon` (rollout.cordon): `spec.unschedulable: true`, plus an annotation naming the target config
   so that it is re-applied on every layout change.
2. `<node>_mig`: not a node patch but a step of its own (a Pulumi dynamic resource, components/mig_step.py;
   what it does is gpupool.k8s.mig_step): drain the node's GPU pods (rollout.drain, gpupool.k8s.drain), restart
   *that node's* MIG Manager pod and wait for its start-up run (so it mounts the new MIG ConfigMap), relabel
   with `pending` and wait for MIG Manager's `success` or `failed`, then record the config in the label
   `gpupool.dev/mig-config-checked`; `failed` or a timeout stops the rollout with the node cordoned. It runs
   on `up` only, exactly when the node's config changes, and again after an interrupted run, which it finishes
   (a rerun finds the node's labels and restarts its MIG Manager where a relabel alone would not be answered).
3. `<node>_uncordon` (rollout.cordon): the cordon's field manager applying without `spec.unschedulable`
   (which releases and so removes it), and an annotation naming the config (so that, like every step, it
   changes, and runs again, exactly when the node's config changes).

At most `maxUnavailable` nodes are in that chain at once: nodes are taken in spec order in waves of that size,
and every step 1 of a wave depends on the last step of every node of the previous wave. A node whose config does
not change has no changed step, so it passes at once. The MIG ConfigMap change itself restarts no MIG Manager
(the config hash in the operator's env covers only the configs of selector-based pools, whose nodes gpupool
does not roll: gpupool.k8s.manifests.build); each rolled node's pod is restarted in its turn instead, which
costs that node seconds rather than a wait for the operator's fleet-wide DaemonSet roll.

Timeouts: the step's own waits use rollout.nodeTimeoutSeconds; cordon and uncordon do not wait.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from gpupool.k8s.naming import bounded
from gpupool.model import platform as m

LABEL_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
# gpupool's own record on the node: the config MIG Manager last reported `success` for there, written by the
# mig step (gpupool.k8s.mig_step): with the label the same, the GPUs have that config, so no drain is needed.
LABEL_CHECKED = "gpupool.dev/mig-config-checked"
ANNOTATION_TARGET = "gpupool.dev/mig-config-target"  # on the cordon patch: the config this cordon is for
ANNOTATION_APPLIED = "gpupool.dev/mig-config-applied"  # on the uncordon patch: the rollout of this config is done
# Written by the arm and ready patches of gpupool releases before the mig step (nodes may still carry them;
# gpupool.k8s.gitops leaves them out of a rendered node's final state).
ANNOTATION_ARMED = "gpupool.dev/mig-config-hash"
ANNOTATION_READY = "gpupool.dev/mig-config-ready"
# Cordon and uncordon apply as one field manager: uncordon is that manager applying without
# spec.unschedulable, which releases (and so removes) the field. Applying `unschedulable: false` instead
# does not take the field over (false is the omitted default): the node stayed cordoned (e2e).
CORDON_MANAGER = "gpupool-rollout-cordon"

# Every gpupool node patch skips the provider's await, so its outputs are the API server's answer to its own
# apply. With a `pulumi.com/waitFor` the provider returns instead the last Node its informer delivered, and that
# can be a Node from before the apply: a Node's generation does not move on label changes, so the observer
# takes an older event as current (pulumi-kubernetes v4.34.2 pkg/await/condition/observer.go, ObjectObserver.
# Observe, 88-93; the informer cache is shared by every await of the run, pkg/await/condition/source.go). The
# releases before this one waited for a per-patch marker (`gpupool.dev/last-patch-<step>`), which an older Node
# lacked; but patches are retained on destroy, so after `destroy` and `up` the node still carried every marker,
# an older Node passed the wait, and the next preview planned the patch again (e2e test_cli_path, 1 run in 10).
# With skipAwait the provider's ReadyCondition returns an Immediate condition on the apply's response, before
# it reads any waitFor from the live Node (pkg/metadata/overrides.go 107-109; condition/immediate.go 58-60);
# tests/test_node_patch_outputs.py runs that code. Nothing needs the wait: the mig step does its own waiting.
NODE_PATCH_AWAIT = {"pulumi.com/skipAwait": "true"}


def waves(pool: m.NodePool, nodes: tuple[str, ...] | None = None) -> list[tuple[str, ...]]:
    """The pool's named nodes in rollout order, in waves of at most rollout.max_unavailable."""
    names = pool.nodes if nodes is None else nodes
    n = pool.rollout.max_unavailable
    return [tuple(names[i : i + n]) for i in range(0, len(names), n)]


def names(pool: m.NodePool, node: str) -> dict[str, str]:
    """Pulumi names of a node's chain, in order (without cordon/uncordon when the pool does not cordon):
    the node's pool-patch name plus "_step" ("_" never occurs in pool or node names, so nothing collides)."""
    base = f"pool-{pool.name}.{node}"
    steps = (("cordon", "cordon"), ("mig", "mig"), ("uncordon", "uncordon"))
    out = {step: bounded(f"{base}_{suffix}") for step, suffix in steps}
    if not pool.rollout.cordon:
        del out["cordon"], out["uncordon"]
    return out


def node_manifest(
    node: str, *, labels: dict | None = None, annotations: dict | None = None, unschedulable: bool | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": node}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    # The component adds Pulumi's patchForce: MIG Manager (state label) and kubectl (cordon) write these too.
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    if unschedulable is not None:
        manifest["spec"] = {"unschedulable": unschedulable}
    return manifest


class Step(NamedTuple):
    name: str  # Pulumi name
    manifest: dict[str, Any]
    depends_on: tuple[str, ...]
    timeout_seconds: int | None = None
    wait_for: str | None = None  # Pulumi's waitFor expression
    # Fields this step writes that others then change: MIG Manager moves the state on from our `pending`, and
    # uncordon releases `unschedulable`. Pulumi diffs a patch against the object as its apply last saw it
    # (the state as the wait ended: success), so without this every later `up` would re-apply `pending`
    # for an unchanged config, and MIG Manager would never answer it (seen in e2e: every rerun did).
    ignore_changes: tuple[str, ...] = ()
    field_manager: str | None = None  # CORDON_MANAGER for cordon and uncordon


class Reconfigure(NamedTuple):
    """Step 2: NODE's MIG reconfiguration to CONFIG (components/mig_step.py registers it; gpupool.k8s.mig_step runs it)."""

    name: str  # Pulumi name
    node: str
    config: str  # the target MIG config: the step runs again exactly when it changes
    namespace: str  # the GPU Operator's namespace, where the node's MIG Manager pod runs
    depends_on: tuple[str, ...]
    timeout_seconds: int  # the pool's nodeTimeoutSeconds, for each of the step's waits
    drain: bool = False  # the pool's rollout.drain (with cordon)
    drain_timeout_seconds: int = 0
    force: bool = False  # the pool's rollout.force (kubectl drain --force)
    delete_empty_dir_data: bool = False  # the pool's rollout.deleteEmptyDirData (kubectl --delete-emptydir-data)
    whole_node: bool = False  # drain every pod: the operator may reboot the node (migRebootOnReconfigure)


IGNORE_CORDON = "spec.unschedulable"
# What `pulumi refresh` leaves alone: the cordon and uncordon patches (rollout and MPS re-key; their names end in
# "_cordon", "_uncordon", "_rekey-cordon", "_rekey-uncordon", and "_" occurs in no pool or node name). The
# uncordon's apply releases the cordon's `spec.unschedulable`, and the provider's read rewrites a patch's
# inputs from the live object: after a refresh the cordon's inputs had no `unschedulable`, IGNORE_CORDON then
# kept that absence, and the next re-layout applied the cordon without it (the node was never cordoned; e2e
# test_mig_interrupt). Their drift means nothing anyway: the uncordon undoes the cordon by design. Kept out of
# the refresh, they need no ignoreChanges on their markers and waitFor either; those made an upgraded stack's
# cordon apply the old release's waitFor, on a marker no patch writes any more, and wait for ever (e2e
# test_upgrade). A glob of pulumi's --exclude (pkg/resource/deploy/deployment.go, getMatcher: `*` stays
# within a URN segment). A plain `pulumi up --refresh` reads them and brings the first problem back.
REFRESH_EXCLUDE = ("**$kubernetes:core/v1:NodePatch::*_*cordon",)


def chain(
    pool: m.NodePool, config: str, after: tuple[str, ...], namespace: str, *, whole_node: bool = False
) -> dict[str, list[Step | Reconfigure]]:
    """node -> its steps, in order, for the pool's named nodes, waves chained. `after`: what the first wave
    waits for (the MIG ConfigMap); NAMESPACE: the GPU Operator's; WHOLE_NODE: the operator may reboot a node
    for a MIG mode change (migRebootOnReconfigure), so a draining pool drains every pod, not only GPU pods."""
    out: dict[str, list[Step | Reconfigure]] = {}
    previous = after
    r = pool.rollout
    for wave in waves(pool):
        ends = []
        for node in wave:
            n = names(pool, node)
            steps: list[Step | Reconfigure] = []
            deps = previous
            if "cordon" in n:
                steps.append(
                    Step(
                        n["cordon"],
                        node_manifest(node, annotations={ANNOTATION_TARGET: config}, unschedulable=True),
                        deps,
                        ignore_changes=(IGNORE_CORDON,),
                        field_manager=CORDON_MANAGER,
                    )
                )
                deps = (n["cordon"],)
            steps.append(
                Reconfigure(
                    n["mig"],
                    node,
                    config,
                    namespace,
                    deps,
                    r.node_timeout_seconds,
                    r.drains,
                    r.drain_timeout_seconds if r.drains else 0,
                    r.force,
                    r.delete_empty_dir_data,
                    whole_node and r.drains,
                )
            )
            if "uncordon" in n:
                steps.append(
                    Step(
                        n["uncordon"],
                        # The cordon's annotation too: the same field manager applying without it would release
                        # it, and a refresh would then find the cordon changed and plan it again (a re-cordon).
                        node_manifest(node, annotations={ANNOTATION_TARGET: config, ANNOTATION_APPLIED: config}),
                        (n["mig"],),
                        field_manager=CORDON_MANAGER,
                    )
                )
            out[node] = steps
            ends.append(steps[-1].name)
        previous = tuple(ends)
    return out


# -- MPS re-keys ---------------------------------------------------------------------------------
#
# An MPS pool's device-plugin config key changes with its config (manifests.mps_config_key), and the pool patch
# relabels the node to the new key; the MPS control daemon's config-manager sidecar then sends it SIGHUP, and the
# daemon stops and starts again with the new limits (k8s-device-plugin v0.20.0 cmd/mps-control-daemon/main.go
# 108-162). Stopping (cmd/mps-control-daemon/mps/daemon.go 161-185, Stop) sends `quit` to the control daemon,
# resets the GPUs' compute mode to Default and removes the daemon's pipe/log directory while clients may be
# attached; nothing in that source keeps or re-attaches a running client, so what an attached client sees is
# not shown to be harmless (inferred: at best it keeps running with its old limits, unaccounted by the new
# daemon). So with the pool's cordon and drain on, each named node of an MPS pool is cordoned, its GPU pods
# drained (gpupool.k8s.drain, kubectl drain's care), then relabelled by its pool patch, then uncordoned, in
# waves of rollout.maxUnavailable, exactly when its key changes.

ANNOTATION_SHARING_TARGET = "gpupool.dev/sharing-config-target"  # on the re-key cordon/uncordon: the key


class RekeyDrain(NamedTuple):
    """Evict NODE's GPU pods before its relabel to device-plugin config KEY (gpupool.deploy.rekey_drain_provider)."""

    name: str
    node: str
    key: str
    depends_on: tuple[str, ...]
    timeout_seconds: int
    force: bool = False
    delete_empty_dir_data: bool = False


def rekey_names(pool: m.NodePool, node: str) -> dict[str, str]:
    base = f"pool-{pool.name}.{node}"
    return {s: bounded(f"{base}_{s}") for s in ("rekey-cordon", "rekey-drain", "rekey-uncordon")}


def rekey_chain(
    pool: m.NodePool, key: str, after: tuple[str, ...], pool_patch: dict[str, str]
) -> dict[str, list[Step | RekeyDrain]]:
    """node -> [cordon, drain, uncordon] for an MPS pool's named nodes (the pool patch, POOL_PATCH[node], goes
    between drain and uncordon: manifests.build makes it depend on the drain), waves chained; {} unless the
    pool cordons and drains."""
    if not (pool.sharing.mps and pool.rollout.drains and pool.nodes):
        return {}
    out: dict[str, list[Step | RekeyDrain]] = {}
    previous = after
    r = pool.rollout
    for wave in waves(pool):
        ends = []
        for node in wave:
            n = rekey_names(pool, node)
            cordon = Step(
                n["rekey-cordon"],
                node_manifest(node, annotations={ANNOTATION_SHARING_TARGET: key}, unschedulable=True),
                previous,
                ignore_changes=(IGNORE_CORDON,),
                field_manager=CORDON_MANAGER,
            )
            drain = RekeyDrain(
                n["rekey-drain"], node, key, (cordon.name,), r.drain_timeout_seconds, r.force, r.delete_empty_dir_data
            )
            uncordon = Step(
                n["rekey-uncordon"],
                node_manifest(node, annotations={ANNOTATION_SHARING_TARGET: key}),
                (pool_patch[node],),
                field_manager=CORDON_MANAGER,
            )
            out[node] = [cordon, drain, uncordon]
            ends.append(uncordon.name)
        previous = tuple(ends)
    return out
