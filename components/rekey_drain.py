"""NodeRekeyDrain: the drain before an MPS pool's re-key (gpupool.k8s.rollout.rekey_chain), registered by NodePool
between the node's re-key cordon and its pool patch. What it does is gpupool.deploy.rekey_drain_provider."""

from __future__ import annotations

import pulumi
from pulumi.dynamic import Resource

from gpupool.deploy.rekey_drain_provider import RekeyDrainProvider
from gpupool.k8s.rollout import RekeyDrain


class NodeRekeyDrain(Resource, module="gpupool", name="NodeRekeyDrain"):  # pulumi-python:dynamic/gpupool:...
    def __init__(
        self,
        name: str,
        step: RekeyDrain,
        kubeconfig: pulumi.Input[str] | None,
        context: pulumi.Input[str] | None,
        opts: pulumi.ResourceOptions,
    ):
        props = {
            "node": step.node,
            "key": step.key,
            "kubeconfig": kubeconfig or "",
            "context": context or "",
            "timeoutSeconds": step.timeout_seconds,
            "force": step.force,
            "deleteEmptyDirData": step.delete_empty_dir_data,
            "evicted": None,
        }
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]))
        super().__init__(RekeyDrainProvider(), name, props, opts)
