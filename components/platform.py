"""GpuPlatform: the whole gpupool platform as one component a team composes into its own Pulumi program.

    from pulumi import ResourceOptions
    from gpupool.pulumi import GpuPlatform, GpuPlatformArgs, kubernetes_provider

    cluster = kubernetes_provider("cluster", kubeconfig=..., context=...)   # gpupool's settings merged in
    gpu = GpuPlatform("gpu", GpuPlatformArgs(spec="gpu/spec.yaml"), opts=ResourceOptions(provider=cluster))
    pulumi.export("headroom", gpu.headroom)

Every child's Pulumi name starts with NAME (`gpu-gpu-operator`, `gpu-tenant-research-gpu-quota`), so two
platforms (two clusters) live in one program without URN collisions. The Kubernetes provider is the user's
(`opts.provider`, or a kubernetes entry of `opts.providers`). It must carry the settings gpupool relies on,
so make it with `gpupool.pulumi.provider.kubernetes_provider(name, **your_settings)`, which merges them into
yours (components/provider.py); any other provider stops the program before anything is registered,
instead of turning a MIG edit into a ConfigMap replace later. Without one, the platform makes its own
(`NAME-k8s`).

`legacy_urns=True` is for stacks created by gpupool 0.1's program, which registered the components at
the stack's root with unprefixed names and its provider as `k8s`: every resource then carries an alias to
its 0.1 URN, so the first preview after the upgrade renames in the state and replaces nothing. Two
platforms in one program cannot both claim the 0.1 URNs; only the repository's own program sets it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pulumi

from gpupool.analysis import plan as capacity_plan
from gpupool.k8s import dra, kueue, manifests
from gpupool.k8s.desired import pool_component, tenant_component, tenant_prefix
from gpupool.k8s.manifests import Desired
from gpupool.model import platform as m
from gpupool.model import sharding
from gpupool.spec.stack import CONFIG_KEY, CONFIG_NAMESPACE  # the key the CLI's `--stack` reads too

from . import live_mig_configs, live_nodes
from .dra import DeviceClasses
from .gpu_config import DevicePluginConfig, MigConfig
from .gpu_operator import GpuOperator
from .k8s_objects import Registry, legacy_urn
from .monitoring import Monitoring
from .node_pool import NodePool
from .provider import ProviderSettingsError, checked, connection, kubernetes_provider
from .queueing import Queueing
from .tenancy import Tenant
from .tiers import PriorityTiers

TYPE = "gpupool:index:GpuPlatform"
LEGACY_PROVIDER_NAME = "k8s"  # gpupool 0.1's provider, at the stack's root


@dataclasses.dataclass
class GpuPlatformArgs:
    """What one platform is made of.

    spec: the spec file (validated here; errors stop the program with FILE:LINE:COL lines, nothing
        registered) or an already validated `gpupool.model.platform.Spec`.
    operator_chart_path: a local GPU Operator chart instead of the spec's pinned repository chart.
    skip_await: do not wait for the operator chart's workloads to become ready.
    shard: the part this stack holds in a sharded platform: "" (the platform stack) or "tenants-<k>".
    keep_tenants: the release pass of a tenant move registers only these of its tenants (gpupool stacks).
    legacy_urns: alias every resource to gpupool 0.1's URNs (see the module docstring).
    kubeconfig, context: for the provider gpupool creates when opts gives none.
    keep_mig_configs_in_use: read the cluster's nodes before registering and keep in the MIG ConfigMap the old
        configs they still carry (components/live_mig_configs.py); False writes the spec's configs only.
    """

    spec: str | Path | m.Spec
    operator_chart_path: str | None = None
    skip_await: bool = False
    shard: str = sharding.PLATFORM
    keep_tenants: set[str] | None = None
    legacy_urns: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    keep_mig_configs_in_use: bool = True

    @classmethod
    def from_config(cls, config: pulumi.Config | None = None, *, legacy_urns: bool = False) -> GpuPlatformArgs:
        """The arguments a gpupool project's stack config gives (Pulumi.yaml's `gpupool:` keys), plus the
        tenants a release pass keeps (`gpupool stacks` sets them): what `gpupool init`'s program and this
        repository's own pass, so `gpupool stacks` can drive either."""
        from gpupool.analysis import shard_moves

        config = config or pulumi.Config(CONFIG_NAMESPACE)
        try:
            keep = shard_moves.parse_keep(config.get(shard_moves.KEEP_SETTING))
        except ValueError as exc:
            raise pulumi.RunError(f"{exc}; nothing was registered") from None
        return cls(
            spec=config.require(CONFIG_KEY),
            operator_chart_path=config.get("operatorChartPath") or None,
            skip_await=config.get_bool("skipAwait") or False,
            shard=config.get("shard") or sharding.PLATFORM,
            keep_tenants=keep,
            legacy_urns=legacy_urns,
            kubeconfig=config.get("kubeconfig") or None,
            context=config.get("context") or None,
            keep_mig_configs_in_use=config.get_bool("keepMigConfigsInUse") is not False,
        )


