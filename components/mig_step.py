"""NodeMigStep: the `<node>_mig` step of a MIG rollout (gpupool.k8s.rollout), registered by NodePool between the
node's cordon and uncordon. A Pulumi dynamic resource; what it does is gpupool.k8s.mig_step."""

from __future__ import annotations

import pulumi
from pulumi.dynamic import Resource

from gpupool.deploy.mig_step_provider import MigStepProvider
from gpupool.k8s.rollout import Reconfigure


class NodeMigStep(Resource, module="gpupool", name="NodeMigStep"):  # pulumi-python:dynamic/gpupool:NodeMigStep
    def __init__(
        self,
        name: str,
        step: Reconfigure,
        kubeconfig: pulumi.Input[str] | None,
        context: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ):
        props = {
            "node": step.node,
            "config": step.config,
            "namespace": step.namespace,
            "kubeconfig": kubeconfig or "",
            "context": context or "",
            "timeoutSeconds": step.timeout_seconds,
            "drain": step.drain,
            "drainTimeoutSeconds": step.drain_timeout_seconds,
            "force": step.force,
            "deleteEmptyDirData": step.delete_empty_dir_data,
            "wholeNode": step.whole_node,
            "outcome": None,
        }
        # The kubeconfig may be its contents (credentials): kept as a secret in the state.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]))
        super().__init__(MigStepProvider(), name, props, opts)
