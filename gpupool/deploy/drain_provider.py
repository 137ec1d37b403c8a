"""The drain step's Pulumi dynamic provider, as gpupool releases before the mig step registered it (the drain now runs
inside the mig step, gpupool.k8s.mig_step). Kept importable: the engine unpickles a dynamic resource's provider
from the state to delete it, so a stack that still holds drain steps needs this class once more, to drop them.

The engine runs a dynamic provider in a process of its own (`pulumi-resource-pulumi-python`, which ships with the
Pulumi CLI: `python -m pulumi.dynamic`), unpickling the provider object the program registered. dill pickles a
class of an importable module by reference, so it lives here, in the installed package under the same name
whether the program runs from this repository or from a team's own (`components` is `gpupool.pulumi` there).

Inputs: node, config (the target MIG config), kubeconfig and context (what the Kubernetes provider was given;
empty: $KUBECONFIG or ~/.kube/config and its current context, as the provider does), timeoutSeconds, force and
deleteEmptyDirData (the pool's rollout settings named after kubectl drain's flags; gpupool.k8s.drain.Care).
- diff reports a change only when node or config change, so create/update, which run on `up` and never on a
  preview, drain exactly when the node's config changes (a moved kubeconfig is no reason to drain);
- the drain itself does nothing when the node's `mig-config-checked` record is missing or
  equals the config, or its `nvidia.com/mig.config` already is the config: nothing is reconfigured;
- a DrainError fails the step: the relabel after it never runs, the node stays cordoned with its old label.
  An error meant for the operator (a blocked eviction, an unreachable API server, a kubeconfig it cannot use)
  is sent as its one line, not a traceback (gpupool.deploy.node_step_provider).
"""

from __future__ import annotations

from typing import Any

from gpupool.deploy.node_step_provider import NodeStepProvider
from gpupool.k8s.rollout import LABEL_CHECKED, LABEL_MIG_CONFIG


def changing(labels: dict[str, str], config: str) -> bool:
    """The old chain's rule: the node's config changes only when gpupool checked another config on it
    and its label is not already the target."""
    checked = labels.get(LABEL_CHECKED)
    return bool(checked) and checked != config and labels.get(LABEL_MIG_CONFIG) != config


class DrainProvider(NodeStepProvider):
    DIFF_KEYS = ("node", "config")

    def _step(self, props: dict[str, Any]) -> dict[str, Any]:
        return self._drain(props)

    def _drain(self, props: dict[str, Any]) -> dict[str, Any]:
        from urllib.parse import quote

        from gpupool.k8s import drain, kubeclient

        api = kubeclient.Client(props.get("kubeconfig") or None, props.get("context") or None)
        node = props["node"]
        status, obj = api("GET", f"/api/v1/nodes/{quote(node, safe='')}", None)
        if status != 200:
            raise drain.DrainError(f"reading node {node} answered {status}")
        evicted: list[str] = []
        if changing(obj.get("metadata", {}).get("labels", {}), props["config"]):
            # Absent in a state written before these settings existed: kubectl's defaults (off).
            care = drain.Care(bool(props.get("force", False)), bool(props.get("deleteEmptyDirData", False)))
            evicted = drain.drain(api, node, timeout_seconds=float(props["timeoutSeconds"]), care=care)
        return {**props, "evicted": evicted}
