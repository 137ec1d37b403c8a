"""From the validated model to the desired Kubernetes objects: pure data, no Pulumi.

`gpupool render` writes exactly these objects, and the Pulumi components register exactly these objects
(a test proves it through the Pulumi mocks). Each object carries the Pulumi resource name and the
component that owns it, so URNs are stable and derived in one place.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpupool.k8s import admission, dra, dra_install, dra_policy, kueue, monitoring, priority_guard, rollout
from gpupool.k8s.desired import LABEL_POOL as LABEL_POOL  # re-exported, like the two other labels
from gpupool.k8s.desired import LABEL_TENANT as LABEL_TENANT
from gpupool.k8s.desired import LABEL_TIER as LABEL_TIER
from gpupool.k8s.desired import MANAGED_BY as MANAGED_BY  # re-exported: every builder's label
from gpupool.k8s.desired import Desired as Desired  # re-exported: the objects' type, for the components
from gpupool.k8s.desired import pool_component, stamped, tenant_component, tenant_prefix
from gpupool.k8s.gpu_configs import (  # re-exported: the configs' builders, for the diff and the components
    EXCLUSIVE_KEY as EXCLUSIVE_KEY,
)
from gpupool.k8s.gpu_configs import (
    MIG_DISABLED as MIG_DISABLED,
)
from gpupool.k8s.gpu_configs import (
    device_plugin_config as device_plugin_config,
)
from gpupool.k8s.gpu_configs import (
    device_plugin_configs as device_plugin_configs,
)
from gpupool.k8s.gpu_configs import (
    gpu_ranges as gpu_ranges,
)
from gpupool.k8s.gpu_configs import (
    mig_config as mig_config,
)
from gpupool.k8s.gpu_configs import (
    mig_config_name as mig_config_name,
)
from gpupool.k8s.gpu_configs import (
    mig_configs as mig_configs,
)
from gpupool.k8s.gpu_configs import (
    mps_config_key as mps_config_key,
)
from gpupool.k8s.gpu_configs import (
    with_operator_presets as with_operator_presets,
)
from gpupool.k8s.helm_chart import Chart as Chart  # re-exported: the releases' type, for the components
from gpupool.k8s.helm_chart import deep_merge as deep_merge
from gpupool.k8s.naming import bounded, content_hash
from gpupool.k8s.yaml_dump import dump_yaml as dump_yaml  # re-exported: every writer of gpupool's YAML
from gpupool.model import platform as m
from gpupool.model.owners import Subject, parse_owner

LABEL_COST_CENTER = "gpupool.dev/cost-center"
LABEL_MIG_CONFIG = rollout.LABEL_MIG_CONFIG  # one definition, the rollout's
LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"
MIG_CONFIGMAP = "gpupool-mig-config"
# On the MIG ConfigMap: the old configs it keeps because nodes still carry them (gpupool.k8s.mig_in_use).
ANNOTATION_KEPT = "gpupool.dev/kept-mig-configs"
# On the device-plugin ConfigMap: the old sharing config keys it keeps because nodes still carry them.
ANNOTATION_KEPT_PLUGIN = "gpupool.dev/kept-device-plugin-configs"
PLUGIN_CONFIGMAP = "gpupool-device-plugin-config"
# The GPU Operator restarts an operand when its env changes: gpupool sets a hash of the config it reads,
# so editing a ConfigMap rolls the device plugin / GFD / MIG Manager (they do not watch ConfigMaps).
HASH_ENV_PLUGIN = "GPUPOOL_DEVICE_PLUGIN_CONFIG_HASH"
HASH_ENV_MIG = "GPUPOOL_MIG_CONFIG_HASH"
ALWAYS_QUOTED = (m.GPU,)  # resource names every tenant quota lists, advertised or not
PRIORITY_IMMUTABLE = ("value", "preemptionPolicy")  # a PriorityClass's fields the API server never updates
# On each tier's PriorityClass: its value and preemption policy. In Pulumi it comes from a record resource whose
# output is unknown in a preview that changes them, so the replacement previews (gpupool.deploy.tier_priority_provider).
ANNOTATION_TIER_PRIORITY = "gpupool.dev/tier-priority"


def priority_revision(value: int, preemption_policy: str) -> str:
    return f"{value} {preemption_policy}"


@dataclass(frozen=True)
class PoolConfig:
    """The two configs a pool's nodes are labelled with: MIG Manager's (empty where it configures nothing: GPUs
    without MIG) and the device plugin's sharing key."""

    mig: str
    device_plugin: str

    def output(self) -> dict[str, str]:
        """As the stack outputs (`poolConfigs`) and the components' outputs spell it."""
        return {"migConfig": self.mig, "devicePluginConfig": self.device_plugin}


