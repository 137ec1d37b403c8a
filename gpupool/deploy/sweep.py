"""The label sweep: after `gpupool stacks up` has run every stack (or `destroy` has emptied them), remove the
objects gpupool labelled for this platform that no stack's desired set holds, naming each.

Why: tenant shard stacks run without per-step checkpoints (PULUMI_SKIP_CHECKPOINTS, gpupool.deploy.stacks), so
a killed run leaves its state as it was before the run, while the objects it created stay in the cluster. A
rerun adopts those the spec still wants (gpupool's provider upserts: components/provider.py); the others, a
tenant removed from the spec between the killed run and the rerun, no state holds. Among them its owners'
RoleBinding, which must not outlive the tenant. The sweep finds them by the platform label every registered
object carries (gpupool.k8s.desired.LABEL_PLATFORM) and deletes them as Pulumi would have:

- an object retained on delete (ANNOTATION_RETAINED) stays, as Pulumi leaves it (a removed tenant's namespace,
  quotas and defaults: gpupool.k8s.manifests.tenant_objects says why);
- a Namespace is never deleted here (no silent namespace deletion): it is named, with the command that would;
- an object no Pulumi field manager wrote (a tenant's own object with a copied label) is not gpupool's: named,
  left;
- each delete carries the object's uid as a precondition, so an object made again since the listing stays.

Only the kinds gpupool registers are listed (KINDS; tests/test_sweep.py checks every kind the builders make is
here); a kind the cluster does not serve (Kueue's, without Kueue) has nothing to sweep.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from gpupool.k8s.desired import ANNOTATION_RETAINED, LABEL_PLATFORM, Desired
from gpupool.model import platform as m

__all__ = ["KINDS", "LABEL_PLATFORM", "SweepError", "for_spec", "listed", "orphans", "sweep"]

Api = Callable[..., tuple[int, Any]]  # gpupool.k8s.kubeclient.Client: (method, path, body) -> (status, JSON)
PAGE = 500
# pulumi-kubernetes names its server-side apply field manager `pulumi-kubernetes-<random>` (provider.go
# fieldManagerName), or `pulumi-kubernetes` with client-side apply.
PULUMI_MANAGER = "pulumi-kubernetes"


class SweepError(Exception):
    """A kind could not be listed or an object not deleted: said in one line."""


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def _base(self) -> str:
        return f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"

    def list_path(self, selector: str, cont: str = "") -> str:
        query = {"labelSelector": selector, "limit": str(PAGE)}
        if cont:
            query["continue"] = cont
        return f"{self._base()}/{self.plural}?{urllib.parse.urlencode(query)}"

    def object_path(self, namespace: str, name: str) -> str:
        q = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
        where = f"/namespaces/{q(namespace)}" if self.namespaced else ""
        return f"{self._base()}{where}/{self.plural}/{q(name)}"


# Every kind gpupool registers as an object of its own (patches excluded: gpupool owns only fields of those).
KINDS: tuple[Kind, ...] = (
    Kind("v1", "Namespace", "namespaces", False),
    Kind("v1", "ConfigMap", "configmaps", True),
    Kind("v1", "ResourceQuota", "resourcequotas", True),
    Kind("v1", "LimitRange", "limitranges", True),
    Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True),
    Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
    Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False),
    Kind(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        False,
    ),
    Kind("resource.k8s.io/v1", "DeviceClass", "deviceclasses", False),
    Kind("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False),
    Kind("kueue.x-k8s.io/v1beta2", "Cohort", "cohorts", False),
    Kind("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", False),
    Kind("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True),
    Kind("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass", "workloadpriorityclasses", False),
    Kind("monitoring.coreos.com/v1", "PrometheusRule", "prometheusrules", True),
)
Key = tuple[str, str, str, str]  # (API group, kind, namespace, name): one object whatever version it is read in


@dataclass(frozen=True)
class Found:
    """A labelled object as listed."""

    kind: Kind
    namespace: str
    name: str
    uid: str
    retained: bool
    by_pulumi: bool

    @property
    def key(self) -> Key:
        return (self.kind.group, self.kind.kind, self.namespace, self.name)

    def __str__(self) -> str:
        from gpupool.spec.diagnostics import printable

        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.kind} {printable(where + self.name)}"


@dataclass
class Result:
    removed: list[Found]
    # (object, why it stays): what a person may want to look at; retained objects are only counted
    left: list[tuple[Found, str]]
    retained: int = 0

    def note(self, shown: int = 10) -> str:
        parts = []
        if self.removed:
            names = ", ".join(str(f) for f in self.removed[:shown])
            more = f" and {len(self.removed) - shown} more" if len(self.removed) > shown else ""
            parts.append(f"removed what no stack holds: {names}{more}")
        for found, why in self.left[:shown]:
            parts.append(f"left {found}: {why}")
        if self.retained:
            parts.append(f"{self.retained} retained on delete, left as Pulumi leaves them")
        return "; ".join(parts) or "nothing labelled that no stack holds"


def key_of(obj: Desired) -> Key:
    meta = obj.manifest["metadata"]
    group = obj.manifest["apiVersion"].rpartition("/")[0]
    return (group, obj.kind, meta.get("namespace", ""), meta["name"])


def desired_keys(objects: Iterable[Desired]) -> set[Key]:
    """What the platform's stacks hold between them: every object the spec builds (the shards split them)."""
    return {key_of(o) for o in objects if not o.patch}


