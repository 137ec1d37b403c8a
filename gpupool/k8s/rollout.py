"""Rolling MIG re-layout: the per-node chain of NodePatches that reconfigures a pool a few nodes at a time.

MIG Manager (NVIDIA/mig-parted `cmd/nvidia-mig-manager`) reconfigures a node when its `nvidia.com/mig.config`
label *changes* (or when it starts), reports `nvidia.com/mig.config.state` = pending, then success or failed,
and drains nothing itself. Relabelling a whole pool at once reconfigures every node at once. So for each named
node of a MIG-capable pool gpupool registers, in this order:

1. `<node>-cordon` (rollout.cordon): `spec.unschedulable: true`, plus an annotation naming the target config
   so that it is re-applied on every layout change.
2. `<node>-mig`: the `nvidia.com/mig.config` label and, in the same server-side apply, `mig.config.state:
   pending`. Writing pending together with the new config closes the stale-success race: the previous
   layout's `success` is gone before anything waits (observed on this toolchain: without it the wait passed
   on the old `success` in 1.4 s). `pulumi.com/waitFor` (DONE below) then waits until the state is success or
   failed. The wait runs only when this patch changes, that is when the node's config changes.
3. `<node>-mig-check`: an annotation recording the config, with a waitFor (CHECK below) that passes on success
   and errors on anything else; a failed node therefore stops the rollout within seconds, naming the node
   (resource name) and its state (the error quotes its labels), and stays cordoned.
4. `<node>-uncordon` (rollout.cordon): the cordon's field manager applying without `spec.unschedulable`
   (which releases and so removes it), and an annotation naming the config (so
   that, like every step, it changes, and runs again, exactly when the node's config changes).

waitFor treats `failed` as "not yet", so DONE accepts both outcomes and CHECK turns failed into an error.

At most `maxUnavailable` nodes are in that chain at once: nodes are taken in spec order in waves of that size,
and every step 1 of a wave depends on the last step of every node of the previous wave. A node whose config does
not change has no changed patch, so it passes at once; so does a new node: one that does not carry gpupool's
`gpupool.dev/pool` label yet (it has no workloads). That label is written by the node's pool patch, which
therefore comes after the chain.

Timeouts are Pulumi customTimeouts, not the `pulumi.com/timeoutSeconds` annotation: an annotation is an input,
and changing it would re-apply the patch (and its pending state) without a config change, which MIG Manager
would never answer.
"""
from __future__ import annotations

from typing import Any

from gpupool.model import platform as m

LABEL_STATE = "nvidia.com/mig.config.state"
LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_POOL = "gpupool.dev/pool"
ANNOTATION_TARGET = "gpupool.dev/mig-config-target"  # on the cordon patch: the config this cordon is for
ANNOTATION_CHECKED = "gpupool.dev/mig-config-checked"  # on the check patch: the config MIG Manager reported
ANNOTATION_APPLIED = "gpupool.dev/mig-config-applied"  # on the uncordon patch: the rollout of this config is done
CHECK_TIMEOUT_SECONDS = 10
# Cordon and uncordon apply as one field manager: uncordon is that manager applying without
# spec.unschedulable, which releases (and so removes) the field. Applying `unschedulable: false` instead
# does not take the field over (false is the omitted default): the node stayed cordoned (e2e).
CORDON_MANAGER = "gpupool-rollout-cordon"

_EXISTING = f"@['{LABEL_POOL}']"  # a node gpupool already manages (new nodes lack the label)
_STATE = f"@['{LABEL_STATE}']"
# On the labels map (the only member of metadata carrying the mig.config key): done either way, or a new node.
DONE = (f"jsonpath={{.metadata[?@['{LABEL_MIG_CONFIG}'] && ({_STATE} == 'success' || {_STATE} == 'failed' "
        f"|| !{_EXISTING})]}}")


def check(config: str) -> str:
    """waitFor for step 3. A descendant query over metadata: its first result is the labels map when an existing
    node is not in success (a map compared with a value is an error that quotes it: node and state), otherwise
    the annotation this very patch writes, which equals `config`. ("!=" is avoided: the provider splits on "=")."""
    return (f"jsonpath={{.metadata..[?@['{LABEL_MIG_CONFIG}'] && {_EXISTING} && !({_STATE} == 'success'), "
            f"'{ANNOTATION_CHECKED}']}}={config}")


def waves(pool: m.NodePool, nodes: tuple[str, ...] | None = None) -> list[tuple[str, ...]]:
    """The pool's named nodes in rollout order, in waves of at most rollout.max_unavailable."""
    names = pool.nodes if nodes is None else nodes
    n = pool.rollout.max_unavailable
    return [tuple(names[i:i + n]) for i in range(0, len(names), n)]


def names(pool: m.NodePool, node: str) -> dict[str, str]:
    """Pulumi names of a node's chain, in order (without cordon/uncordon when the pool does not cordon):
    the node's pool-patch name plus "_step" ("_" never occurs in pool or node names, so nothing collides)."""
    from gpupool.k8s.manifests import bounded

    base = f"pool-{pool.name}.{node}"
    out = {step: bounded(f"{base}_{step}") for step in ("cordon", "mig", "mig-check", "uncordon")}
    out["check"] = out.pop("mig-check")
    out = {k: out[k] for k in ("cordon", "mig", "check", "uncordon")}
    if not pool.rollout.cordon:
        del out["cordon"], out["uncordon"]
    return out


def last_step(pool: m.NodePool, node: str) -> str:
    return list(names(pool, node).values())[-1]


def node_manifest(node: str, *, labels: dict | None = None, annotations: dict | None = None,
                  unschedulable: bool | None = None) -> dict[str, Any]:
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


Step = tuple  # (pulumi name, manifest, depends_on, timeout seconds | None, waitFor expression | None)


def chain(pool: m.NodePool, config: str, after: tuple[str, ...]) -> dict[str, list[Step]]:
    """node -> its steps, in order, for the pool's named nodes, waves chained. `after`: what the first wave
    waits for (the MIG ConfigMap). The waitFor expressions are Pulumi's: the component puts them into the
    `pulumi.com/waitFor` annotation, the rendered YAML only names them in a comment."""
    out: dict[str, list[Step]] = {}
    previous = after
    for wave in waves(pool):
        ends = []
        for node in wave:
            n = names(pool, node)
            steps: list[Step] = []
            deps = previous
            if "cordon" in n:
                steps.append((n["cordon"], node_manifest(node, annotations={ANNOTATION_TARGET: config},
                                                         unschedulable=True), deps, None, None))
                deps = (n["cordon"],)
            steps.append((n["mig"], node_manifest(node, labels={LABEL_MIG_CONFIG: config, LABEL_STATE: "pending"}),
                          deps, pool.rollout.node_timeout_seconds, DONE))
            steps.append((n["check"], node_manifest(node, annotations={ANNOTATION_CHECKED: config}),
                          (n["mig"],), CHECK_TIMEOUT_SECONDS, check(config)))
            if "uncordon" in n:
                steps.append((n["uncordon"], node_manifest(node, annotations={ANNOTATION_APPLIED: config}),
                              (n["check"],), None, None))
            out[node] = steps
            ends.append(steps[-1][0])
        previous = tuple(ends)
    return out
