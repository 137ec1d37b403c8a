"""A Helm release gpupool wants (Chart), as data: the Pulumi component installs it, render hands it to a GitOps tool."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gpupool.k8s.desired import Desired

OCI = "oci://"


def deep_merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass(frozen=True)
class Patch:
    """Removals from one object of a rendered chart (see Chart.patches)."""

    kind: str
    name: str
    remove: tuple[str, ...]  # JSON pointers, e.g. /spec/extendedResourceName

    def operations(self) -> list[dict[str, str]]:
        return [{"op": "remove", "path": path} for path in self.remove]

    def matches(self, obj: dict[str, Any]) -> bool:
        return obj.get("kind") == self.kind and (obj.get("metadata") or {}).get("name") == self.name

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """OBJ with the removals done (a missing field is left missing, unlike RFC 6902, which fails)."""
        out = copy.deepcopy(obj)
        for path in self.remove:
            *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]
            node: Any = out
            for part in parents:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(last, None)
        return out


@dataclass(frozen=True)
class Chart:
    """A Helm release gpupool wants: the GPU Operator's, and NVIDIA's DRA driver's where a pool uses DRA.

    Not a Kubernetes object: the Pulumi component installs it as a helm.v4.Chart, and `gpupool render`
    writes it as the delivery object the user picks (Flux HelmRelease, Argo CD Application, or a values
    file for `helm install -f`); all of them carry exactly these values."""

    name: str  # Pulumi name and Helm release name
    chart: str  # chart name in the repository, or a local chart path
    version: str | None  # None for a local chart
    repository: str | None  # None for a local chart
    namespace: str
    values: dict[str, Any]
    depends_on: tuple[str, ...] = ()
    component: str = "operator"  # the component whose objects it sits among (the diff's grouping)
    # JSON patches (RFC 6902, `remove` only) applied to objects of the rendered chart, each with the object's
    # kind and name: a Pulumi transform applies them (components/helm_release.py), a Flux HelmRelease's kustomize
    # post-renderer too (gpupool.k8s.delivery); forms without a post-renderer refuse such a chart.
    patches: tuple[Patch, ...] = ()

    @property
    def oci(self) -> bool:
        """Whether the chart comes from an OCI registry (every delivery form spells that differently)."""
        return bool(self.repository and self.repository.startswith(OCI))

    def reference(self) -> str:
        """What `helm install` and Pulumi's helm.v4.Chart take as the chart: an OCI repository's chart is named by
        its full reference (helm has no `--repo` for OCI), any other by its name in the repository."""
        if self.oci:
            assert self.repository
            return f"{self.repository.rstrip('/')}/{self.chart}"
        return self.chart

    def record(self) -> Desired:
        """The chart's inputs as a Desired-shaped record (kind Chart, as Pulumi's helm.sh/v4 type), so
        `gpupool diff` compares it like the objects. Never rendered, never registered as a manifest."""
        spec: dict[str, Any] = {"chart": self.chart}
        if self.version:
            spec["version"] = self.version
        if self.repository:
            spec["repositoryOpts"] = {"repo": self.repository}
        spec.update({"namespace": self.namespace, "values": self.values})
        return Desired(
            self.component,
            self.name,
            {
                "apiVersion": "helm.sh/v4",
                "kind": "Chart",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            },
            depends_on=self.depends_on,
        )
