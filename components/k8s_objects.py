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

from gpupool.k8s.manifests import Chart, Desired

_CLASSES: dict[tuple[str, str, bool], Callable] = {
    ("v1", "Namespace", False): k8s.core.v1.Namespace,
    ("v1", "ConfigMap", False): k8s.core.v1.ConfigMap,
    ("v1", "ResourceQuota", False): k8s.core.v1.ResourceQuota,
    ("v1", "LimitRange", False): k8s.core.v1.LimitRange,
    ("v1", "Node", True): k8s.core.v1.NodePatch,
    ("scheduling.k8s.io/v1", "PriorityClass", False): k8s.scheduling.v1.PriorityClass,
    ("rbac.authorization.k8s.io/v1", "ClusterRole", False): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "RoleBinding", False): k8s.rbac.v1.RoleBinding,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", False):
        k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", False):
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# Pulumi-only inputs added to patch objects: gpupool's node labels win over another field manager's
# (a node moving between pools must not conflict).
PATCH_ANNOTATIONS = {"pulumi.com/patchForce": "true"}
NO_WAIT = "jsonpath={.metadata.name}"  # holds as soon as the patch is applied


def pulumi_inputs(obj: Desired) -> dict[str, Any]:
    """The manifest as registered: the rendered object plus the Pulumi-only annotations."""
    if not obj.patch and not obj.wait_for and not obj.field_manager:
        return obj.manifest
    manifest = copy.deepcopy(obj.manifest)
    annotations = manifest["metadata"].setdefault("annotations", {})
    if obj.patch:
        annotations.update(PATCH_ANNOTATIONS)
    if obj.wait_for or (obj.patch and obj.kind == "Node"):
        # The provider awaits the annotation as found on the live object, so a node patch would wait for
        # whatever waitFor another patch of the same node left there: every node patch sets its own (the
        # MIG rollout's waits, gpupool.k8s.rollout, or one that holds at once).
        annotations["pulumi.com/waitFor"] = obj.wait_for or NO_WAIT
    if obj.field_manager:
        annotations["pulumi.com/patchFieldManager"] = obj.field_manager
    return manifest


class Registry:
    """Pulumi resources by gpupool name, so `Desired.depends_on` can be resolved across components."""

    def __init__(self) -> None:
        self.resources: dict[str, pulumi.Resource] = {}

    def depends(self, obj: Desired | Chart) -> list[pulumi.Resource]:
        return [self.resources[name] for name in obj.depends_on if name in self.resources]

    def register(self, obj: Desired, parent: pulumi.Resource) -> pulumi.Resource:
        cls = _CLASSES[(obj.manifest["apiVersion"], obj.manifest["kind"], obj.patch)]
        kwargs = {_snake(k): v for k, v in pulumi_inputs(obj).items() if k not in ("apiVersion", "kind")}
        timeouts = None
        if obj.timeout_seconds:
            t = f"{obj.timeout_seconds}s"
            timeouts = pulumi.CustomTimeouts(create=t, update=t)
        opts = pulumi.ResourceOptions(parent=parent, depends_on=self.depends(obj),
                                      retain_on_delete=obj.retain_on_delete or None, custom_timeouts=timeouts)
        resource = cls(obj.name, opts=opts, **kwargs)
        self.resources[obj.name] = resource
        return resource
