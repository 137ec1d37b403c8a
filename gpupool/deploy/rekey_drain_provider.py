"""The drain before an MPS pool's re-key (gpupool.k8s.rollout.rekey_chain): a Pulumi dynamic provider, run like
gpupool.deploy.mig_step_provider (whose notes apply).

Inputs: node, key (the device-plugin config key the pool patch is about to set), kubeconfig, context,
timeoutSeconds, force, deleteEmptyDirData. diff reports a change only when node or key change, so create/update
run exactly when the node's key changes. It drains only when the node carries another key already: a node
without one (new, or not yet labelled) runs no MPS daemon to restart.
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import quote

from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

DIFF_KEYS = ("node", "key")
LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"


class RekeyDrainProvider(ResourceProvider):
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in DIFF_KEYS))

    def _run(self, props: dict[str, Any]) -> dict[str, Any]:
        from gpupool.k8s import drain, kubeclient

        try:
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
        except (drain.DrainError, kubeclient.KubeAPIError, kubeclient.KubeconfigError):
            sys.tracebacklimit = 0
            raise
        except Exception:
            if getattr(sys, "tracebacklimit", None) == 0:
                del sys.tracebacklimit
            raise
        return {**props, "evicted": evicted}

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(props["node"], self._run(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self._run(news))
