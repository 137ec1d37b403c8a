"""The `<node>_mig` step's Pulumi dynamic provider (gpupool.k8s.rollout; the resource is components/mig_step.py; what
it does is gpupool.k8s.mig_step).

Like gpupool.deploy.drain_provider (kept so that stacks still holding its drain steps can delete them), it runs
in the engine's `pulumi-resource-pulumi-python` host, unpickled by reference from the installed package.
Inputs: node, config, namespace (the GPU Operator's), kubeconfig and context (the Kubernetes provider's),
timeoutSeconds, and the drain settings (drain, drainTimeoutSeconds, force, deleteEmptyDirData, wholeNode).
- diff reports a change only when node or config change: create/update (never run by a preview) run exactly
  when the node's target config changes, or again after an interrupted run (the engine then has no record of
  its outcome, and gpupool.k8s.mig_step.run is written to be run again);
- an error meant for a person (the node failed, a wait timed out, a blocked drain, an unreachable API server)
  is sent as its one line, not a traceback (gpupool.deploy.node_step_provider).
"""

from __future__ import annotations

from typing import Any

from gpupool.deploy.node_step_provider import NodeStepProvider


class MigStepProvider(NodeStepProvider):
    DIFF_KEYS = ("node", "config")

    def _step(self, props: dict[str, Any]) -> dict[str, Any]:
        from gpupool.k8s import drain, kubeclient, mig_step

        api = kubeclient.Client(props.get("kubeconfig") or None, props.get("context") or None)
        settings = mig_step.Settings(
            node=props["node"],
            config=props["config"],
            namespace=props["namespace"],
            timeout_seconds=float(props["timeoutSeconds"]),
            drain=bool(props.get("drain")),
            drain_timeout_seconds=float(props.get("drainTimeoutSeconds") or 0),
            care=drain.Care(
                bool(props.get("force")), bool(props.get("deleteEmptyDirData")), bool(props.get("wholeNode"))
            ),
        )
        return {**props, "outcome": mig_step.run(api, settings)}
