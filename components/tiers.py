"""PriorityTiers: one PriorityClass per tier."""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired

from .k8s_objects import Registry


class PriorityTiers(pulumi.ComponentResource):
    TYPE = "gpupool:tenancy:PriorityTiers"

    def __init__(
        self, name: str, classes: list[Desired], registry: Registry, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(self.TYPE, name, None, opts)
        for obj in classes:
            registry.register(obj, self)
        self.register_outputs({"priorityClasses": [o.manifest["metadata"]["name"] for o in classes]})
