"""What every builder of cluster objects hands on: one desired object (`Desired`) and the label that marks
what gpupool manages. Its own module so that the builders beside gpupool.k8s.manifests (the Kueue objects,
the monitoring objects) and the manifests themselves share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpupool"}
# The labels gpupool puts on what belongs to a pool, a tenant, a tier.
LABEL_POOL = "gpupool.dev/pool"
LABEL_TENANT = "gpupool.dev/tenant"
LABEL_TIER = "gpupool.dev/tier"
# Every object gpupool registers (not a patch: gpupool owns only fields of those) names its platform, the spec's
# cluster.name: `gpupool stacks up` lists what carries it and removes what no stack's desired set holds, which is
# how a run without per-step checkpoints stays crash-safe (gpupool.deploy.sweep).
LABEL_PLATFORM = "gpupool.dev/platform"
# On an object retained on delete: what Pulumi would leave in the cluster, the sweep leaves too. It lives on the
# object because a removed tenant's retention cannot be read from a spec that no longer holds the tenant.
ANNOTATION_RETAINED = "gpupool.dev/retain-on-delete"

# Component names, one spelling each: the group a desired object belongs to (Desired.component), which the
# Pulumi components register together and the stack inputs, the diff and the shard moves read back.
TENANT_COMPONENT = "tenant:"
POOL_COMPONENT = "pool:"
# A tenant's objects' Pulumi names start `tenant-<name>`, and so does its Tenant component's (after its platform's
# name: components/platform.py), which gpupool.analysis.shard_moves reads back out of a state.
TENANT_PREFIX = "tenant-"


def tenant_component(tenant: str) -> str:
    return f"{TENANT_COMPONENT}{tenant}"


def tenant_prefix(tenant: str) -> str:
    return f"{TENANT_PREFIX}{tenant}"


def pool_component(pool: str) -> str:
    return f"{POOL_COMPONENT}{pool}"


def stamped(obj: Desired, platform: str) -> Desired:
    """OBJ with its platform's label and, when retained on delete, the annotation that says so (a patch as it is)."""
    if obj.patch:
        return obj
    meta = dict(obj.manifest["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), LABEL_PLATFORM: platform}
    if obj.retain_on_delete:
        meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_RETAINED: "true"}
    return replace(obj, manifest={**obj.manifest, "metadata": meta})


@dataclass(frozen=True)
class Desired:
    """One object gpupool wants: its Pulumi name, its owning component and the manifest."""

    component: str  # e.g. "tenant:research", "pool:a100-mig", "operator"
    name: str  # Pulumi resource name; unique across the stack
    manifest: dict[str, Any]
    patch: bool = False  # a Patch resource: gpupool owns some fields of an object it did not create
    retain_on_delete: bool = False
    depends_on: tuple[str, ...] = ()  # Pulumi names this object must wait for
    timeout_seconds: int | None = None  # Pulumi customTimeouts (create/update) for its await
    wait_for: str | None = None  # Pulumi's pulumi.com/waitFor expression (added by the component layer)
    field_manager: str | None = None  # a shared server-side-apply field manager (pulumi.com/patchFieldManager)
    # Paths (Pulumi property paths) written when applied and then changed by others (MIG Manager's state
    # label): not diffed, so they are re-applied only with a change elsewhere in the object.
    ignore_changes: tuple[str, ...] = ()
    # Fields the API server refuses to change in place (immutable): a change to one replaces the object,
    # deleting it first (its name is fixed). Pulumi's replaceOnChanges + deleteBeforeReplace.
    replace_on_changes: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.manifest["kind"]
