"""The Pulumi program: spec file -> validated model -> desired objects -> components.

Validation happens before any resource is registered; an invalid spec stops the program with the same
FILE:LINE:COL lines as `gpupool validate`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os

import pulumi
import pulumi_kubernetes as k8s

from gpupool.analysis import plan as capacity_plan
from gpupool.k8s import manifests
from gpupool.model import platform as m
from gpupool.model import sharding
from gpupool.rules.engine import validate_file

from .gpu_config import DevicePluginConfig, MigConfig
from .gpu_operator import GpuOperator
from .k8s_objects import Registry
from .monitoring import Monitoring
from .node_pool import NodePool
from .provider import checked as checked_provider
from .provider import kubernetes_provider
from .tenancy import Tenant
from .tiers import PriorityTiers


def load_or_stop(spec_path: str) -> m.Spec:
    result = validate_file(spec_path)
    diagnostics = result.report.sorted()
    for d in diagnostics:
        (pulumi.log.error if d.is_error else pulumi.log.warn)(d.render())
    if result.spec is None:
        errors = sum(d.is_error for d in diagnostics)
        raise pulumi.RunError(
            f"{spec_path}: {errors} errors in the spec; nothing was registered "
            f"(run `gpupool validate {spec_path}` to see them)"
        )
    return result.spec


def with_chart_path(spec: m.Spec, chart_path: str | None) -> m.Spec:
    """A local chart instead of NVIDIA's repository (offline use and tests); the spec's pin stays the default."""
    if not chart_path:
        return spec
    operator = dataclasses.replace(spec.cluster.operator, chart_path=chart_path)
    return dataclasses.replace(spec, cluster=dataclasses.replace(spec.cluster, operator=operator))


def provider(config: pulumi.Config) -> k8s.Provider:
    """The stack's provider: its kubeconfig and context, plus the settings gpupool needs (.provider)."""
    return kubernetes_provider(
        "k8s", kubeconfig=config.get("kubeconfig") or None, context=config.get("context") or None
    )


def deploy(
    spec: m.Spec,
    k8s_provider: pulumi.ProviderResource,
    *,
    skip_await: bool = False,
    role: sharding.Role = sharding.PLATFORM_ROLE,
    keep: set[str] | None = None,
) -> dict:
    """Register the desired objects of ROLE's part under their components; returns the stack outputs.

    K8S_PROVIDER must be made by kubernetes_provider() (components/provider.py: the settings gpupool needs
    merged into the caller's); any other provider is refused before anything is registered.

    KEEP (the release pass of a shard move, ci/pulumi-stack.sh) narrows the stack's tenants to those it
    already holds, so that it deletes the tenants leaving it before another stack creates them."""
    k8s_provider = checked_provider(k8s_provider)
    plan = manifests.build(spec)
    parts = plan.by_component()
    registry = Registry()
    opts = pulumi.ResourceOptions(providers=[k8s_provider])
    tenants = held_tenants(spec, role, keep)
    if not role.platform:
        register_tenants(tenants, parts, registry, opts)
        return shard_outputs(spec, role, tenants)
    one = lambda comp, kind: next(o for o in parts[comp] if o.kind == kind)  # noqa: E731

    operator = GpuOperator("gpu-operator", one("operator", "Namespace"), registry, opts)
    MigConfig(
        "mig-config",
        one("mig-config", "ConfigMap"),
        {p: c["migConfig"] for p, c in plan.pool_configs.items() if c["migConfig"]},
        registry,
        opts,
    )
    DevicePluginConfig(
        "device-plugin-config",
        one("device-plugin-config", "ConfigMap"),
        {p: c["devicePluginConfig"] for p, c in plan.pool_configs.items()},
        registry,
        opts,
    )
    operator.install(plan.chart, skip_await=skip_await)
    for pool in spec.pools:
        NodePool(
            f"pool-{pool.name}",
            pool.name,
            parts.get(f"pool:{pool.name}", []),
            plan.node_group_labels.get(pool.name),
            registry,
            opts,
        )
    PriorityTiers("tiers", parts.get("tiers", []), registry, opts)
    if parts.get("monitoring"):
        Monitoring("monitoring", parts["monitoring"], registry, opts)
    register_tenants(tenants, parts, registry, opts)
    return stack_outputs(spec, plan, tenants)