@dataclass
class DesiredObjects:
    """Everything one stack wants, in registration order: what `build` makes from a spec. (Not a plan: "plan" is
    the capacity plan, gpupool.analysis.plan, and terraform's and pulumi's word for a change set.)"""

    chart: Chart  # the GPU Operator release (see Chart)
    dra_chart: Chart | None = None  # NVIDIA's DRA driver release, where a pool uses DRA (gpupool.k8s.dra_install)
    objects: list[Desired] = field(default_factory=list)
    # pool name -> labels a selector-based node group must carry (gpupool cannot patch nodes it cannot name)
    node_group_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    pool_configs: dict[str, PoolConfig] = field(default_factory=dict)
    # The two ConfigMaps' contents as data (what their YAML is dumped from): for the diff, which reads them
    # without parsing the rendered text back.
    mig_configs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # config name -> mig-parted entries
    plugin_configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # ConfigMap key -> device-plugin config
    queues: kueue.QueueObjects | None = None  # the Kueue objects and the queue model they come from (with `queueing:`)
    # pool name -> the mig steps of its MIG rollout (gpupool.k8s.rollout step 2): registered by the NodePool
    # component, never rendered (no object of the cluster holds them; a rendered node carries its final label).
    mig_steps: dict[str, list[rollout.Reconfigure]] = field(default_factory=dict)
    # pool name -> the drains before an MPS pool's re-key (rollout.rekey_chain), registered like the mig steps.
    rekey_drains: dict[str, list[rollout.RekeyDrain]] = field(default_factory=dict)

    def charts(self) -> list[Chart]:
        """The releases, in registration order."""
        return [self.chart] + ([self.dra_chart] if self.dra_chart else [])

    def by_component(self) -> dict[str, list[Desired]]:
        out: dict[str, list[Desired]] = {}
        for obj in self.objects:
            out.setdefault(obj.component, []).append(obj)
        return out


def node_patch_name(pool: m.NodePool, node: str) -> str:
    """`pool-<pool>.<node>`: pool names are DNS labels (no "."), so the first "." separates the two and no
    other pool/node pair spells the same name (pool-a-b + c and pool-a + b-c did collide)."""
    return bounded(f"pool-{pool.name}.{node}")


# -- GPU Operator -------------------------------------------------------------------------------


def _operand_env(base: list[dict[str, Any]], extra: dict[str, str]) -> list[dict[str, Any]]:
    """base with extra's variables set (replacing same-named entries, appended otherwise)."""
    out = [dict(e) for e in base if not (isinstance(e, dict) and e.get("name") in extra)]
    return out + [{"name": k, "value": v} for k, v in extra.items()]


