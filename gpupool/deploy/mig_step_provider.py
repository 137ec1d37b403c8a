"""The `<node>_mig` step's Pulumi dynamic provider (gpupool.k8s.rollout; the resource is components/mig_step.py; what
it does is gpupool.k8s.mig_step).

Like gpupool.deploy.drain_provider (kept so that stacks still holding its drain steps can delete them), it runs
in the engine's `pulumi-resource-pulumi-python` host, unpickled by reference from the installed package.
Inputs: node, config, namespace (the GPU Operator's), kubeconfig and context (the Kubernetes provider's),
timeoutSeconds, and the drain settings (drain, drainTimeoutSeconds, force, deleteEmptyDirData).
- diff reports a change only when node or config change: create/update (never run by a preview) run exactly
  when the node's target config changes, or again after an interrupted run (the engine then has no record of
  its outcome, and gpupool.k8s.mig_step.run is written to be run again);
- an error meant for a person (the node failed, a wait timed out, a blocked drain, an unreachable API server)
  is sent as its one line, not a traceback (see drain_provider).
"""

from __future__ import annotations

import sys
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

DIFF_KEYS = ("node", "config")


class MigStepProvider(ResourceProvider):
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in DIFF_KEYS))

    def _run(self, props: dict[str, Any]) -> dict[str, Any]:
        from gpupool.k8s import drain, kubeclient, mig_step

        try:
            api = kubeclient.Client(props.get("kubeconfig") or None, props.get("context") or None)
            settings = mig_step.Settings(
                node=props["node"],
                config=props["config"],
                namespace=props["namespace"],
                timeout_seconds=float(props["timeoutSeconds"]),
                drain=bool(props.get("drain")),
                drain_timeout_seconds=float(props.get("drainTimeoutSeconds") or 0),
                care=drain.Care(bool(props.get("force")), bool(props.get("deleteEmptyDirData"))),
            )
            outcome = mig_step.run(api, settings)
        except (mig_step.MigStepError, drain.DrainError, kubeclient.KubeAPIError, kubeclient.KubeconfigError):
            sys.tracebacklimit = 0
            raise
        except Exception:
            if getattr(sys, "tracebacklimit", None) == 0:
                del sys.tracebacklimit
            raise
        return {**props, "outcome": outcome}

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(props["node"], self._run(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self._run(news))
