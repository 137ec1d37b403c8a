"""The validated model of a GPU platform: plain frozen dataclasses, built from schema-valid data.

Defaults live here (one place), so every later layer (checks, manifests, plan) sees a complete model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gpupool.gpu.mig import RESOURCE_PREFIX as MIG_PREFIX
from gpupool.gpu.mig import mig_resource
from gpupool.model.queueing import Queueing

__all__ = ["MIG_PREFIX", "mig_resource"]  # re-exported: the model names MIG resources as the catalog does

DEFAULT_CHART_VERSION = "v26.7.0"
DEFAULT_CHART_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"
DEFAULT_OPERATOR_NAMESPACE = "gpu-operator"
# NVIDIA's DRA driver chart (kubernetes-sigs/dra-driver-nvidia-gpu; its OCI home: tests/bats/Makefile 23 of v0.4.1;
# chart semver without the v, Chart.yaml 22). gpupool installs it beside ClusterPolicy for pools with `allocation: dra`.
DEFAULT_DRA_CHART_VERSION = "0.4.1"
DEFAULT_DRA_CHART_REPOSITORY = "oci://registry.k8s.io/dra-driver-nvidia/charts"
GPU = "nvidia.com/gpu"
SHARED_SUFFIX = ".shared"
DEVICE_PLUGIN = "device-plugin"  # a pool's `allocation`: the NVIDIA device plugin advertises its devices (default)
DRA = "dra"  # ... or Dynamic Resource Allocation serves them (gpupool.k8s.dra, docs/explanation/dra.md)


def shared_name(physical: str) -> str:
    """What the device plugin advertises for a resource shared with renameToShared."""
    return physical + SHARED_SUFFIX


def unshared_name(advertised: str) -> str:
    """The physical resource behind a `.shared` name (the name itself when it has no such suffix)."""
    return advertised[: -len(SHARED_SUFFIX)] if advertised.endswith(SHARED_SUFFIX) else advertised


def whole_gpu_indices(gpus_per_node: int, groups: tuple[MigGroup, ...]) -> list[int]:
    """GPU indices of a node that no MIG group covers: they stay whole GPUs (MIG disabled)."""
    covered = {i for group in groups for i in group.gpus}
    return [i for i in range(gpus_per_node) if i not in covered]


@dataclass(frozen=True)
class GpuOperator:
    chart_version: str = DEFAULT_CHART_VERSION
    repository: str = DEFAULT_CHART_REPOSITORY
    chart_path: str | None = None
    namespace: str = DEFAULT_OPERATOR_NAMESPACE
    driver: bool = True
    toolkit: bool = True
    dcgm_exporter: bool = True
    mig_reboot: bool = False
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DraDriver:
    """NVIDIA's DRA driver chart, installed when a pool has `allocation: dra` (gpupool.k8s.dra_driver)."""

    install: bool = True  # False: the cluster has the driver already (installed and configured by its owners)
    chart_version: str = DEFAULT_DRA_CHART_VERSION
    repository: str = DEFAULT_DRA_CHART_REPOSITORY
    chart_path: str | None = None
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Cluster:
    name: str
    mig_strategy: str = "mixed"
    operator: GpuOperator = field(default_factory=GpuOperator)
    dra_driver: DraDriver = field(default_factory=DraDriver)


@dataclass(frozen=True)
class MigGroup:
    """One MIG layout applied to some GPU indices of every node in a pool."""

    gpus: tuple[int, ...]
    layout: Mapping[str, int]  # profile -> instances per GPU, presets already resolved
    preset: str | None = None


@dataclass(frozen=True)
class TimeSlicing:
    replicas: int
    rename: bool = True
    fail_requests_greater_than_one: bool = True


@dataclass(frozen=True)
class Mps:
    replicas: int
    rename: bool = True