def operator_values(spec: m.Spec, mig_hash: str, plugin_hash: str) -> dict[str, Any]:
    op = spec.cluster.operator
    user = copy.deepcopy(dict(op.values))
    # Only gpupool's own variables (plus whatever the spec's values list). The operator merges these into
    # its DaemonSet templates per variable name, and the v26.7.0 chart's env lists are empty, so nothing
    # else belongs here: a copied default (DEVICE_LIST_STRATEGY=envvar) would override what the operator
    # sets (cdi-annotations,cdi-cri with CDI on). Facts and sources: gpupool/gpu/gpu-operator.yaml.
    ours = {
        "devicePlugin": {HASH_ENV_PLUGIN: plugin_hash},
        "gfd": {HASH_ENV_PLUGIN: plugin_hash},  # GFD reads the same config (sharing labels)
        "migManager": {HASH_ENV_MIG: mig_hash, **({"WITH_REBOOT": "true"} if op.mig_reboot else {})},
    }
    env = {}
    for operand, extra in ours.items():
        section = found if isinstance(found := user.get(operand), dict) else {}
        base = section.pop("env", None)
        env[operand] = _operand_env(base if isinstance(base, list) else [], extra)
    values = {
        "mig": {"strategy": spec.cluster.mig_strategy},
        "driver": {"enabled": op.driver},
        "toolkit": {"enabled": op.toolkit},
        "dcgmExporter": {"enabled": op.dcgm_exporter},
        "migManager": {"config": {"name": MIG_CONFIGMAP, "default": MIG_DISABLED}, "env": env["migManager"]},
        "devicePlugin": {"config": {"name": PLUGIN_CONFIGMAP, "default": EXCLUSIVE_KEY}, "env": env["devicePlugin"]},
        "gfd": {"env": env["gfd"]},
    }
    dcgm = monitoring.dcgm_exporter_values(spec)  # empty unless monitoring is enabled
    if dcgm:
        section = found if isinstance(found := user.get("dcgmExporter"), dict) else {}
        base = section.pop("env", None)
        if "env" in dcgm:
            dcgm["env"] = _operand_env(
                base if isinstance(base, list) else [], {e["name"]: e["value"] for e in dcgm["env"]}
            )
        elif isinstance(base, list):
            dcgm["env"] = base
        values["dcgmExporter"] = {"enabled": op.dcgm_exporter, **dcgm}
    return deep_merge(values, user)


def operator_chart(spec: m.Spec, values: dict[str, Any], depends_on: tuple[str, ...] = ()) -> Chart:
    op = spec.cluster.operator
    if op.chart_path:
        return Chart("gpu-operator", op.chart_path, None, None, op.namespace, values, depends_on)
    return Chart("gpu-operator", "gpu-operator", op.chart_version, op.repository, op.namespace, values, depends_on)


# -- Tenants ------------------------------------------------------------------------------------


def quota_resources(spec: m.Spec) -> list[str]:
    return sorted(set(spec.advertised_resources()) | set(ALWAYS_QUOTED))


def after_hardware(spec: m.Spec) -> tuple[str, ...]:
    """Every named node's pool patch: the last step of its rollout (a MIG re-layout's relabel and uncordon, an MPS
    re-key's, a plain label change). What Kueue is told a pool offers waits for these (tenant_objects)."""
    return tuple(node_patch_name(pool, node) for pool in spec.pools for node in pool.nodes)


@dataclass(frozen=True)
class _TenantScope:
    """What every object of one tenant shares: its component, name prefix, namespace and labels."""

    comp: str
    base: str
    ns: str
    labels: dict[str, str]

    @property
    def after_ns(self) -> tuple[str, ...]:
        return (f"{self.base}-ns",)

    def meta(self, name: str) -> dict[str, Any]:
        return {"name": name, "namespace": self.ns, "labels": dict(self.labels)}


