"""PriorityTiers: one PriorityClass per tier, each with the record of its priority that lets a change preview."""

from __future__ import annotations

import pulumi
from pulumi.dynamic import Resource

from gpupool.deploy.tier_priority_provider import TierPriorityProvider
from gpupool.k8s.manifests import ANNOTATION_TIER_PRIORITY, Desired

from .k8s_objects import Registry


class TierPriority(Resource, module="gpupool", name="TierPriority"):  # pulumi-python:dynamic/gpupool:TierPriority
    revision: pulumi.Output[str]

    def __init__(self, name: str, obj: Desired, opts: pulumi.ResourceOptions):
        manifest = obj.manifest
        props = {
            "tier": manifest["metadata"]["name"],
            "value": manifest["value"],
            "preemptionPolicy": manifest["preemptionPolicy"],
            "revision": None,
        }
        super().__init__(TierPriorityProvider(), name, props, opts)


class PriorityTiers(pulumi.ComponentResource):
    TYPE = "gpupool:tenancy:PriorityTiers"

    def __init__(
        self, name: str, classes: list[Desired], registry: Registry, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(self.TYPE, name, None, opts)
        for obj in classes:
            # The annotation the render writes, taken from the record's output (unknown in a preview that changes
            # the priority: gpupool.deploy.tier_priority_provider says why).
            record = TierPriority(f"{registry.prefix}{obj.name}_priority", obj, pulumi.ResourceOptions(parent=self))
            registry.register(obj, self, annotations={ANNOTATION_TIER_PRIORITY: record.revision})
        self.register_outputs({"priorityClasses": [o.manifest["metadata"]["name"] for o in classes]})