@dataclass(frozen=True)
class Sharing:
    mig: tuple[MigGroup, ...] = ()
    time_slicing: TimeSlicing | None = None
    mps: Mps | None = None

    @property
    def kind(self) -> str:
        parts = []
        if self.mig:
            parts.append("mig")
        if self.time_slicing:
            parts.append("time-slicing")
        if self.mps:
            parts.append("mps")
        return "+".join(parts) or "exclusive"

    @property
    def software_shared(self) -> bool:
        """Time-slicing and MPS share a GPU without hardware isolation (MIG has it)."""
        return self.time_slicing is not None or self.mps is not None

    @property
    def one_per_container(self) -> bool:
        """The device plugin refuses more than one of this pool's shared units in one container, at kubelet
        Allocate (k8s-device-plugin v0.20.0 internal/rm/rm.go, ValidateRequest: per container). For MPS the
        plugin turns an unset failRequestsGreaterThanOne into true (api/config/v1/config.go, lines 72-76), and
        gpupool never sets it there."""
        if self.time_slicing:
            return self.time_slicing.fail_requests_greater_than_one
        return self.mps is not None

    @property
    def replicas(self) -> int:
        if self.time_slicing:
            return self.time_slicing.replicas
        if self.mps:
            return self.mps.replicas
        return 1

    @property
    def rename(self) -> bool:
        share = self.time_slicing or self.mps
        return bool(share and share.rename)


@dataclass(frozen=True)
class Rollout:
    """How a MIG layout change reaches a pool's named nodes (gpupool.k8s.rollout)."""

    max_unavailable: int = 1  # nodes reconfigured at once
    cordon: bool = True  # cordon each node while mig-manager reconfigures it, uncordon after success
    node_timeout_seconds: int = 1800  # how long one node may take to report success
    drain: bool = True  # evict the node's GPU pods (Eviction API) after the cordon, before the relabel
    drain_timeout_seconds: int = 300  # how long a drain may wait for budgets (an evicted pod also gets its grace)
    # kubectl drain's --force and --delete-emptydir-data: evict GPU pods no controller owns, and GPU pods with
    # emptyDir data (off: such a pod stops the drain before anything is evicted, gpupool.k8s.drain)
    force: bool = False
    delete_empty_dir_data: bool = False

    @property
    def drains(self) -> bool:
        """Draining needs the cordon: without it, the evicted pods' controllers put them straight back."""
        return self.cordon and self.drain