def _found(kind: Kind, item: dict) -> Found | None:
    meta = item.get("metadata") or {}
    if meta.get("deletionTimestamp") or not isinstance(meta.get("name"), str):
        return None
    managers = [str(m.get("manager", "")) for m in meta.get("managedFields") or [] if isinstance(m, dict)]
    return Found(
        kind,
        str(meta.get("namespace") or ""),
        meta["name"],
        str(meta.get("uid", "")),
        (meta.get("annotations") or {}).get(ANNOTATION_RETAINED) == "true",
        any(m.startswith(PULUMI_MANAGER) for m in managers),
    )


def orphans(found: Iterable[Found], desired: set[Key]) -> Result:
    """What of FOUND (objects labelled for the platform) goes, what stays and why."""
    result = Result([], [])
    for f in sorted(found, key=lambda f: f.key):
        if f.key in desired:
            continue
        if f.retained:
            result.retained += 1
        elif f.kind.kind == "Namespace":
            result.left.append((f, f"a namespace is never deleted by the sweep (`kubectl delete namespace {f.name}`)"))
        elif not f.by_pulumi:
            result.left.append((f, "no Pulumi field manager wrote it, so it is not gpupool's"))
        else:
            result.removed.append(f)
    return result


def listed(api: Api, platform: str) -> list[Found]:
    """Every object of KINDS labelled for PLATFORM (a kind the cluster does not serve has none)."""
    selector = f"{LABEL_PLATFORM}={platform}"
    out: list[Found] = []
    for kind in KINDS:
        cont = ""
        while True:
            status, body = api("GET", kind.list_path(selector, cont))
            if status == 404:  # the API is not served (a CRD not installed): nothing of the kind exists
                break
            if status != 200:
                raise SweepError(f"listing {kind.plural} labelled {selector} answered HTTP {status}")
            out += [f for f in (_found(kind, i) for i in body.get("items") or []) if f is not None]
            cont = (body.get("metadata") or {}).get("continue") or ""
            if not cont:
                break
    return out


def remove(api: Api, found: Found) -> bool:
    """Delete FOUND if it is still the object listed; False when it is gone or was made again since."""
    body = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Background",
        "preconditions": {"uid": found.uid},
    }
    status, _ = api("DELETE", found.kind.object_path(found.namespace, found.name), body)
    if status in (200, 202):
        return True
    if status in (404, 409):
        return False
    raise SweepError(f"deleting {found} answered HTTP {status}")


def sweep(api: Api, platform: str, objects: Iterable[Desired]) -> Result:
    """List, decide, delete: the Result names what was removed and what was left."""
    result = orphans(listed(api, platform), desired_keys(objects))
    result.removed = [f for f in result.removed if remove(api, f)]
    return result


def for_spec(spec: m.Spec, kubeconfig: str | None, context: str | None, wanted: bool = True) -> Result:
    """sweep() of SPEC's platform through a kubeconfig (a path or its contents; None: the ambient one), the
    spec's objects WANTED (after a destroy none are); every failure a SweepError in one line that names no
    credential."""
    from gpupool.k8s import kubeclient, manifests

    try:
        api = kubeclient.Client(kubeconfig, context, timeout=30)
        return sweep(api, spec.cluster.name, manifests.build(spec).objects if wanted else [])
    except (kubeclient.KubeAPIError, kubeclient.KubeconfigError) as exc:
        raise SweepError(str(exc)) from None
