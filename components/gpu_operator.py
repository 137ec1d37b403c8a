"""GpuOperator: the operator namespace and the GPU Operator Helm chart (helm.v4.Chart; see docs/explanation/design.md).

Two steps because the MIG and device-plugin ConfigMaps live in the operator namespace and the chart
must only be installed once they exist: construct (namespace), then `install` (chart).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpupool.k8s.manifests import Chart, Desired

from . import helm_release
from .k8s_objects import Registry


class GpuOperator(pulumi.ComponentResource):
    TYPE = "gpupool:gpu:GpuOperator"

    def __init__(self, name: str, namespace: Desired, registry: Registry, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        self._registry = registry
        self.namespace_resource = registry.register(namespace, self)
        self.namespace = namespace.manifest["metadata"]["name"]

    def install(self, chart: Chart, skip_await: bool = False) -> k8s.helm.v4.Chart:
        release = helm_release.install(chart, self._registry, self, skip_await)
        self.register_outputs({"namespace": self.namespace, "chart": chart.chart, "chartVersion": chart.version or ""})
        return release