@dataclass(frozen=True)
class NodePool:
    name: str
    gpu_model: str  # canonical catalog name
    gpus_per_node: int
    node_count: int
    nodes: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    sharing: Sharing = field(default_factory=Sharing)
    price_per_gpu_hour: float | None = None
    rollout: Rollout = field(default_factory=Rollout)
    allocation: str = DEVICE_PLUGIN

    @property
    def dra(self) -> bool:
        """Dynamic Resource Allocation serves this pool's devices, under the same resource names."""
        return self.allocation == DRA

    def physical_resources_per_node(self) -> dict[str, int]:
        """Devices one node has before sharing: whole GPUs and MIG instances."""
        out: dict[str, int] = {}
        for name, terms in self.physical_terms().items():
            out[name] = sum(gpus * per_gpu for gpus, per_gpu in terms)
        return dict(sorted(out.items()))

    def physical_terms(self) -> dict[str, list[tuple[int, int]]]:
        """Per physical resource, [(GPUs per node in a group, devices per GPU)]: MIG groups, then whole GPUs."""
        out: dict[str, list[tuple[int, int]]] = {}
        for group in self.sharing.mig:
            for profile, count in group.layout.items():
                if count:
                    out.setdefault(mig_resource(profile), []).append((len(group.gpus), count))
        whole = len(whole_gpu_indices(self.gpus_per_node, self.sharing.mig))
        if whole > 0:
            out.setdefault(GPU, []).append((whole, 1))
        return out

    def advertised_name(self, physical_name: str) -> str:
        return shared_name(physical_name) if self.sharing.rename else physical_name

    def mig_profile(self, physical_name: str) -> str:
        """The MIG profile behind a MIG resource name of this pool's layout (`1g.10gb+me` for
        nvidia.com/mig-1g.10gb.me: the name writes `+` as `.`)."""
        return next(p for g in self.sharing.mig for p in g.layout if mig_resource(p) == physical_name)

    def physical_name(self, advertised: str) -> str:
        """The inverse of advertised_name."""
        return unshared_name(advertised) if self.sharing.rename else advertised

    def resources_per_node(self) -> dict[str, int]:
        """What one node advertises to the scheduler: names after renames, counts times replicas."""
        replicas = self.sharing.replicas
        return {
            self.advertised_name(name): count * replicas for name, count in self.physical_resources_per_node().items()
        }

    def capacity(self) -> dict[str, int]:
        return {name: count * self.node_count for name, count in self.resources_per_node().items()}

    def unit_gpu_fraction(self, advertised: str) -> Fraction:
        """One unit of an advertised resource in physical GPUs, the weight of every GPU-equivalent and charge:
        a whole GPU is 1; a MIG instance its layout's share of the GPU (gpupool.gpu.mig.layout_weights: the
        GPU split among its instances by compute slices, so a GPU's instances add up to exactly 1), averaged
        over the pool's MIG groups by instance count when groups differ; a time-sliced or MPS replica
        1/replicas of what it shares."""
        return self.device_gpu_fraction(self.physical_name(advertised)) / self.sharing.replicas

    def device_gpu_fraction(self, physical: str) -> Fraction:
        """One device before sharing (a whole GPU or a MIG instance) in physical GPUs; see unit_gpu_fraction."""
        base = Fraction(1)
        if physical.startswith(MIG_PREFIX):
            from gpupool.gpu.mig import catalog, layout_weights

            model = catalog().resolve(self.gpu_model)
            assert model is not None, f"a MIG pool's model is in the catalog: {self.gpu_model}"
            weight = count = Fraction(0)
            for group in self.sharing.mig:
                for profile, w in layout_weights(model, group.layout).items():
                    if mig_resource(profile) == physical:
                        n = len(group.gpus) * group.layout[profile]
                        weight += n * w
                        count += n
            assert count, f"{physical} is a device of pool {self.name}"
            base = weight / count
        return base

    def stranded_gpus(self) -> Fraction:
        """GPUs' worth of compute slices per node that the MIG layouts leave in no instance (by SM share).
        Not lost to chargeback: layout_weights charges them to the instances that strand them."""
        from gpupool.gpu.mig import catalog, stranded_compute

        model = catalog().resolve(self.gpu_model) if self.sharing.mig else None
        if model is None:
            return Fraction(0)
        return sum((len(g.gpus) * stranded_compute(model, g.layout) for g in self.sharing.mig), Fraction(0))

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.node_count

    @property
    def mig_capable(self) -> bool:
        """A MIG layout, or a GPU model the MIG catalog knows (MIG Manager may be told to lay it out): the pools
        the MIG config maps (gpupool.k8s.manifests.mig_configs) and a MIG rollout rolls over."""
        from gpupool.gpu.mig import catalog

        return bool(self.sharing.mig) or catalog().resolve(self.gpu_model) is not None


@dataclass(frozen=True)
class Tier:
    name: str
    priority: int
    preemption_policy: str = "PreemptLowerPriority"
    isolation: str = "shared"  # or "dedicated"
    description: str = ""
    max_per_pod: Mapping[str, int] = field(default_factory=dict)  # default for its tenants, per resource name


@dataclass(frozen=True)
class ContainerDefaults:
    requests: Mapping[str, str] = field(default_factory=lambda: {"cpu": "100m", "memory": "256Mi"})
    # No default limit: an injected limit refuses a container asking for more, and OOM-kills one asking for
    # nothing (gpupool.k8s.manifests.container_defaults). Only what the spec names.
    limits: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Tenant:
    name: str
    tier: str
    gpus: Mapping[str, int] = field(default_factory=dict)
    compute: Mapping[str, str] = field(default_factory=dict)
    container_defaults: ContainerDefaults = field(default_factory=ContainerDefaults)
    owners: tuple[str, ...] = ()  # as written; gpupool.model.owners.parse_owner says which subject each is
    owner_role: str = "edit"  # the Kubernetes aggregated ClusterRole owners get: admin, edit or view
    cost_center: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    offboarded: bool = False
    source_file: str | None = None
    max_per_pod: Mapping[str, int] = field(default_factory=dict)  # the tenant's own; see Spec.max_per_pod

    @property
    def namespace(self) -> str:
        return self.name


