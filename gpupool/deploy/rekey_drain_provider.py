"""The drain before an MPS pool's re-key (gpupool.k8s.rollout.rekey_chain): a Pulumi dynamic provider, run like
gpupool.deploy.mig_step_provider (whose notes apply).

Inputs: node, key (the device-plugin config key the pool patch is about to set), kubeconfig, context,
timeoutSeconds, force, deleteEmptyDirData. diff reports a change only when node or key change, so create/update
run exactly when the node's key changes. It drains only when the node carries another key already: a node
without one (new, or not yet labelled) runs no MPS daemon to restart.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gpupool.deploy.node_step_provider import NodeStepProvider

LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"


class RekeyDrainProvider(NodeStepProvider):
    DIFF_KEYS = ("node", "key")

    def _step(self, props: dict[str, Any]) -> dict[str, Any]:
        from gpupool.k8s import drain, kubeclient

        api = kubeclient.Client(props.get("kubeconfig") or None, props.get("context") or None)
        node = props["node"]
        status, obj = api("GET", f"/api/v1/nodes/{quote(node, safe='')}")
        if status != 200:
            raise drain.DrainError(f"reading node {node} answered {status}")
        current = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_PLUGIN_CONFIG)
        evicted: list[str] = []
        if current and current != props["key"]:
            care = drain.Care(bool(props.get("force")), bool(props.get("deleteEmptyDirData")))
            evicted = drain.drain(api, node, timeout_seconds=float(props["timeoutSeconds"]), care=care)
        return {**props, "evicted": evicted}