def register_tenants(tenants: list[m.Tenant], parts: dict, registry: Registry, opts: pulumi.ResourceOptions) -> None:
    for tenant in tenants:
        Tenant(f"tenant-{tenant.name}", tenant.name, parts[f"tenant:{tenant.name}"], registry, opts)


def held_tenants(spec: m.Spec, role: sharding.Role, keep: set[str] | None) -> list[m.Tenant]:
    names = set(sharding.held_by(role, [t.name for t in spec.tenants], spec.tenant_shards))
    if keep is not None:
        names &= keep
    return [t for t in spec.tenants if t.name in names]


def tenant_outputs(spec: m.Spec, tenants: list[m.Tenant]) -> dict:
    return {
        t.name: {
            "namespace": t.namespace,
            "tier": t.tier,
            "gpus": dict(t.gpus),
            "costCenter": t.cost_center or "",
            "offboarded": t.offboarded,
            "maxPerPod": spec.max_per_pod(t),
        }
        for t in tenants
    }


def shard_outputs(spec: m.Spec, role: sharding.Role, tenants: list[m.Tenant]) -> dict:
    return {"shard": role.name, "tenantShards": spec.tenant_shards, "tenants": tenant_outputs(spec, tenants)}


def stack_outputs(spec: m.Spec, plan: manifests.Plan, tenants: list[m.Tenant]) -> dict:
    # Every figure from the capacity plan, the function `gpupool plan` prints: headroom is what the
    # oversubscription policy still allows, not capacity minus grants.
    resources = capacity_plan.compute(spec).resources
    return {
        "capacity": {r.resource: r.capacity for r in resources},
        "granted": {r.resource: r.granted for r in resources},
        "allowed": {r.resource: r.allowed for r in resources},
        "headroom": {r.resource: r.headroom for r in resources},
        "tenants": tenant_outputs(spec, tenants),
        "poolConfigs": plan.pool_configs,
        "nodeGroupLabels": plan.node_group_labels,
    }


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
    45.1 s at 300 (docs/scale.md). ``pulumi.run`` (the SDK's async entry point, awaited after the
    program and before that wait) yields once, so every registration has started (843 in flight) and
    the first loop awaits them: 7.4 s and 19.2 s.
    Under mocks the root stack outlives one run (tests call main() many times) and pulumi.run may only
    be registered once on it; the wait it shortens is not run there anyway, hence the RunError guard.
    """
    try:
        pulumi.run(_let_registrations_start)
    except pulumi.RunError:
        pass


def role_or_stop(config: pulumi.Config) -> sharding.Role:
    try:
        return sharding.parse_role(config.get("shard") or sharding.PLATFORM)
    except ValueError as exc:
        raise pulumi.RunError(f"{exc}; nothing was registered") from None


def keep_or_stop() -> set[str] | None:
    """GPUPOOL_KEEP_TENANTS: a JSON file with the tenant names a release pass keeps (ci/pulumi-stack.sh)."""
    path = os.environ.get("GPUPOOL_KEEP_TENANTS")
    if not path:
        return None
    try:
        names = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as exc:
        raise pulumi.RunError(f"GPUPOOL_KEEP_TENANTS={path}: {exc}; nothing was registered") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise pulumi.RunError(f"GPUPOOL_KEEP_TENANTS={path}: not a JSON list of tenant names")
    return set(names)


def main() -> None:
    config = pulumi.Config()
    role, keep = role_or_stop(config), keep_or_stop()
    spec = with_chart_path(load_or_stop(config.require("spec")), config.get("operatorChartPath") or None)
    outputs = deploy(spec, provider(config), skip_await=config.get_bool("skipAwait") or False, role=role, keep=keep)
    for key, value in outputs.items():
        pulumi.export(key, value)
    wait_for_registrations_linearly()
