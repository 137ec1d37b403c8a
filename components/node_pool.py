"""NodePool: gpupool's labels on the pool's named nodes, and the labels a selector-based node group needs.

Node labels are NodePatch resources (server-side apply of just these labels). They are retained on
delete: removing a pool from the spec must not strip `nvidia.com/mig.config` from live nodes, because
the GPU Operator would then reconfigure MIG to all-disabled and evict every GPU workload there.
Relabelling is always an explicit change of the spec, visible in `gpupool diff`.
"""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired
from gpupool.k8s.rollout import Drain

from .drain_step import NodeDrain
from .k8s_objects import Registry


class NodePool(pulumi.ComponentResource):
    TYPE = "gpupool:gpu:NodePool"

    def __init__(
        self,
        name: str,
        pool_name: str,
        patches: list[Desired],
        selector_labels: dict[str, str] | None,
        registry: Registry,
        opts: pulumi.ResourceOptions | None = None,
        drains: list[Drain] | None = None,
        connection: tuple[pulumi.Input[str] | None, pulumi.Input[str] | None] = (None, None),
    ):
        super().__init__(self.TYPE, name, None, opts)
        waiting = {d.name: d for d in drains or ()}
        for patch in patches:
            # A drain step (rollout step 1c) goes in just before the patch that waits for it, the node's relabel.
            for dep in patch.depends_on:
                if dep in waiting:
                    self._drain(waiting.pop(dep), registry, connection)
            registry.register(patch, self)
        self.nodes = [p.manifest["metadata"]["name"] for p in patches]
        self.required_node_labels = selector_labels or {}
        self.register_outputs({"pool": pool_name, "nodes": self.nodes, "requiredNodeLabels": self.required_node_labels})

    def _drain(self, step: Drain, registry: Registry, connection: tuple) -> None:
        opts = pulumi.ResourceOptions(parent=self, depends_on=[registry.resources[n] for n in step.depends_on])
        kubeconfig, context = connection
        registry.resources[step.name] = NodeDrain(registry.prefix + step.name, step, kubeconfig, context, opts)
