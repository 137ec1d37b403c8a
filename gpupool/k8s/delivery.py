"""How `gpupool render` hands the GPU Operator chart to a GitOps tool: pure data, no Pulumi.

`--operator helmrelease` writes a Flux HelmRepository and HelmRelease, `--operator argocd` an Argo CD
Application, `--operator values` only the values file for `helm install -f`. Every form carries exactly the
values the Pulumi component passes to its helm.v4.Chart (manifests.Chart.values).
"""

from __future__ import annotations

from gpupool.k8s.manifests import MANAGED_BY, Chart, Desired

MODES = ("helmrelease", "argocd", "values")
DEFAULT_MODE = "helmrelease"
# Flux GA APIs (Flux v2.3+); checked against the CRDs in tests/e2e/test_render_apply.py.
FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"
FLUX_HELM_API = "helm.toolkit.fluxcd.io/v2"
ARGO_API = "argoproj.io/v1alpha1"
# Argo CD reads Applications from its own namespace unless "applications in any namespace" is enabled.
ARGO_NAMESPACE = "argocd"
VALUES_FILE = "helm/gpu-operator-values.yaml"  # a subdirectory: `kubectl apply -f DIR` does not read it


class DeliveryError(ValueError):
    """The chart cannot be expressed in the chosen form (a local chart path has no repository to point at)."""


def _repository_name(chart: Chart) -> str:
    return f"{chart.name}-charts"


def objects(chart: Chart, mode: str) -> list[Desired]:
    """The Kubernetes objects that install the chart in MODE (none for `values`)."""
    if mode == "values":
        return []
    if not chart.repository:
        raise DeliveryError(
            f"the operator chart is the local path {chart.chart!r}; a Flux HelmRelease or an "
            "Argo CD Application can only point at a chart repository (use --operator values "
            "and `helm install -f`)"
        )
    labels = dict(MANAGED_BY)
    if mode == "helmrelease":
        repo = Desired(
            "operator",
            f"{chart.name}-helmrepository",
            {
                "apiVersion": FLUX_SOURCE_API,
                "kind": "HelmRepository",
                "metadata": {"name": _repository_name(chart), "namespace": chart.namespace, "labels": labels},
                "spec": {"url": chart.repository, "interval": "1h"},
            },
            depends_on=chart.depends_on,
        )
        release = Desired(
            "operator",
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
                },
            },
            depends_on=chart.depends_on + (repo.name,),
        )
        return [repo, release]
    if mode == "argocd":
        return [
            Desired(
                "operator",
                f"{chart.name}-application",
                {
                    "apiVersion": ARGO_API,
                    "kind": "Application",
                    "metadata": {"name": chart.name, "namespace": ARGO_NAMESPACE, "labels": labels},
                    "spec": {
                        "project": "default",
                        "source": {
                            "repoURL": chart.repository,
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
    raise ValueError(f"unknown operator mode {mode!r} (one of {', '.join(MODES)})")


def helm_install_hint(chart: Chart, values_path: str) -> str:
    """The command a user runs with `--operator values`."""
    if chart.repository:
        return (
            f"helm install {chart.name} {chart.chart} --repo {chart.repository} --version {chart.version} "
            f"--namespace {chart.namespace} -f {values_path}"
        )
    return f"helm install {chart.name} {chart.chart} --namespace {chart.namespace} -f {values_path}"
