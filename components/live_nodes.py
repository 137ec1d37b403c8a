"""The nodes the spec names exist before gpupool patches them (gpupool.k8s.named_nodes): never a phantom Node.

Read like the MIG configs in use (components/live_mig_configs.py): through the provider's kubeconfig and
context, before any Kubernetes object is registered. A named node the cluster lacks is a warning in a
preview and stops an update; so does a cluster that cannot be read, in an update (a NodePatch of a missing
node would create it, so an unchecked update is not run). A kubeconfig that is an Output (a cluster made in
the same program) cannot be read before registration: said in a warning, and the check is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi

from gpupool.k8s import named_nodes
from gpupool.model import platform as m

from .live_mig_configs import _under_mocks

Reader = Callable[[m.Spec, Any, Any], list[str]]  # named_nodes.read_missing_for: the missing node names


def check(spec: m.Spec, connection: tuple[Any, Any], read: Reader | None = None) -> list[str]:
    """Warn (preview) or stop (update) when a node the spec names is not in the cluster. Returns the missing
    names (a preview goes on with them). Nothing is read under mocks or for a spec naming no node."""
    pools = named_nodes.named(spec)
    if not pools or _under_mocks():
        return []
    kubeconfig, context = connection
    if not all(v is None or isinstance(v, str) for v in (kubeconfig, context)):
        pulumi.log.warn(
            "the Kubernetes provider's kubeconfig or context is an Output: gpupool cannot check before registering "
            "that the nodes the spec names exist (a missing one would be created by its label patch)"
        )
        return []
    preview = pulumi.runtime.is_dry_run()
    try:
        absent = (read or named_nodes.read_missing_for)(spec, kubeconfig, context)
    except named_nodes.LiveReadError as exc:
        if preview:
            pulumi.log.warn(f"{exc}; `up` stops unless it can read them")
            return []
        raise pulumi.RunError(f"{exc}; nothing was registered (a label patch of a missing node creates it)") from None
    if not absent:
        return []
    message = named_nodes.refusal(absent, pools)
    if preview:
        pulumi.log.warn(f"{message}; `up` will stop before registering anything")
        return absent
    raise pulumi.RunError(f"{message}; nothing was registered")
