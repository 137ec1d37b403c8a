"""DeviceClasses: the classes of the pools with `allocation: dra` (gpupool.k8s.dra), one component for all."""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired

from .k8s_objects import Registry


class DeviceClasses(pulumi.ComponentResource):
    TYPE = "gpupool:gpu:DeviceClasses"

    def __init__(
        self, name: str, objects: list[Desired], registry: Registry, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(self.TYPE, name, None, opts)
        for obj in objects:
            registry.register(obj, self)
        self.register_outputs({"deviceClasses": [o.manifest["metadata"]["name"] for o in objects]})
