"""NodeDrain: the `<node>_drain` step of a MIG rollout (gpupool.k8s.rollout step 1c), registered by NodePool between
the node's mig-ready and mig patches. A Pulumi dynamic resource; what it does is gpupool.deploy.drain_provider."""

from __future__ import annotations

import pulumi
from pulumi.dynamic import Resource

from gpupool.deploy.drain_provider import DrainProvider
from gpupool.k8s.rollout import Drain


class NodeDrain(Resource, module="gpupool", name="NodeDrain"):  # pulumi-python:dynamic/gpupool:NodeDrain
    def __init__(
        self,
        name: str,
        step: Drain,
        kubeconfig: pulumi.Input[str] | None,
        context: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ):
        props = {
            "node": step.node,
            "config": step.config,
            "kubeconfig": kubeconfig or "",
            "context": context or "",
            "timeoutSeconds": step.timeout_seconds,
            "force": step.force,
            "deleteEmptyDirData": step.delete_empty_dir_data,
            "evicted": None,
        }
        # The kubeconfig may be its contents (credentials): kept as a secret in the state.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]))
        super().__init__(DrainProvider(), name, props, opts)
