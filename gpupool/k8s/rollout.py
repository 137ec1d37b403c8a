"""Rolling MIG re-layout: the per-node chain of NodePatches that reconfigures a pool a few nodes at a time.

MIG Manager (NVIDIA/mig-parted `cmd/nvidia-mig-manager`) reconfigures a node when its `nvidia.com/mig.config`
label *changes* (or when it starts), reports `nvidia.com/mig.config.state` = pending, then success or failed,
and drains nothing itself. Relabelling a whole pool at once reconfigures every node at once. So for each named
node of a MIG-capable pool gpupool registers, in this order:

0. `<node>-mig-arm` (before the MIG ConfigMap, in the mig-config component): `mig.config.state: pending` and an
   annotation with the hash of the MIG config text, so it is applied exactly when the ConfigMap changes.
   MIG Manager asserts the selected name against its *mounted* config file (mig-parted v0.15.0
   `pkg/mig/reconfigure/reconfigure.go` 137-140, `assert --valid-config`), which kubelet refreshes only on its
   own sync; a changed ConfigMap reaches it for certain when the config-hash roll restarts its pod. A restarted
   pod runs once for the label it read at start (`cmd/nvidia-mig-manager/main.go` 431-446 and the informer's
   AddFunc, 569-571) and writes success or failed (reconfigure.go 137-146) over this `pending`. So after the
   arm, a node whose state is no longer `pending` has a MIG Manager that mounts the new file and is idle.
   A node of a later wave still carries its old config then, which the new file keeps while a node carries
   it (gpupool.k8s.mig_in_use), so its restarted pod writes success, not failed.
1. `<node>-cordon` (rollout.cordon): `spec.unschedulable: true`, plus an annotation naming the target config
   so that it is re-applied on every layout change.
1b. `<node>-mig-ready`: an annotation naming the config, with a waitFor (`ready()`) until the node's MIG
   Manager restarted after the arm (state success or failed). Relabelling earlier would let the old pod assert
   the new name against its old file ("selected mig-config not present": failed), or let the restarting
   pod's start-up run write a stale `success` for the old config after step 2's `pending`.
1c. `<node>-drain` (with cordon and drain on): not a node patch but a step of its own (a Pulumi dynamic
   resource, components/drain_step.py) that evicts the node's GPU pods through the Eviction API, budgets
   respected, and waits until they are gone (gpupool.k8s.drain). NVIDIA requires that no workload runs on GPUs
   being reconfigured; MIG Manager pauses only the operator's own clients. It drains only when the node's config
   changes, by done()'s rule. It refuses, before evicting anything, GPU pods no controller owns or with emptyDir
   data (unless the pool's `rollout.force` / `rollout.deleteEmptyDirData`, kubectl drain's flags) and GPU pods of
   a DaemonSet; that, or a pod blocked at `drainTimeoutSeconds` or not gone within its grace period, fails it:
   the relabel (which is what sets MIG Manager off) never runs, the node stays cordoned with its old config. It is not in the render (kubectl has nothing to apply for it).
2. `<node>-mig`: the `nvidia.com/mig.config` label and, in the same server-side apply, `mig.config.state:
   pending`. Writing pending together with the new config closes the stale-success race: the previous
   layout's `success` is gone before anything waits (observed on this toolchain: without it the wait passed
   on the old `success` in 1.4 s). `pulumi.com/waitFor` (`done()` below) then waits until the state is success or
   failed. The wait runs only when this patch changes, that is when the node's config changes.
3. `<node>-mig-check`: the label `gpupool.dev/mig-config-checked` recording the config, with a waitFor
   (CHECK below) that passes on success and errors on failed; a failed node therefore stops the rollout
   within seconds, naming the node (resource name) and its state (the error quotes its labels), and stays
   cordoned.
4. `<node>-uncordon` (rollout.cordon): the cordon's field manager applying without `spec.unschedulable`
   (which releases and so removes it), and an annotation naming the config (so
   that, like every step, it changes, and runs again, exactly when the node's config changes).

waitFor treats `failed` as "not yet", so `done()` accepts both outcomes and CHECK turns failed into an error.

At most `maxUnavailable` nodes are in that chain at once: nodes are taken in spec order in waves of that size,
and every step 1 of a wave depends on the last step of every node of the previous wave. A node whose config does
not change has no changed patch, so it passes at once. A chain that is *created* (first up, a new node, a
fresh stack adopting labelled nodes) cannot see the label value its apply replaced, so `done()` does not wait when
the node's `mig-config-checked` record is missing (a node gpupool never rolled: new, or labelled by a gpupool
without rollouts) or already equals the config (nothing changes; MIG Manager, which answers only a changed
label, would never answer). In those cases the `pending` written by step 2 stays until MIG Manager next
reconfigures the node; the GPU Operator itself never reads the state label (checked in its source).

Timeouts are Pulumi customTimeouts, not the `pulumi.com/timeoutSeconds` annotation: an annotation is an input,
and changing it would re-apply the patch (and its pending state) without a config change, which MIG Manager
would never answer.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

from gpupool.k8s.naming import bounded
from gpupool.model import platform as m

LABEL_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
# gpupool's own record on the node: the config its last check looked at (written by the check step, after the
# wait for MIG Manager). It is what tells "this config is already there" from "this config is new" when a
# chain is *created* rather than updated: a fresh stack adopting labelled nodes, or state recovered after a
# loss. A wait only runs when a patch is applied, and an applied patch cannot see the value it replaced.
LABEL_CHECKED = "gpupool.dev/mig-config-checked"
ANNOTATION_TARGET = "gpupool.dev/mig-config-target"  # on the cordon patch: the config this cordon is for
ANNOTATION_APPLIED = "gpupool.dev/mig-config-applied"  # on the uncordon patch: the rollout of this config is done
ANNOTATION_ARMED = "gpupool.dev/mig-config-hash"  # on the arm patch: the MIG config text its MIG Manager must mount
ANNOTATION_READY = "gpupool.dev/mig-config-ready"  # on the ready patch: the config its MIG Manager can now see
CHECK_TIMEOUT_SECONDS = 10
# Cordon and uncordon apply as one field manager: uncordon is that manager applying without
# spec.unschedulable, which releases (and so removes) the field. Applying `unschedulable: false` instead
# does not take the field over (false is the omitted default): the node stayed cordoned (e2e).
CORDON_MANAGER = "gpupool-rollout-cordon"

_STATE = f"@['{LABEL_STATE}']"
_CHECKED = f"@['{LABEL_CHECKED}']"
# The node's config is already the one gpupool checked last: re-applying it is no change (MIG Manager reacts to
# a *changed* label only, so waiting for it would wait forever).
_ALREADY = f"{_CHECKED} == @['{LABEL_MIG_CONFIG}']"


def done(config: str) -> str:
    """waitFor for step 2, on the labels map (the only member of metadata carrying the mig.config key): the
    node carries `config` and is done either way, or gpupool never checked it (new, or labelled by a gpupool
    without rollouts: nothing to tell a change by), or nothing changes.

    `config` must be in the condition: the provider evaluates it on the last object its (shared) informer
    delivered, and a Node's generation does not move on label changes, so an event older than this very
    apply is accepted too (seen in e2e: a node whose previous `success` was observed after the relabel passed
    in 0.14 s). Such an object still has the old config."""
    return (
        f"jsonpath={{.metadata[?@['{LABEL_MIG_CONFIG}'] == '{config}' && ({_STATE} == 'success' "
        f"|| {_STATE} == 'failed' || !{_CHECKED} || {_ALREADY})]}}"
    )


def ready(config: str) -> str:
    """waitFor for step 1b, on the labels map (the only member of metadata that can carry the state key): MIG
    Manager moved the state on from the arm's `pending` (it restarted with the new file and its start-up run is
    over), or nothing changes (`checked` is this config: a created chain), or gpupool never rolled the node (new:
    nothing runs there to wait for). The comparisons come first (see check())."""
    return (
        f"jsonpath={{.metadata[?{_STATE} == 'success' || {_STATE} == 'failed' || {_CHECKED} == '{config}' "
        f"|| ({_STATE} && !{_CHECKED})]}}"
    )


def check(config: str) -> str:
    """waitFor for step 3. This patch writes LABEL_CHECKED first, so here only the state matters: after `done()` it
    is success or failed for a real change, and pending where `done()` did not wait (nothing was changed; our own
    `pending` stays until MIG Manager next reconfigures). A descendant query over metadata: its first result is
    the labels map when the state is neither (a map compared with a value is an error that quotes it: node and
    state), otherwise the label this very patch writes, which equals `config`. ("!=" is avoided: the provider
    splits on "=")."""
    # `checked == config` in the filter: an informer event older than this apply (see done()) is not an error.
    # The comparison comes first: theory/jsonpath v0.9.0 (the provider's) fails to parse `@[a] && @[b] == 'v' && c`.
    return (
        f"jsonpath={{.metadata..[?{_CHECKED} == '{config}' && @['{LABEL_MIG_CONFIG}'] "
        f"&& !({_STATE} == 'success' || {_STATE} == 'pending'), '{LABEL_CHECKED}']}}={config}"
    )


# Every gpupool node patch writes its own marker here and first waits to observe it. The provider evaluates a
# wait on, and returns as the patch's outputs, the last object its informer delivered; for a Node that can be
# older than the apply (a Node's generation does not move on label changes, so the provider's staleness check
# lets it through). Outputs older than the apply made the next `up` diff and re-apply unchanged patches: a
# re-cordon of a node nothing was rolling (seen in e2e).
LAST_PATCH = "gpupool.dev/last-patch"


def node_patch_marker(name: str, manifest: dict[str, Any]) -> str:
    """The patch's name and a digest of what it writes: unique per patch and per content, so an object from
    before this apply (written by another patch, or by this one with other content) never carries it."""
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:12]
    return f"{name}.{digest}"


def node_patch_wait(marker: str, wait_for: str | None) -> str:
    """The `pulumi.com/waitFor` of a node patch: a JSON array (all must hold) of its own apply observed, then
    the step's own wait, if any."""
    conditions = [f"jsonpath={{.metadata.annotations['{LAST_PATCH}']}}={marker}"]
    if wait_for:
        conditions.append(wait_for)
    return json.dumps(conditions)