def load_or_stop(spec_path: str | Path) -> m.Spec:
    """Validate the spec file; on errors, log them as `gpupool validate` prints them and stop the program. Under
    `gpupool stacks`, the model that command validated (gpupool.deploy.validated_spec), while its inputs hold."""
    from gpupool.deploy import validated_spec
    from gpupool.rules.engine import validate_file

    taken = validated_spec.take(Path(spec_path))
    if taken is not None:
        spec, warnings = taken
        for warning in warnings:
            pulumi.log.warn(warning)
        return spec

    result = validate_file(str(spec_path))
    diagnostics = result.report.sorted()
    for d in diagnostics:
        (pulumi.log.error if d.is_error else pulumi.log.warn)(d.render())
    if result.spec is None:
        from gpupool.present.text import plural

        errors = sum(d.is_error for d in diagnostics)
        raise pulumi.RunError(
            f"{spec_path}: {plural(errors, 'error')} in the spec; nothing was registered "
            f"(run `gpupool validate {spec_path}` to see them)"
        )
    return result.spec


def with_chart_path(spec: m.Spec, chart_path: str | None) -> m.Spec:
    """A local chart instead of NVIDIA's repository (offline use and tests); the spec's pin stays the default."""
    if not chart_path:
        return spec
    operator = dataclasses.replace(spec.cluster.operator, chart_path=chart_path)
    return dataclasses.replace(spec, cluster=dataclasses.replace(spec.cluster, operator=operator))


def parse_shard(value: str) -> sharding.Role:
    try:
        return sharding.parse_role(value)
    except ValueError as exc:
        raise pulumi.RunError(f"{exc}; nothing was registered") from None


def callers_provider(opts: pulumi.ResourceOptions | None) -> pulumi.ProviderResource | None:
    """The kubernetes provider the caller passed: opts.provider, or the kubernetes one of opts.providers."""
    if opts is None:
        return None
    if opts.provider is not None and getattr(opts.provider, "package", None) == "kubernetes":
        return opts.provider
    providers = opts.providers
    if isinstance(providers, dict):
        found = providers.get("kubernetes")
        return found if isinstance(found, pulumi.ProviderResource) else None
    for p in providers or []:
        if isinstance(p, pulumi.ProviderResource) and p.package == "kubernetes":
            return p
    return None


def check_provider(provider: pulumi.ProviderResource, platform: str) -> None:
    """Refuse a provider gpupool did not make (components/provider.py: its settings cannot be read back)."""
    try:
        checked(provider)
    except ProviderSettingsError as exc:
        raise ProviderSettingsError(f"GpuPlatform {platform}: {exc}; nothing was registered") from None