@dataclass(frozen=True)
class Oversubscription:
    max_ratio: float = 1.0
    per_resource: Mapping[str, float] = field(default_factory=dict)

    def ratio_for(self, resource: str) -> float:
        return self.per_resource.get(resource, self.max_ratio)

    def exact_ratio_for(self, resource: str) -> Fraction:
        """The ratio as written (0.7 is 7/10, not a float just below it)."""
        return Fraction(str(self.ratio_for(resource)))

    def allowed(self, resource: str, capacity: int) -> int:
        """Units of a resource tenants may be granted in total. Exact arithmetic: 10 x 0.7 allows 7, and a
        huge ratio does not overflow a float. The validator and the plan both judge by this."""
        return math.floor(capacity * self.exact_ratio_for(resource))


@dataclass(frozen=True)
class Alerts:
    """Thresholds of the generated alerts (gpupool.monitoring.rules)."""

    idle_below: float = 0.05  # GPU engine activity (0-1) averaged over 1h
    idle_for: str = "2h"
    quota_almost_full: float = 0.9
    pending_for: str = "30m"
    mig_stuck_for: str = "30m"


@dataclass(frozen=True)
class Monitoring:
    """The `monitoring:` block: off by default (it needs the Prometheus Operator's CRDs)."""

    enabled: bool = False
    namespace: str | None = None  # None: the GPU Operator's namespace
    rule_labels: Mapping[str, str] = field(default_factory=dict)
    dashboard_labels: Mapping[str, str] = field(default_factory=lambda: {"grafana_dashboard": "1"})
    alerts: Alerts = field(default_factory=Alerts)


@dataclass(frozen=True)
class Spec:
    cluster: Cluster
    pools: tuple[NodePool, ...]
    tiers: tuple[Tier, ...]
    tenants: tuple[Tenant, ...]
    oversubscription: Oversubscription = field(default_factory=Oversubscription)
    source_path: str = ""
    tenant_shards: int = 0  # sharding.tenantShards; 0 = one stack holds everything (gpupool.model.sharding)
    monitoring: Monitoring = field(default_factory=Monitoring)
    queueing: Queueing | None = None  # the opt-in Kueue block (gpupool.model.queues derives the quotas)

    @property
    def active_tenants(self) -> tuple[Tenant, ...]:
        return tuple(t for t in self.tenants if not t.offboarded)

    def tier(self, name: str) -> Tier | None:
        return next((t for t in self.tiers if t.name == name), None)

    def max_per_pod(self, tenant: Tenant) -> dict[str, int]:
        """The per-pod GPU maximums that apply to a tenant: its tier's defaults, overridden per resource name
        by its own. Empty for an offboarded tenant (its quota is 0 anyway)."""
        if tenant.offboarded:
            return {}
        tier = self.tier(tenant.tier)
        return dict(sorted({**(tier.max_per_pod if tier else {}), **tenant.max_per_pod}.items()))

    def one_per_container(self) -> list[str]:
        """Resource names no container can get more than one of: every pool advertising the name refuses it
        (Sharing.one_per_container). A name an unshared pool also advertises can still be allocated there."""
        by_name: dict[str, list[bool]] = {}
        for pool in self.pools:
            for name in pool.resources_per_node():
                by_name.setdefault(name, []).append(pool.sharing.one_per_container)
        return sorted(name for name, flags in by_name.items() if all(flags))

    def capacity(self) -> dict[str, int]:
        """Per advertised resource name, what all pools supply together."""
        total: dict[str, int] = {}
        for pool in self.pools:
            for name, count in pool.capacity().items():
                total[name] = total.get(name, 0) + count
        return dict(sorted(total.items()))

    @property
    def dra_pools(self) -> tuple[NodePool, ...]:
        return tuple(p for p in self.pools if p.dra)

    def advertised_resources(self) -> list[str]:
        """Every GPU resource name the cluster advertises: what each tenant quota must list."""
        return sorted({name for pool in self.pools for name in pool.resources_per_node()})

    def granted(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for tenant in self.active_tenants:
            for name, count in tenant.gpus.items():
                total[name] = total.get(name, 0) + count
        return dict(sorted(total.items()))
