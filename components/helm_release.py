"""One Helm release of the platform (gpupool.k8s.helm_chart.Chart) as Pulumi's helm.v4.Chart, with the chart's
patches applied to what Helm renders by a Pulumi transform (which reaches the children of a packaged
component such as helm.v4.Chart: pulumi ResourceOptions.transforms)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpupool.k8s.helm_chart import Chart

from .k8s_objects import Registry

CHART_TYPE = "kubernetes:helm.sh/v4:Chart"


def patch_transform(chart: Chart):
    """The transform doing CHART's patches on the objects Helm rendered (the others pass unchanged)."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        props: dict[str, Any] = dict(args.props)
        for patch in chart.patches:
            if patch.matches(props):
                return pulumi.ResourceTransformResult(props=patch.apply(props), opts=args.opts)
        return None

    return transform


def install(chart: Chart, registry: Registry, parent: pulumi.Resource, skip_await: bool = False) -> k8s.helm.v4.Chart:
    release = k8s.helm.v4.Chart(
        registry.prefix + chart.name,
        name=chart.name,  # the Helm release name stays the chart's (it names the chart's objects)
        chart=chart.reference(),
        version=chart.version,
        repository_opts=(
            k8s.helm.v4.RepositoryOptsArgs(repo=chart.repository)
            if chart.repository and not chart.oci  # an OCI chart is named by its reference
            else None
        ),
        namespace=chart.namespace,
        values=chart.values,
        skip_await=True if skip_await else None,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=registry.depends(chart),
            aliases=registry.aliases(CHART_TYPE, chart.name, parent),
            transforms=[patch_transform(chart)] if chart.patches else None,
        ),
    )
    registry.resources[chart.name] = release
    return release
