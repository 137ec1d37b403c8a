"""The old MIG configs the cluster's nodes still carry, read when the program runs (gpupool.k8s.mig_in_use).

The read goes through the kubeconfig and context the Kubernetes provider was made with (gpupool.k8s.kubeclient,
as the drain step does), before anything is registered, so the preview shows the ConfigMap `pulumi up` writes.
An unreadable cluster is a warning in a preview (pulumi-kubernetes previews an unreachable cluster too) and an
error in an update: dropping a name a node still carries turns that node `failed` at its MIG Manager's next
start. The device-plugin ConfigMap's sharing keys are kept the same way (kept_plugin). `gpupool:keepMigConfigsInUse:
false` turns both reads off (the spec's configs only).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.runtime import mocks, settings

from gpupool.k8s import mig_in_use
from gpupool.model import platform as m

OPT_OUT = "set gpupool:keepMigConfigsInUse to false to write the spec's configs only"


def _under_mocks() -> bool:
    return isinstance(settings.get_monitor(), mocks.MockMonitor)


def _known(connection: tuple[Any, Any]) -> bool:
    """The provider's kubeconfig and context are plain values (an Output is not known before registration)."""
    return all(v is None or isinstance(v, str) for v in connection)


def _read(spec: m.Spec, connection: tuple[Any, Any], read: Callable[..., dict[str, Any]], what: str) -> dict[str, Any]:
    """One of the two reads (READ: a mig_in_use reader) with its failures as kept() documents: {} under mocks or
    when the provider's connection is an Output (kept() warns); a cluster it cannot read is a warning in a
    preview and an error in an update. WHAT names the ConfigMap's configs in the messages."""
    if _under_mocks() or not _known(connection):
        return {}
    kubeconfig, context = connection
    try:
        # gpupool stacks' convergence check: compare with what the run before it wrote (mig_in_use's docstring).
        as_written = bool(os.environ.get(mig_in_use.CONVERGENCE_ENV)) and pulumi.runtime.is_dry_run()
        out = read(spec, kubeconfig, context, as_written=as_written)
    except mig_in_use.LiveReadError as exc:
        if pulumi.runtime.is_dry_run():
            pulumi.log.warn(f"{exc}; this preview shows the spec's {what} configs only")
            return {}
        raise pulumi.RunError(f"{exc}; nothing was registered ({OPT_OUT})") from None
    return out


def kept(spec: m.Spec, connection: tuple[Any, Any]) -> dict[str, Any]:
    """Old configs to keep in the MIG ConfigMap (name -> mig-parted entries); {} under mocks."""
    if not _under_mocks() and not _known(connection):
        # An Output (a cluster made in the same program): its value is not known before registration.
        pulumi.log.warn(
            "the Kubernetes provider's kubeconfig or context is an Output: gpupool cannot read which MIG "
            "configs the nodes still carry, so the MIG ConfigMap holds the spec's configs only"
        )
    out = _read(spec, connection, mig_in_use.read_kept_for, "MIG")
    if out:
        pulumi.log.info(f"keeping MIG configs nodes still carry in the MIG ConfigMap: {', '.join(out)}")
    return out


def kept_plugin(spec: m.Spec, connection: tuple[Any, Any]) -> dict[str, str]:
    """Old sharing config keys to keep in the device-plugin ConfigMap (key -> its live text); {} under mocks.
    The same reads and failures as kept() (gpupool.k8s.mig_in_use, its device-plugin part)."""
    out = _read(spec, connection, mig_in_use.read_kept_plugin_for, "device-plugin")
    if out:
        pulumi.log.info(f"keeping device-plugin configs nodes still carry in their ConfigMap: {', '.join(out)}")
    return out