def tenant_objects(
    spec: m.Spec,
    tenant: m.Tenant,
    quoted: list[str],
    kq: kueue.QueueObjects | None = None,
    hardware: tuple[str, ...] = (),
) -> list[Desired]:
    """HARDWARE: the node patches a tenant's Kueue quotas wait for (after_hardware). A re-layout relabels nodes wave
    by wave within the `up`; had the ClusterQueue changed first, Kueue would admit work for profiles no node offers
    yet, and the old profile's workloads, above their reduced quota, would become borrowers lenders reclaim. So the
    ClusterQueue and the ResourceQuota sized to it change once every node carries the new layout, and keep the old
    profile's quota until then (a failed or interrupted rollout leaves them as they were: the rerun finishes the
    nodes first). In a sharded platform the tenant stacks run after the platform stack's rollout (gpupool stacks)."""
    labels = {**MANAGED_BY, LABEL_TENANT: tenant.name, LABEL_TIER: tenant.tier}
    if tenant.cost_center:
        labels[LABEL_COST_CENTER] = tenant.cost_center
    s = _TenantScope(tenant_component(tenant.name), tenant_prefix(tenant.name), tenant.namespace, labels)
    ns_labels = {**tenant.labels, **labels, "pod-security.kubernetes.io/enforce": "baseline"}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": s.ns, "labels": ns_labels}}
    # Offboarded tenants keep their namespace until removed from the spec, but may start no GPU work.
    grants = {} if tenant.offboarded else tenant.gpus
    if kq is not None:
        # Under Kueue the quota is the hard ceiling for what bypasses it, sized to the most Kueue can admit
        # for the tenant (nominal + borrowing): Kueue does not read ResourceQuotas (gpupool.model.queues).
        grants = kq.admitted.get(tenant.name, {})
    after_quota = s.after_ns + hardware if kq is not None else s.after_ns
    out = [Desired(s.comp, f"{s.base}-ns", namespace)]
    out += _quotas(spec, tenant, s, quoted, grants, after_quota)
    out += _priority_guards(spec, tenant, s)
    out.append(_limit_range(tenant, s))
    out += _owners(tenant, s)
    if kq is not None and tenant.name in kq.by_tenant:
        out += [
            Desired(s.comp, f"{s.base}-{obj['kind'].lower()}", obj, depends_on=after_quota)
            for obj in kq.by_tenant[tenant.name]
        ]
    # Dropping a tenant from the spec leaves everything of it in place, quotas included (an unmanaged
    # namespace without its quota could take every GPU). Only an offboarded tenant may be deleted.
    # The owners' binding is the exception: retained, a replaced binding (ownerRole admin -> view) would keep
    # granting the old role. Without it a removed tenant's namespace, quotas and workloads all stay.
    # The priority-guard quota is the other: it leaves the spec when the tenant's tier becomes the top one,
    # and retained it would go on refusing the tier the tenant now has (the guard policy, retained, still
    # bounds a removed tenant's priority).
    keep = not tenant.offboarded
    return (
        [
            dataclasses.replace(
                obj, retain_on_delete=keep and obj.kind != "RoleBinding" and obj.name != f"{s.base}-priority-guard"
            )
            for obj in out
        ]
        + max_per_pod_objects(spec, tenant)
        + dra_guard_objects(spec, tenant, grants)
    )


def _quotas(
    spec: m.Spec,
    tenant: m.Tenant,
    s: _TenantScope,
    quoted: list[str],
    grants: Mapping[str, int],
    after_quota: tuple[str, ...],
) -> list[Desired]:
    """The GPU quota (every quoted name, and the DRA forms of the same grants) and the compute quota."""
    hard = {f"requests.{name}": str(grants.get(name, 0)) for name in quoted}
    hard.update(dra.quota_hard(spec, dict(grants)))  # the DRA forms of the same grants (none without DRA pools)
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": s.meta("gpu-quota"), "spec": {"hard": hard}}
    out = [Desired(s.comp, f"{s.base}-gpu-quota", quota, depends_on=after_quota)]
    if tenant.compute:
        hard = {f"requests.{k}": str(v) for k, v in sorted(tenant.compute.items())}
        compute = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": s.meta("compute-quota"),
            "spec": {"hard": hard},
        }
        out.append(Desired(s.comp, f"{s.base}-compute-quota", compute, depends_on=s.after_ns))
    return out


def _priority_guards(spec: m.Spec, tenant: m.Tenant, s: _TenantScope) -> list[Desired]:
    out = []
    tier = spec.tier(tenant.tier)
    higher = sorted(t.name for t in spec.tiers if tier and t.priority > tier.priority)
    if higher:
        # gpupool's higher tiers by name, beside the guard policy below (which refuses them too): it holds
        # where ValidatingAdmissionPolicy admission is off, and upgraded clusters already have it (retained).
        scope = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": higher}]}
        quota = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": s.meta("priority-guard"),
            "spec": {"hard": {"pods": "0"}, "scopeSelector": scope},
        }
        out.append(Desired(s.comp, f"{s.base}-priority-guard", quota, depends_on=s.after_ns))
    if tier:
        # Every class above the tier, gpupool's or not, refused on the pod's resolved priority (see the module).
        policy = f"{s.base}-priority-guard-policy"
        out.append(Desired(s.comp, policy, priority_guard.policy(tenant, tier, s.labels)))
        binding = priority_guard.binding(tenant, s.labels)
        out.append(Desired(s.comp, f"{s.base}-priority-guard-binding", binding, depends_on=(policy,)))
    return out