def waves(pool: m.NodePool, nodes: tuple[str, ...] | None = None) -> list[tuple[str, ...]]:
    """The pool's named nodes in rollout order, in waves of at most rollout.max_unavailable."""
    names = pool.nodes if nodes is None else nodes
    n = pool.rollout.max_unavailable
    return [tuple(names[i : i + n]) for i in range(0, len(names), n)]


def names(pool: m.NodePool, node: str) -> dict[str, str]:
    """Pulumi names of a node's chain, in order (without cordon/uncordon when the pool does not cordon):
    the node's pool-patch name plus "_step" ("_" never occurs in pool or node names, so nothing collides)."""
    base = f"pool-{pool.name}.{node}"
    steps = (
        ("arm", "mig-arm"),
        ("cordon", "cordon"),
        ("ready", "mig-ready"),
        ("drain", "drain"),
        ("mig", "mig"),
        ("check", "mig-check"),
        ("uncordon", "uncordon"),
    )
    out = {step: bounded(f"{base}_{suffix}") for step, suffix in steps}
    if not pool.rollout.cordon:
        del out["cordon"], out["uncordon"]
    if not pool.rollout.drains:
        del out["drain"]
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


class Drain(NamedTuple):
    """Step 1c: evict NODE's GPU pods before the relabel to CONFIG (components/drain_step.py registers it)."""

    name: str  # Pulumi name
    node: str
    config: str  # the target MIG config: the step runs again exactly when it changes
    depends_on: tuple[str, ...]
    timeout_seconds: int
    force: bool = False  # the pool's rollout.force (kubectl drain --force)
    delete_empty_dir_data: bool = False  # the pool's rollout.deleteEmptyDirData (kubectl --delete-emptydir-data)


