"""Register one desired object (gpupool.k8s.manifests.Desired) as the matching pulumi_kubernetes resource.

The manifest is passed through as it is: top-level fields become keyword arguments and nested dicts keep
their Kubernetes (camelCase) keys, so what the engine receives is what `gpupool render` writes. The only
addition is Pulumi's own (`pulumi_only`): the provider reads `pulumi.com/patchForce` from a Patch
resource's annotations (it is Pulumi's force-conflicts; with kubectl that is `--force-conflicts`), so it
belongs here and never in the rendered YAML; so does `pulumi.com/waitFor` (the MIG rollout's waits).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes._utilities import get_version as k8s_version

from gpupool.k8s import rollout
from gpupool.k8s.manifests import Chart, Desired

_CLASSES: dict[tuple[str, str, bool], Callable] = {
    ("v1", "Namespace", False): k8s.core.v1.Namespace,
    ("v1", "ConfigMap", False): k8s.core.v1.ConfigMap,
    ("v1", "ResourceQuota", False): k8s.core.v1.ResourceQuota,
    ("v1", "LimitRange", False): k8s.core.v1.LimitRange,
    ("v1", "Node", True): k8s.core.v1.NodePatch,
    ("scheduling.k8s.io/v1", "PriorityClass", False): k8s.scheduling.v1.PriorityClass,
    ("resource.k8s.io/v1", "DeviceClass", False): k8s.resource.v1.DeviceClass,
    ("rbac.authorization.k8s.io/v1", "ClusterRole", False): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "RoleBinding", False): k8s.rbac.v1.RoleBinding,
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        False,
    ): k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        False,
    ): k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
}


# Objects of CRDs gpupool creates (the CRDs come from elsewhere: the Prometheus Operator).
_CUSTOM = {("monitoring.coreos.com/v1", "PrometheusRule", False)}


class _CrdObject(pulumi.CustomResource):
    """An object of a CRD kind (Kueue's) with its top-level fields as they are: pulumi_kubernetes'
    apiextensions.CustomResource takes only `spec`, and a WorkloadPriorityClass has `value` at the top. The
    provider serves any `kubernetes:<group>/<version>:<Kind>` type token as a custom resource."""

    def __init__(self, name: str, api_version: str, kind: str, opts: pulumi.ResourceOptions, **fields: Any):
        props = {"apiVersion": api_version, "kind": kind, **fields}
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_version()))
        super().__init__(f"kubernetes:{api_version}:{kind}", name, props, opts)


def _custom_resource(api_version: str, kind: str) -> Callable:
    def make(name: str, opts: pulumi.ResourceOptions, **fields: Any) -> pulumi.Resource:
        return _CrdObject(name, api_version, kind, opts, **fields)

    return make


def _resource_class(api_version: str, kind: str, patch: bool) -> Callable:
    if api_version.startswith("kueue.x-k8s.io/") and not patch:
        return _custom_resource(api_version, kind)
    return _CLASSES[(api_version, kind, patch)]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# Pulumi-only inputs added to patch objects: gpupool's node labels win over another field manager's
# (a node moving between pools must not conflict).
PATCH_ANNOTATIONS = {"pulumi.com/patchForce": "true"}


def pulumi_only_annotations(obj: Desired) -> dict[str, str]:
    """What the provider reads and the rendered YAML does not carry: patchForce on patches, the shared field
    manager, and every node patch's skipAwait (gpupool.k8s.rollout.NODE_PATCH_AWAIT: its outputs are the API
    server's answer to its own apply)."""
    out: dict[str, str] = dict(PATCH_ANNOTATIONS) if obj.patch else {}
    if obj.patch and obj.kind == "Node":
        out.update(rollout.NODE_PATCH_AWAIT)
    elif obj.wait_for:
        out["pulumi.com/waitFor"] = obj.wait_for
    if obj.field_manager:
        out["pulumi.com/patchFieldManager"] = obj.field_manager
    return out


def pulumi_inputs(obj: Desired) -> dict[str, Any]:
    """The manifest as registered: the rendered object plus the Pulumi-only annotations."""
    extra = pulumi_only_annotations(obj)
    if not extra:
        return obj.manifest
    manifest = copy.deepcopy(obj.manifest)
    manifest["metadata"].setdefault("annotations", {}).update(extra)
    return manifest


def type_token(obj: Desired) -> str:
    """The Pulumi type of OBJ's resource: kubernetes:<group or core>/<version>:<Kind>[Patch]."""
    group, _, version = obj.manifest["apiVersion"].rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{obj.manifest['kind']}{'Patch' if obj.patch else ''}"


def legacy_urn(type_: str, name: str, parent_type: str | None = None) -> str:
    """The URN gpupool 0.1 gave a resource: components at the stack's root, objects directly under them."""
    chain = f"{parent_type}${type_}" if parent_type else type_
    return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{chain}::{name}"


class Registry:
    """Pulumi resources by gpupool name, so `Desired.depends_on` can be resolved across components.

    PREFIX starts every Pulumi name (the GpuPlatform's name); LEGACY adds an alias to gpupool 0.1's URN
    of each object (unprefixed, under a root-level component), so an upgraded stack replaces nothing."""

    def __init__(self, prefix: str = "", legacy: bool = False) -> None:
        self.resources: dict[str, pulumi.Resource] = {}
        self.prefix = prefix
        self.legacy = legacy

    def aliases(self, type_: str, name: str, parent: pulumi.Resource) -> list | None:
        return [legacy_urn(type_, name, getattr(parent, "TYPE", None))] if self.legacy else None

    def depends(self, obj: Desired | Chart) -> list[pulumi.Resource]:
        return [self.resources[name] for name in obj.depends_on if name in self.resources]

    def register(
        self, obj: Desired, parent: pulumi.Resource, annotations: dict[str, pulumi.Input[str]] | None = None
    ) -> pulumi.Resource:
        """ANNOTATIONS: values (outputs of other resources) in place of the rendered ones under those keys."""
        key = (obj.manifest["apiVersion"], obj.manifest["kind"], obj.patch)
        if key in _CUSTOM:  # a CRD's object: apiVersion and kind are inputs of CustomResource
            cls: Callable = k8s.apiextensions.CustomResource
            kwargs = {_snake(k): v for k, v in pulumi_inputs(obj).items()}
        else:
            cls = _resource_class(*key)
            kwargs = {_snake(k): v for k, v in pulumi_inputs(obj).items() if k not in ("apiVersion", "kind")}
        if annotations:  # shallow copies: the manifest stays as rendered
            meta = kwargs["metadata"]
            kwargs["metadata"] = {**meta, "annotations": {**meta.get("annotations", {}), **annotations}}
        timeouts = None
        if obj.timeout_seconds:
            t = f"{obj.timeout_seconds}s"
            timeouts = pulumi.CustomTimeouts(create=t, update=t)
        opts = pulumi.ResourceOptions(
            parent=parent,
            depends_on=self.depends(obj),
            retain_on_delete=obj.retain_on_delete or None,
            custom_timeouts=timeouts,
            ignore_changes=list(obj.ignore_changes) or None,
            aliases=self.aliases(type_token(obj), obj.name, parent),
            replace_on_changes=list(obj.replace_on_changes) or None,
            delete_before_replace=bool(obj.replace_on_changes) or None,
        )
        resource = cls(self.prefix + obj.name, opts=opts, **kwargs)
        self.resources[obj.name] = resource
        return resource