def _limit_range(tenant: m.Tenant, s: _TenantScope) -> Desired:
    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": s.meta("container-defaults"),
        # cpu/memory only: a GPU key here would be injected into every container (gpu-sharing.md 5.4).
        "spec": {"limits": [container_defaults(tenant.container_defaults)]},
    }
    return Desired(s.comp, f"{s.base}-container-defaults", limit_range, depends_on=s.after_ns)


def _owners(tenant: m.Tenant, s: _TenantScope) -> list[Desired]:
    if not tenant.owners:
        return []
    # Kubernetes' aggregated roles (admin/edit/view) cover what CRDs aggregate into them too; none of
    # them may change ResourceQuotas or LimitRanges (tests/e2e proves it against the API server).
    subjects = [x.rbac() for x in (parse_owner(o) for o in tenant.owners) if isinstance(x, Subject)]
    binding = {
        # roleRef is immutable: the name carries the role, so an ownerRole change creates the new binding
        # before it deletes the old one (same name: the create would conflict with the live object).
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": s.meta(f"tenant-owners-{tenant.owner_role}"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": tenant.owner_role},
        "subjects": subjects,
    }
    return [Desired(s.comp, f"{s.base}-owners", binding, depends_on=s.after_ns)]


def container_defaults(d: m.ContainerDefaults) -> dict[str, Any]:
    """The LimitRange item: default requests always, a default limit only for what the spec names.

    LimitRanger gives a container every `default` it lacks as a limit, and the API server then refuses a
    request above its limit, so an injected limit breaks any container that asks for more without a limit
    of its own (a 16Gi request under a 1Gi default is refused) and OOM-kills one that sets nothing at that
    limit. A `defaultRequest` alone cannot refuse a pod: a container with a limit but no request already has
    request == limit from the API's defaulting (`SetDefaults_Pod`) before admission fills anything in."""
    item: dict[str, Any] = {"type": "Container"}
    if d.limits:
        item["default"] = dict(d.limits)
    item["defaultRequest"] = dict(d.requests)
    return item


def max_per_pod_objects(spec: m.Spec, tenant: m.Tenant) -> list[Desired]:
    """The tenant's per-pod GPU maximums (gpupool.k8s.admission). Not retained on delete: removing a maximum
    from the spec must remove its enforcement (the quota, which is retained, still bounds the tenant)."""
    limits = spec.max_per_pod(tenant)
    # Granted resources the device plugin allocates one per container (what is not granted, the quota refuses).
    singles = [r for r in spec.one_per_container() if tenant.gpus.get(r) and not tenant.offboarded]
    if not limits and not singles:
        return []
    comp, base = tenant_component(tenant.name), tenant_prefix(tenant.name)
    labels = {**MANAGED_BY, LABEL_TENANT: tenant.name}
    return [
        Desired(comp, f"{base}-max-per-pod", admission.policy(tenant, limits, labels, singles)),
        Desired(
            comp, f"{base}-max-per-pod-binding", admission.binding(tenant, labels), depends_on=(f"{base}-max-per-pod",)
        ),
    ]


def dra_guard_objects(spec: m.Spec, tenant: m.Tenant, grants: Mapping[str, int]) -> list[Desired]:
    """The tenant's DRA guard (gpupool.k8s.dra_policy), only in a spec with DRA pools. Not retained on delete, like
    the per-pod maximums: it follows the spec (the quota, retained, still bounds the tenant)."""
    if not spec.dra_pools:
        return []
    comp, base = tenant_component(tenant.name), tenant_prefix(tenant.name)
    labels = {**MANAGED_BY, LABEL_TENANT: tenant.name}
    classes = dra.granted_classes(spec, dict(grants))
    return [
        Desired(comp, f"{base}-dra-guard", dra_policy.policy(tenant, classes, labels)),
        Desired(
            comp, f"{base}-dra-guard-binding", dra_policy.binding(tenant, labels), depends_on=(f"{base}-dra-guard",)
        ),
    ]


# -- The whole stack ----------------------------------------------------------------------------


def _step_object(component: str, step: rollout.Step) -> Desired:
    return Desired(
        component,
        step.name,
        step.manifest,
        patch=True,
        retain_on_delete=True,
        depends_on=step.depends_on,
        timeout_seconds=step.timeout_seconds,
        wait_for=step.wait_for,
        field_manager=step.field_manager,
        ignore_changes=step.ignore_changes,
    )