class GpuPlatform(pulumi.ComponentResource):
    """The GPU Operator, the MIG and device-plugin configs, the node pools, the tiers and the tenants of one spec."""

    capacity: pulumi.Output[dict[str, float]]
    granted: pulumi.Output[dict[str, float]]
    allowed: pulumi.Output[dict[str, float]]
    headroom: pulumi.Output[dict[str, float]]
    tenants: pulumi.Output[dict[str, dict]]
    pool_configs: pulumi.Output[dict[str, dict[str, str]]]
    node_group_labels: pulumi.Output[dict[str, dict[str, str]]]

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        legacy = args.legacy_urns
        # Validated before anything is registered: an invalid spec leaves the stack as it was.
        role = parse_shard(args.shard)
        spec = args.spec if isinstance(args.spec, m.Spec) else load_or_stop(args.spec)
        spec = with_chart_path(spec, args.operator_chart_path)
        user_provider = callers_provider(opts)
        if user_provider is not None:
            check_provider(user_provider, name)
        super().__init__(TYPE, name, None, opts)
        self.spec = spec
        self.role = role

        provider = user_provider
        if provider is None:
            provider = kubernetes_provider(
                f"{name}-k8s",
                kubeconfig=args.kubeconfig or None,
                context=args.context or None,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    aliases=[legacy_urn("pulumi:providers:kubernetes", LEGACY_PROVIDER_NAME)] if legacy else None,
                ),
            )
        self.provider = provider

        if role.platform:  # a NodePatch of a node the cluster lacks would create it: read first (live_nodes)
            live_nodes.check(spec, connection(provider))
        in_use = args.keep_mig_configs_in_use and role.platform
        plan = manifests.build(
            spec,
            live_mig_configs.kept(spec, connection(provider)) if in_use else None,
            live_mig_configs.kept_plugin(spec, connection(provider)) if in_use else None,
        )
        parts = plan.by_component()
        registry = Registry(prefix=f"{name}-", legacy=legacy)
        child = pulumi.ResourceOptions(parent=self, providers=[provider])
        held = _held_tenants(spec, role, args.keep_tenants)

        def opts_for(component_name: str, component_type: str) -> pulumi.ResourceOptions:
            alias = [legacy_urn(component_type, component_name)] if legacy else None
            return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(aliases=alias))

        self.operator: GpuOperator | None = None
        self.node_pools: dict[str, NodePool] = {}
        if role.platform:
            self._platform(name, plan, parts, registry, opts_for, args.skip_await)
        self.tenant_components: dict[str, Tenant] = {}
        for tenant in held:
            self.tenant_components[tenant.name] = Tenant(
                f"{name}-{tenant_prefix(tenant.name)}",
                tenant.name,
                parts[tenant_component(tenant.name)],
                registry,
                opts_for(tenant_prefix(tenant.name), Tenant.TYPE),
            )

        outputs = platform_outputs(spec, plan, role, held)
        self.outputs = outputs  # plain values: what the program exports
        for key, attr in OUTPUT_ATTRS.items():
            setattr(self, attr, pulumi.Output.from_input(outputs.get(key, {})))
        self.register_outputs(outputs)

    def _platform(
        self,
        name: str,
        plan: manifests.DesiredObjects,
        parts: dict[str, list[Desired]],
        registry: Registry,
        opts_for: Callable[[str, str], pulumi.ResourceOptions],
        skip_await: bool,
    ) -> None:
        """The platform stack's components: the operator and its configs, the pools, tiers, DRA, monitoring, queues."""
        spec = self.spec
        one = lambda comp, kind: next(o for o in parts[comp] if o.kind == kind)  # noqa: E731
        self.operator = GpuOperator(
            f"{name}-gpu-operator",
            one("operator", "Namespace"),
            registry,
            opts_for("gpu-operator", GpuOperator.TYPE),
        )
        MigConfig(
            f"{name}-mig-config",
            one("mig-config", "ConfigMap"),
            {p: c.mig for p, c in plan.pool_configs.items() if c.mig},
            registry,
            opts_for("mig-config", MigConfig.TYPE),
        )
        DevicePluginConfig(
            f"{name}-device-plugin-config",
            one("device-plugin-config", "ConfigMap"),
            {p: c.device_plugin for p, c in plan.pool_configs.items()},
            registry,
            opts_for("device-plugin-config", DevicePluginConfig.TYPE),
        )
        self.operator.install(plan.chart, skip_await=skip_await)
        for pool in spec.pools:
            self.node_pools[pool.name] = NodePool(
                f"{name}-pool-{pool.name}",
                pool.name,
                parts.get(pool_component(pool.name), []),
                plan.node_group_labels.get(pool.name),
                registry,
                opts_for(f"pool-{pool.name}", NodePool.TYPE),
                mig_steps=plan.mig_steps.get(pool.name),
                rekey_drains=plan.rekey_drains.get(pool.name),
                connection=connection(self.provider),
            )
        PriorityTiers(f"{name}-tiers", parts.get("tiers", []), registry, opts_for("tiers", PriorityTiers.TYPE))
        if parts.get(dra.COMPONENT) or plan.dra_chart:
            DeviceClasses(
                f"{name}-dra",
                parts.get(dra.COMPONENT, []),
                registry,
                opts_for("dra", DeviceClasses.TYPE),
                driver=plan.dra_chart,
                skip_await=skip_await,
            )
        if parts.get("monitoring"):
            Monitoring(f"{name}-monitoring", parts["monitoring"], registry, opts_for("monitoring", Monitoring.TYPE))
        if parts.get(kueue.COMPONENT):
            Queueing(f"{name}-queueing", parts[kueue.COMPONENT], registry, opts_for("queueing", Queueing.TYPE))

    def export(self) -> None:
        """Export the platform's outputs as the stack's outputs (what gpupool's own program does)."""
        for key, value in self.outputs.items():
            pulumi.export(key, value)


OUTPUT_ATTRS = {
    "capacity": "capacity",
    "granted": "granted",
    "allowed": "allowed",
    "headroom": "headroom",
    "tenants": "tenants",
    "poolConfigs": "pool_configs",
    "nodeGroupLabels": "node_group_labels",
}


def _held_tenants(spec: m.Spec, role: sharding.Role, keep: set[str] | None) -> list[m.Tenant]:
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


def platform_outputs(
    spec: m.Spec, plan: manifests.DesiredObjects, role: sharding.Role, tenants: list[m.Tenant]
) -> dict:
    """The stack outputs: a shard stack's are its role and tenants; the platform stack's every figure of the
    capacity plan, the function `gpupool plan` prints (headroom is what the oversubscription policy still
    allows, not capacity minus grants). A sharded platform stack leaves out `granted` and `headroom`: they sum
    every tenant's grants, so one onboarding would run the platform stack too (its inputs fingerprint covers
    its outputs); its shards' `tenants` outputs hold the grants and `gpupool plan` prints both figures."""
    if not role.platform:
        return {"shard": role.name, "tenantShards": spec.tenant_shards, "tenants": tenant_outputs(spec, tenants)}
    resources = capacity_plan.resource_lines(spec)
    outputs = {
        "capacity": {r.resource: r.capacity for r in resources},
        "granted": {r.resource: r.granted for r in resources},
        "allowed": {r.resource: r.allowed for r in resources},
        "headroom": {r.resource: r.headroom for r in resources},
        "tenants": tenant_outputs(spec, tenants),
        "poolConfigs": {p: c.output() for p, c in plan.pool_configs.items()},
        "nodeGroupLabels": plan.node_group_labels,
    }
    if spec.tenant_shards:
        del outputs["granted"], outputs["headroom"]
    return outputs
