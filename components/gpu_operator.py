"""GpuOperator: the operator namespace and the GPU Operator Helm chart (helm.v4.Chart; see docs/design.md).

Two steps because the MIG and device-plugin ConfigMaps live in the operator namespace and the chart
must only be installed once they exist: construct (namespace), then `install` (chart).
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from gpupool.k8s.manifests import Chart, Desired

from .k8s_objects import Registry

CHART_TYPE = "kubernetes:helm.sh/v4:Chart"


class GpuOperator(pulumi.ComponentResource):
    TYPE = "gpupool:gpu:GpuOperator"

    def __init__(self, name: str, namespace: Desired, registry: Registry, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        self._registry = registry
        self.namespace_resource = registry.register(namespace, self)
        self.namespace = namespace.manifest["metadata"]["name"]

    def install(self, chart: Chart, skip_await: bool = False) -> k8s.helm.v4.Chart:
        release = k8s.helm.v4.Chart(
            self._registry.prefix + chart.name,
            name=chart.name,  # the Helm release name stays the chart's (it names the chart's objects)
            chart=chart.chart,
            version=chart.version,
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=chart.repository) if chart.repository else None,
            namespace=chart.namespace,
            values=chart.values,
            skip_await=True if skip_await else None,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=self._registry.depends(chart),
                aliases=self._registry.aliases(CHART_TYPE, chart.name, self),
            ),
        )
        self._registry.resources[chart.name] = release
        self.register_outputs({"namespace": self.namespace, "chart": chart.chart, "chartVersion": chart.version or ""})
        return release