def _operator_objects(
    opns: str, mig_text: str, kept: list[str], plugin_data: dict[str, str], kept_plugin: list[str]
) -> list[Desired]:
    """The operator's namespace and the two ConfigMaps its operands read (MIG Manager's, the device plugin's)."""
    out: list[Desired] = []
    out.append(
        Desired(
            "operator",
            "gpu-operator-ns",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": opns,
                    "labels": {**MANAGED_BY, "pod-security.kubernetes.io/enforce": "privileged"},
                },
            },
        )
    )
    out.append(
        Desired(
            "mig-config",
            "mig-config",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": MIG_CONFIGMAP,
                    "namespace": opns,
                    "labels": dict(MANAGED_BY),
                    # Says in the preview diff and on the object why configs the spec no longer names are there.
                    **({"annotations": {ANNOTATION_KEPT: ",".join(kept)}} if kept else {}),
                },
                "data": {"config.yaml": mig_text},
            },
            depends_on=("gpu-operator-ns",),
        )
    )
    out.append(
        Desired(
            "device-plugin-config",
            "device-plugin-config",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": PLUGIN_CONFIGMAP,
                    "namespace": opns,
                    "labels": dict(MANAGED_BY),
                    **({"annotations": {ANNOTATION_KEPT_PLUGIN: ",".join(kept_plugin)}} if kept_plugin else {}),
                },
                "data": plugin_data,
            },
            depends_on=("gpu-operator-ns",),
        )
    )
    return out


def _add_pool(
    plan: DesiredObjects,
    pool: m.NodePool,
    mig_by_pool: Mapping[str, str],
    plugin_by_pool: Mapping[str, str],
    opns: str,
    mig_reboot: bool,
) -> None:
    """A pool's node labels and configs in PLAN, and per named node its rollout steps and its pool patch."""
    labels = {LABEL_POOL: pool.name, LABEL_PLUGIN_CONFIG: plugin_by_pool[pool.name], **dra.node_labels(pool)}
    if pool.name in mig_by_pool:
        labels[LABEL_MIG_CONFIG] = mig_by_pool[pool.name]
    labels = dict(sorted(labels.items()))
    plan.pool_configs[pool.name] = PoolConfig(mig_by_pool.get(pool.name, ""), plugin_by_pool[pool.name])
    if pool.node_selector:
        plan.node_group_labels[pool.name] = labels
    comp = pool_component(pool.name)
    # MIG-capable named nodes get their mig.config label through the rolling chain (gpupool.k8s.rollout), whose
    # mig step relabels; the pool patch comes after the chain and carries the final labels, that one too (the
    # value is already there then, so MIG Manager, which answers a changed value only, sees nothing; and a
    # plain apply of the render, which has no chain, labels the node).
    chains = (
        rollout.chain(pool, mig_by_pool[pool.name], ("mig-config",), opns, whole_node=mig_reboot)
        if pool.name in mig_by_pool
        else {}
    )
    own = labels
    patch_names = {node: node_patch_name(pool, node) for node in pool.nodes}
    # An MPS pool's re-key: cordon and drain before the pool patch relabels, uncordon after (rollout.rekey_chain).
    rekeys = (
        {} if chains else rollout.rekey_chain(pool, plugin_by_pool[pool.name], ("device-plugin-config",), patch_names)
    )
    for node in pool.nodes:
        after: tuple[str, ...] = ()
        for item in [*chains.get(node, ()), *rekeys.get(node, ())[:2]]:
            if isinstance(item, rollout.Reconfigure):
                plan.mig_steps.setdefault(pool.name, []).append(item)
            elif isinstance(item, rollout.RekeyDrain):
                plan.rekey_drains.setdefault(pool.name, []).append(item)
            else:
                plan.objects.append(_step_object(comp, item))
            after = (item.name,)
        plan.objects.append(
            Desired(
                comp,
                patch_names[node],
                {
                    # Plain labels; the component layer adds Pulumi's patchForce (components/k8s_objects.py).
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": node, "labels": own},
                },
                patch=True,
                retain_on_delete=True,
                depends_on=("mig-config", "device-plugin-config") + after,
            )
        )
        if node in rekeys:
            plan.objects.append(_step_object(comp, rekeys[node][2]))  # type: ignore[arg-type]


