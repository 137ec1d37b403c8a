"""How `gpupool render` hands the charts (the GPU Operator's, and the DRA driver's) to a GitOps tool: pure data.

`--operator helmrelease` writes a Flux HelmRepository and HelmRelease, `--operator argocd` an Argo CD
Application, `--operator values` only the values file for `helm install -f`. Every form carries exactly the
values the Pulumi component passes to its helm.v4.Chart (helm_chart.Chart.values), and a chart's patches
(Chart.patches) become the HelmRelease's kustomize post-renderer; an Application or a values file has no
post-renderer, so a chart with patches is refused in those forms.
"""

from __future__ import annotations

import json

from gpupool.k8s.desired import MANAGED_BY, Desired
from gpupool.k8s.helm_chart import OCI, Chart

MODES = ("helmrelease", "argocd", "values")
DEFAULT_MODE = "helmrelease"
# Flux GA APIs (Flux v2.3+); checked against the CRDs in tests/e2e/test_render_apply.py.
FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"
FLUX_HELM_API = "helm.toolkit.fluxcd.io/v2"
ARGO_API = "argoproj.io/v1alpha1"
# Argo CD reads Applications from its own namespace unless "applications in any namespace" is enabled.
ARGO_NAMESPACE = "argocd"
VALUES_FILE = "helm/gpu-operator-values.yaml"  # a subdirectory: `kubectl apply -f DIR` does not read it


def values_file(chart: Chart) -> str:
    """helm/<release>-values.yaml: VALUES_FILE for the GPU Operator's release (named gpu-operator)."""
    return f"helm/{chart.name}-values.yaml"


class DeliveryError(ValueError):
    """The chart cannot be expressed in the chosen form (a local chart path has no repository to point at)."""


def _repository_name(chart: Chart) -> str:
    return f"{chart.name}-charts"


def objects(chart: Chart, mode: str) -> list[Desired]:
    """The Kubernetes objects that install the chart in MODE (none for `values`)."""
    if chart.patches and mode != "helmrelease":
        targets = ", ".join(f"{p.kind} {p.name}" for p in chart.patches)
        raise DeliveryError(
            f"the {chart.name} chart's rendered {targets} must be changed after Helm renders it (docs/explanation/dra.md, "
            f'"Driver installation"), and {"an Argo CD Application" if mode == "argocd" else "a values file"} '
            "has no post-renderer: use --operator helmrelease (a Flux post-renderer), deploy with Pulumi, or set "
            "cluster.draDriver.install: false and install the driver with a post-renderer of your own"
        )
    if mode == "values":
        return []
    if not chart.repository:
        raise DeliveryError(
            f"the {chart.name} chart is the local path {chart.chart!r}; a Flux HelmRelease or an "
            "Argo CD Application can only point at a chart repository (use --operator values "
            "and `helm install -f`)"
        )
    if mode == "helmrelease":
        return _flux(chart)
    if mode == "argocd":
        return _argo(chart)
    raise ValueError(f"unknown operator mode {mode!r} (one of {', '.join(MODES)})")


def _flux(chart: Chart) -> list[Desired]:
    """A Flux HelmRepository and HelmRelease (with the chart's patches as its post-renderer)."""
    assert chart.repository
    labels = dict(MANAGED_BY)
    repo = Desired(
        chart.component,
        f"{chart.name}-helmrepository",
        {
            "apiVersion": FLUX_SOURCE_API,
            "kind": "HelmRepository",
            "metadata": {"name": _repository_name(chart), "namespace": chart.namespace, "labels": labels},
            # An OCI registry is a HelmRepository of type oci (Flux source-controller v1 HelmRepositorySpec.Type).
            "spec": {"url": chart.repository, "interval": "1h", **({"type": "oci"} if chart.oci else {})},
        },
        depends_on=chart.depends_on,
    )
    release = Desired(
        chart.component,
        f"{chart.name}-helmrelease",
        {
            "apiVersion": FLUX_HELM_API,
            "kind": "HelmRelease",
            "metadata": {"name": chart.name, "namespace": chart.namespace, "labels": dict(labels)},
            "spec": {
                "interval": "10m",
                "releaseName": chart.name,
                "targetNamespace": chart.namespace,
                "chart": {
                    "spec": {
                        "chart": chart.chart,
                        "version": chart.version,
                        "sourceRef": {"kind": "HelmRepository", "name": _repository_name(chart)},
                    }
                },
                "values": chart.values,
                **({"postRenderers": [_post_renderer(chart)]} if chart.patches else {}),
            },
        },
        depends_on=chart.depends_on + (repo.name,),
    )
    return [repo, release]


def _argo(chart: Chart) -> list[Desired]:
    """An Argo CD Application of the chart."""
    assert chart.repository
    labels = dict(MANAGED_BY)
    return [
        Desired(
            chart.component,
            f"{chart.name}-application",
            {
                "apiVersion": ARGO_API,
                "kind": "Application",
                "metadata": {"name": chart.name, "namespace": ARGO_NAMESPACE, "labels": labels},
                "spec": {
                    "project": "default",
                    "source": {
                        # Argo CD names an OCI Helm registry without the scheme (its helm source's repoURL).
                        "repoURL": chart.repository.removeprefix(OCI) if chart.oci else chart.repository,
                        "chart": chart.chart,
                        "targetRevision": chart.version,
                        "helm": {"releaseName": chart.name, "valuesObject": chart.values},
                    },
                    "destination": {"server": "https://kubernetes.default.svc", "namespace": chart.namespace},
                },
            },
            depends_on=chart.depends_on,
        )
    ]


def _post_renderer(chart: Chart) -> dict:
    """Flux HelmRelease v2 spec.postRenderers[].kustomize.patches: each patch a JSON 6902 list for its target."""
    return {
        "kustomize": {
            "patches": [
                {"target": {"kind": p.kind, "name": p.name}, "patch": json.dumps(p.operations())} for p in chart.patches
            ]
        }
    }


def helm_install_hint(chart: Chart, values_path: str) -> str:
    """The command a user runs with `--operator values`."""
    if chart.oci:
        return (
            f"helm install {chart.name} {chart.reference()} --version {chart.version} "
            f"--namespace {chart.namespace} -f {values_path}"
        )
    if chart.repository:
        return (
            f"helm install {chart.name} {chart.chart} --repo {chart.repository} --version {chart.version} "
            f"--namespace {chart.namespace} -f {values_path}"
        )
    return f"helm install {chart.name} {chart.chart} --namespace {chart.namespace} -f {values_path}"
