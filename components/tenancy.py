"""Tenant: namespace, quotas, defaults and the owners' RoleBinding (to Kubernetes' admin/edit/view roles).

A tenant's objects are retained on delete unless the tenant is marked offboarded: dropping a tenant
file from the spec must never delete its namespace, workloads and data (or lift its quota) as a side effect.
"""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired

from .k8s_objects import Registry


class Tenant(pulumi.ComponentResource):
    TYPE = "gpupool:tenancy:Tenant"

    def __init__(
        self,
        name: str,
        tenant: str,
        objects: list[Desired],
        registry: Registry,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(self.TYPE, name, None, opts)
        for obj in objects:
            registry.register(obj, self)
        namespace = next(o for o in objects if o.kind == "Namespace")
        quota = next(o for o in objects if o.name.endswith("-gpu-quota"))
        self.namespace = namespace.manifest["metadata"]["name"]
        self.gpu_quota = quota.manifest["spec"]["hard"]
        self.register_outputs(
            {"namespace": self.namespace, "gpuQuota": self.gpu_quota, "protected": namespace.retain_on_delete}
        )