def _tier_object(tier: m.Tier) -> Desired:
    obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": tier.name,
            "labels": {**MANAGED_BY, LABEL_TIER: tier.name},
            "annotations": {ANNOTATION_TIER_PRIORITY: priority_revision(tier.priority, tier.preemption_policy)},
        },
        "value": tier.priority,
        "preemptionPolicy": tier.preemption_policy,
    }
    if tier.description:
        obj["description"] = tier.description
    # value and preemptionPolicy are immutable (kubernetes pkg/apis/scheduling/validation/validation.go,
    # ValidatePriorityClassUpdate), and pulumi-kubernetes updates a PriorityClass in place: replace it.
    return Desired("tiers", f"tier-{tier.name}", obj, replace_on_changes=PRIORITY_IMMUTABLE)


def build(
    spec: m.Spec,
    kept_mig_configs: Mapping[str, list[dict[str, Any]]] | None = None,
    kept_plugin_configs: Mapping[str, str] | None = None,
) -> DesiredObjects:
    """The stack's desired objects. KEPT_MIG_CONFIGS: old MIG configs nodes still carry (gpupool.k8s.mig_in_use,
    read from the cluster by `pulumi up` and `gpupool render --kubeconfig`): in the ConfigMap after the spec's,
    outside the config hash, so keeping them and later dropping them restarts no MIG Manager. KEPT_PLUGIN_CONFIGS:
    the same for the device-plugin ConfigMap's sharing keys (key -> its live text)."""
    op = spec.cluster.operator
    opns = op.namespace
    mig_entries, mig_by_pool = mig_configs(spec)
    # The config hash restarts every MIG Manager (the operator's DaemonSet roll). Rolled nodes do not need it: the
    # mig step restarts each one's own pod in its turn (gpupool.k8s.mig_step). Nodes of selector-based pools,
    # which their own tooling relabels, do: their pods must mount the new file before a relabel. So the hash
    # covers those pools' configs only, and a re-layout of named nodes rolls nothing.
    selected = {
        mig_by_pool[p.name]: mig_entries[mig_by_pool[p.name]]
        for p in spec.pools
        if p.node_selector and p.name in mig_by_pool
    }
    mig_hash = content_hash(dump_yaml({"version": "v1", "mig-configs": dict(sorted(selected.items()))}))
    kept = {k: v for k, v in (kept_mig_configs or {}).items() if k not in mig_entries}
    mig_entries = {**mig_entries, **kept}
    mig_text = dump_yaml({"version": "v1", "mig-configs": mig_entries})
    plugin_docs, plugin_by_pool = device_plugin_configs(spec)
    plugin_data = {key: dump_yaml(doc) for key, doc in plugin_docs.items()}
    plugin_hash = content_hash(dump_yaml(plugin_data))
    kept_plugin = {k: v for k, v in (kept_plugin_configs or {}).items() if k not in plugin_data}
    plugin_data = {**plugin_data, **kept_plugin}
    plan = DesiredObjects(
        operator_chart(
            spec,
            operator_values(spec, mig_hash, plugin_hash),
            depends_on=("gpu-operator-ns", "mig-config", "device-plugin-config"),
        ),
        mig_configs=mig_entries,
        plugin_configs=plugin_docs,
        dra_chart=dra_install.chart(spec, depends_on=("gpu-operator-ns",)),
    )
    plan.objects += _operator_objects(opns, mig_text, list(kept), plugin_data, list(kept_plugin))
    for pool in spec.pools:
        _add_pool(plan, pool, mig_by_pool, plugin_by_pool, opns, op.mig_reboot)
    plan.objects += [_tier_object(tier) for tier in spec.tiers]
    plan.objects.extend(dra.objects(spec))  # DeviceClasses of DRA pools (none without)
    kq = kueue.queue_objects(spec)
    plan.queues = kq
    if kq is not None:
        plan.objects.extend(kq.platform)
    quoted = quota_resources(spec)
    for tenant in spec.tenants:
        plan.objects.extend(tenant_objects(spec, tenant, quoted, kq, after_hardware(spec)))
    plan.objects.extend(monitoring.objects(spec, after=("gpu-operator-ns",)))
    plan.objects = [stamped(o, spec.cluster.name) for o in plan.objects]
    return plan
