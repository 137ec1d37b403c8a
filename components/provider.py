"""The Kubernetes provider gpupool registers through: gpupool's settings merged into the user's.

gpupool needs two provider settings that pulumi-kubernetes 4.34.2 leaves off by default:

* `enableConfigMapMutable`: a MIG or time-slicing edit updates the fixed-name ConfigMaps the GPU Operator
  reads in place, instead of a delete-before-replace that leaves them absent (pulumi-notes 3.3).
* `upsertExistingObjects`: since pulumi-kubernetes 4.29.0 (pull request #4278) a create with server-side
  apply is a client-side create that fails with AlreadyExists when the object exists
  (provider/pkg/await/await.go `Creation`: `if c.ServerSideApply && (c.UpsertExistingObjects ||
  kinds.IsPatchResource(...))`). gpupool must create objects that may exist: a team's namespace made by
  hand before onboarding, the namespaces and quotas `pulumi destroy` retains, the objects a killed run
  created before it could record them, a tenant's objects after a shard move. docs/explanation/create-semantics.md says
  why upsert is safe for gpupool (pulumi-kubernetes #2926).

Server-side apply must stay on: node labels are Patch resources, which need it, and without it the upsert
setting does nothing (the same line of `Creation`). A provider object does not expose its inputs, so a
provider gpupool did not make cannot be checked; `deploy` therefore takes only providers made here.
"""

from __future__ import annotations

import weakref
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Python keyword -> (value gpupool needs, the provider's config key, why).
REQUIRED: dict[str, tuple[bool, str, str]] = {
    "enable_config_map_mutable": (
        True,
        "enableConfigMapMutable",
        "MIG and device-plugin ConfigMaps must update in place, never be deleted and replaced",
    ),
    "upsert_existing_objects": (
        True,
        "upsertExistingObjects",
        "gpupool adopts objects that already exist (retained namespaces, a killed run's objects)",
    ),
    "enable_server_side_apply": (
        True,
        "enableServerSideApply",
        "node labels are Patch resources, which need server-side apply",
    ),
}
_made: weakref.WeakSet[pulumi.ProviderResource] = weakref.WeakSet()
# provider -> (kubeconfig, context) it was given: the MIG rollout's mig step (components/mig_step.py) talks
# to the same cluster outside the provider.
_connection: weakref.WeakKeyDictionary[pulumi.ProviderResource, tuple[Any, Any]] = weakref.WeakKeyDictionary()


class ProviderSettingsError(ValueError):
    """A provider setting gpupool needs was given another value, or a provider not made by gpupool."""


def settings(**user: Any) -> dict[str, Any]:
    """The user's provider arguments with gpupool's required settings merged in; a conflict is an error."""
    merged = dict(user)
    for key, (value, config_key, why) in REQUIRED.items():
        given = user.get(key)
        if given is None:
            # Always explicit: the provider reads its argument before the PULUMI_K8S_* variable of the
            # same setting (provider.go Configure), so a stray variable cannot switch it off.
            merged[key] = value
            continue
        if given is not value:
            raise ProviderSettingsError(
                f"kubernetes provider setting {config_key} must be {str(value).lower()} (a plain bool, not an "
                f"Output) for gpupool: {why}; drop the argument and gpupool sets it"
            )
    return merged


def kubernetes_provider(name: str = "k8s", **user: Any) -> k8s.Provider:
    """A k8s.Provider with the user's arguments (kubeconfig, context, opts, ...) plus what gpupool needs."""
    provider = k8s.Provider(name, **settings(**user))
    _made.add(provider)
    _connection[provider] = (user.get("kubeconfig"), user.get("context"))
    return provider


def connection(provider: pulumi.ProviderResource) -> tuple[Any, Any]:
    """The kubeconfig (a path or its contents, or None: the ambient one) and context PROVIDER was made with."""
    return _connection.get(provider, (None, None))


def checked(provider: pulumi.ProviderResource) -> pulumi.ProviderResource:
    """PROVIDER itself when made by kubernetes_provider(), else a clear error (its settings are unknowable)."""
    if provider in _made:
        return provider
    needed = ", ".join(f"{config_key}: {str(v).lower()}" for v, config_key, _ in REQUIRED.values())
    raise ProviderSettingsError(
        "gpupool's deploy() needs a kubernetes provider with "
        f"{needed}; a provider's settings cannot be read back, so make it with "
        "gpupool.pulumi.provider.kubernetes_provider(name, **your_settings), which merges them into yours"
    )