IGNORE_STATE = f'metadata.labels["{LABEL_STATE}"]'
IGNORE_CORDON = "spec.unschedulable"


def arm(pool: m.NodePool, node: str, config_hash: str) -> Step:
    """Step 0 of NODE: registered before the MIG ConfigMap (which depends on it), applied exactly when the
    ConfigMap's content (CONFIG_HASH) changes. Like step 2's `pending`, MIG Manager moves the state on."""
    return Step(
        names(pool, node)["arm"],
        node_manifest(node, labels={LABEL_STATE: "pending"}, annotations={ANNOTATION_ARMED: config_hash}),
        (),
        ignore_changes=(IGNORE_STATE,),
    )


def chain(pool: m.NodePool, config: str, after: tuple[str, ...]) -> dict[str, list[Step | Drain]]:
    """node -> its steps 1-4, in order, for the pool's named nodes, waves chained (step 0 is arm()). `after`:
    what the first wave waits for (the MIG ConfigMap). The waitFor expressions are Pulumi's: the component
    puts them into the `pulumi.com/waitFor` annotation, the rendered YAML only names them in a comment."""
    out: dict[str, list[Step | Drain]] = {}
    previous = after
    for wave in waves(pool):
        ends = []
        for node in wave:
            n = names(pool, node)
            steps: list[Step | Drain] = []
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
                Step(
                    n["ready"],
                    node_manifest(node, annotations={ANNOTATION_READY: config}),
                    deps,
                    pool.rollout.node_timeout_seconds,
                    ready(config),
                )
            )
            deps = (n["ready"],)
            if "drain" in n:
                r = pool.rollout
                steps.append(
                    Drain(n["drain"], node, config, deps, r.drain_timeout_seconds, r.force, r.delete_empty_dir_data)
                )
                deps = (n["drain"],)
            steps.append(
                Step(
                    n["mig"],
                    node_manifest(node, labels={LABEL_MIG_CONFIG: config, LABEL_STATE: "pending"}),
                    deps,
                    pool.rollout.node_timeout_seconds,
                    done(config),
                    (IGNORE_STATE,),
                )
            )
            steps.append(
                Step(
                    n["check"],
                    node_manifest(node, labels={LABEL_CHECKED: config}),
                    (n["mig"],),
                    CHECK_TIMEOUT_SECONDS,
                    check(config),
                )
            )
            if "uncordon" in n:
                steps.append(
                    Step(
                        n["uncordon"],
                        node_manifest(node, annotations={ANNOTATION_APPLIED: config}),
                        (n["check"],),
                        field_manager=CORDON_MANAGER,
                    )
                )
            out[node] = steps
            ends.append(steps[-1].name)
        previous = tuple(ends)
    return out
