"""NodePool: gpupool's labels on the pool's named nodes, and the labels a selector-based node group needs.

Node labels are NodePatch resources (server-side apply of just these labels). They are retained on
delete: removing a pool from the spec must not strip `nvidia.com/mig.config` from live nodes, because
the GPU Operator would then reconfigure MIG to all-disabled and evict every GPU workload there.
Relabelling is always an explicit change of the spec, visible in `gpupool diff`.
"""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired
from gpupool.k8s.rollout import Reconfigure, RekeyDrain

from .k8s_objects import Registry
from .mig_step import NodeMigStep
from .rekey_drain import NodeRekeyDrain


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
        mig_steps: list[Reconfigure] | None = None,
        rekey_drains: list[RekeyDrain] | None = None,
        connection: tuple[pulumi.Input[str] | None, pulumi.Input[str] | None] = (None, None),
    ):
        super().__init__(self.TYPE, name, None, opts)
        waiting: dict[str, Reconfigure | RekeyDrain] = {d.name: d for d in [*(mig_steps or ()), *(rekey_drains or ())]}
        for patch in patches:
            # A mig step (rollout step 2) goes in just before the patch that waits for it (uncordon, or the
            # pool's labels when the pool does not cordon).
            for dep in patch.depends_on:
                if dep in waiting:
                    self._mig_step(waiting.pop(dep), registry, connection)
            registry.register(patch, self)
        self.nodes = [p.manifest["metadata"]["name"] for p in patches]
        self.required_node_labels = selector_labels or {}
        self.register_outputs({"pool": pool_name, "nodes": self.nodes, "requiredNodeLabels": self.required_node_labels})

    def _mig_step(self, step: Reconfigure | RekeyDrain, registry: Registry, connection: tuple) -> None:
        opts = pulumi.ResourceOptions(parent=self, depends_on=[registry.resources[n] for n in step.depends_on])
        kubeconfig, context = connection
        kind = NodeMigStep if isinstance(step, Reconfigure) else NodeRekeyDrain
        registry.resources[step.name] = kind(registry.prefix + step.name, step, kubeconfig, context, opts)  # type: ignore[arg-type]
