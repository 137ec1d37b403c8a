"""Monitoring: gpupool's PrometheusRule and the Grafana dashboard ConfigMap (gpupool.k8s.monitoring)."""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired

from .k8s_objects import Registry


class Monitoring(pulumi.ComponentResource):
    TYPE = "gpupool:monitoring:Monitoring"

    def __init__(
        self, name: str, objects: list[Desired], registry: Registry, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(self.TYPE, name, None, opts)
        for obj in objects:
            registry.register(obj, self)
        self.register_outputs({"objects": [f"{o.kind}/{o.manifest['metadata']['name']}" for o in objects]})
