"""gpupool's own Pulumi program: the stack's config -> one GpuPlatform (components/platform.py).

Validation happens before any resource is registered; an invalid spec stops the program with the same
FILE:LINE:COL lines as `gpupool validate`.
"""

from __future__ import annotations

import asyncio

import pulumi
import pulumi_kubernetes as k8s

from gpupool.model import platform as m
from gpupool.model import sharding
from gpupool.spec.stack import CONFIG_NAMESPACE

from .platform import GpuPlatform, GpuPlatformArgs, load_or_stop, with_chart_path
from .provider import kubernetes_provider

__all__ = ["PLATFORM_NAME", "deploy", "load_or_stop", "main", "provider", "with_chart_path"]


# The repository's program names its platform like this; its stacks predate GpuPlatform, so it aliases
# every resource to the 0.1 URNs (components/platform.py).
PLATFORM_NAME = "gpupool"


def provider(config: pulumi.Config, name: str = "k8s") -> k8s.Provider:
    """The stack's provider: its kubeconfig and context, plus the settings gpupool needs (.provider)."""
    return kubernetes_provider(name, kubeconfig=config.get("kubeconfig") or None, context=config.get("context") or None)


def deploy(
    spec: m.Spec,
    k8s_provider: pulumi.ProviderResource,
    *,
    skip_await: bool = False,
    role: sharding.Role = sharding.PLATFORM_ROLE,
    keep: set[str] | None = None,
) -> dict:
    """gpupool 0.1's entry point, kept for programs written against it: one GpuPlatform with 0.1's URNs
    (aliased); returns the stack outputs. K8S_PROVIDER must be made by kubernetes_provider()
    (components/provider.py); any other is refused before anything is registered. New programs use
    GpuPlatform directly."""
    shard = sharding.PLATFORM if role.platform else sharding.shard_role(role.shard or 0)
    args = GpuPlatformArgs(spec=spec, skip_await=skip_await, shard=shard, keep_tenants=keep, legacy_urns=True)
    return GpuPlatform(PLATFORM_NAME, args, pulumi.ResourceOptions(provider=k8s_provider)).outputs


async def _let_registrations_start() -> None:
    await asyncio.sleep(0)  # one pass of the event loop: every queued registration task starts its RPC


def wait_for_registrations_linearly() -> None:
    """Make the SDK's final wait cost O(1) per resource instead of O(resources).

    Once the program returns, the SDK (pulumi/runtime/stack.py ``wait_for_rpcs``, pulumi 3.272) first
    awaits the registration RPCs it has in flight, one by one. A synchronous program returns before the
    event loop has started any of the tasks it queued, so that list is still empty, and the SDK goes
    straight to its second loop: ``asyncio.wait(every pending Output, FIRST_COMPLETED)``, re-adding all
    still-pending ones after each wake-up. Every finished registration wakes it, so one run costs
    outputs x registrations: measured under the real engine at 100 tenants, 0 RPCs in flight and then
    284 waits over 462,720 pending outputs in all; the program's CPU grew from 12.0 s at 100 tenants to
    45.1 s at 300 (docs/explanation/scale.md). ``pulumi.run`` (the SDK's async entry point, awaited after the
    program and before that wait) yields once, so every registration has started (843 in flight) and
    the first loop awaits them: 7.4 s and 19.2 s.
    Under mocks the root stack outlives one run (tests call main() many times) and pulumi.run may only
    be registered once on it; the wait it shortens is not run there anyway, hence the RunError guard.
    """
    try:
        pulumi.run(_let_registrations_start)
    except pulumi.RunError:
        pass


def main() -> None:
    """gpupool's own program (__main__.py): one platform from the stack's config, with 0.1's URNs.
    The config is gpupool's namespace, as in every gpupool program and the CLI's `--stack` (gpupool/spec/stack.py),
    not the project's (`pulumi.Config()`), so a copy of this project under another name reads the same keys."""
    GpuPlatform(PLATFORM_NAME, GpuPlatformArgs.from_config(pulumi.Config(CONFIG_NAMESPACE), legacy_urns=True)).export()
    wait_for_registrations_linearly()
