"""Queueing: the platform's Kueue objects (ResourceFlavors, Cohorts, WorkloadPriorityClasses) and the queue
policy. Each tenant's ClusterQueue and LocalQueue belong to its Tenant component (they move with its shard)."""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired

from .k8s_objects import Registry


class Queueing(pulumi.ComponentResource):
    TYPE = "gpupool:queueing:Queueing"

    def __init__(
        self, name: str, objects: list[Desired], registry: Registry, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(self.TYPE, name, None, opts)
        for obj in objects:
            registry.register(obj, self)
        self.register_outputs(
            {
                "flavors": [o.manifest["metadata"]["name"] for o in objects if o.kind == "ResourceFlavor"],
                "cohorts": [o.manifest["metadata"]["name"] for o in objects if o.kind == "Cohort"],
            }
        )
