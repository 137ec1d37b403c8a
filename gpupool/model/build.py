"""Build the validated model from schema-valid data: the one place that turns spec data into `platform`
objects.

The checks that decide whether something can be built at all (a duplicate name, a MIG layout that does not
fit, a quota nobody advertises) run here, as they build, and report under the ids below, which
gpupool/rules/ declares with their documentation. Everything else is a rule that reads the built model.
Parts the schema already rejected are skipped, so one run reports every problem it can.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpupool.model import platform as m
from gpupool.model.queueing import Queueing
from gpupool.model.queueing import from_data as queueing_from_data
from gpupool.spec.diagnostics import ERROR, WARNING, Report, did_you_mean, one_of
from gpupool.spec.loader import LoadedSpec
from gpupool.spec.quantity import parse_quantity

# Tenants repeat the same few defaults ("500m", "1Gi"): parse each string once (the values are immutable).
_quantity = functools.lru_cache(maxsize=4096)(parse_quantity)

# Ids of the checks that run while building; their titles and docs are declared in gpupool/rules/
# (pools.py, sharing.py, tiers.py, tenants.py), which import these names. The model does not import rules.
DUPLICATE_POOL = "GP201"
MIG_MODEL = "GP202"
NO_NODES = "GP203"
SELECTOR_COUNT = "GP204"
COUNT_BELOW_NODES = "GP205"
NODE_TWICE = "GP206"
NODE_IN_TWO_POOLS = "GP207"
MIG_FORM = "GP210"
GPU_INDEX_RANGE = "GP211"
GPU_INDEX_TWICE = "GP212"
PER_GPU_FORM = "GP213"
UNKNOWN_PRESET = "GP214"
COMPUTE_INSTANCE = "GP215"
UNKNOWN_PROFILE = "GP216"
ALL_ZERO = "GP217"
LAYOUT_FIT = "GP218"
MIG_NEEDS_MIXED = "GP301"
TS_AND_MPS = "GP302"
MPS_WITH_MIG = "GP303"
MPS_UNDER_MIXED = "GP304"
DUPLICATE_TIER = "GP402"
DUPLICATE_TENANT = "GP501"
UNKNOWN_TIER = "GP502"
UNADVERTISED = "GP503"
DEDICATED_SHARED = "GP504"
QUANTITY = "GP505"
REQUEST_ABOVE_LIMIT = "GP506"


@dataclass
class Built:
    """The model of whatever validated, and what rules need to point back into the spec."""

    model: m.Spec
    complete: bool  # the cluster section was usable (else the model is not shown to later stages)
    pools_complete: bool  # every pool was built: what the cluster advertises is known
    pool_paths: dict[str, tuple] = field(default_factory=dict)
    tenant_paths: dict[str, tuple] = field(default_factory=dict)
    per_gpu: list[tuple[tuple, int, tuple[m.MigGroup, ...]]] = field(default_factory=list)  # valid perGpu blocks


def build(loaded: LoadedSpec, report: Report, bad: set[tuple]) -> Built | None:
    """The model of LOADED (None when the data is not a mapping); problems go to REPORT."""
    if not isinstance(loaded.data, dict):
        return None
    return _Builder(loaded, report, bad).run()


class _Builder:
    def __init__(self, loaded: LoadedSpec, report: Report, bad: set[tuple]):
        self.loaded = loaded
        self.data: dict[str, Any] = loaded.data
        self.report = report
        self.bad = bad
        # Relative paths in the spec are relative to the spec file (not to the label, which is relative to cwd).
        self.spec_dir = Path(loaded.file_path or loaded.path).parent
        # With a broken pool, what the cluster advertises is unknown: quota names are then not judged.
        self.pools_complete = self.usable(("nodePools",))
        self.pool_paths: dict[str, tuple] = {}
        self.per_gpu: list[tuple[tuple, int, tuple[m.MigGroup, ...]]] = []

    # -- reporting ---------------------------------------------------------------------------
    def error(self, rule: str, path: tuple, message: str, *, key: bool = False) -> None:
        self._add(ERROR, rule, path, message, key)

    def warn(self, rule: str, path: tuple, message: str, *, key: bool = False) -> None:
        self._add(WARNING, rule, path, message, key)

    def _add(self, severity: str, rule: str, path: tuple, message: str, key: bool) -> None:
        where = self.loaded.source.key(path) if key else self.loaded.source.value(path)
        self.report.add(severity, where, self.loaded.render(path), message, rule)

    def usable(self, prefix: tuple) -> bool:
        n = len(prefix)
        return not any(p[:n] == prefix for p in self.bad)

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> Built:
        cluster = self.cluster()
        tiers = self.tiers()
        pools = self.pools(cluster)
        tenants = self.tenants(tiers, pools)
        spec = m.Spec(
            cluster or m.Cluster("unknown"),
            tuple(pools.values()),
            tuple(t for t in tiers.values() if t is not None),
            tuple(t for t, _ in tenants.values()),
            self.oversubscription(),
            self.loaded.path,
            self.tenant_shards(),
            monitoring=self.monitoring(),
            queueing=self.queueing(cluster),
        )
        return Built(
            spec,
            cluster is not None,
            self.pools_complete,
            self.pool_paths,
            {name: path for name, (_, path) in tenants.items()},
            self.per_gpu,
        )

    # -- cluster -----------------------------------------------------------------------------
    def cluster(self) -> m.Cluster | None:
        raw = self.data.get("cluster")
        if not isinstance(raw, dict) or not self.usable(("cluster",)):
            return None
        op = raw.get("gpuOperator", {})
        chart_path = op.get("chartPath")
        operator = m.GpuOperator(
            chart_version=op.get("chartVersion", m.DEFAULT_CHART_VERSION),
            repository=op.get("repository", m.DEFAULT_CHART_REPOSITORY),
            chart_path=str(self.spec_dir / chart_path) if chart_path is not None else None,
            namespace=op.get("namespace", m.DEFAULT_OPERATOR_NAMESPACE),
            driver=op.get("driver", True),
            toolkit=op.get("toolkit", True),
            dcgm_exporter=op.get("dcgmExporter", True),
            mig_reboot=op.get("migRebootOnReconfigure", False),
            values=op.get("values", {}),
        )
        dra = raw.get("draDriver", {})
        dra_path = dra.get("chartPath")
        dra_driver = m.DraDriver(
            install=dra.get("install", True),
            chart_version=dra.get("chartVersion", m.DEFAULT_DRA_CHART_VERSION),
            repository=dra.get("repository", m.DEFAULT_DRA_CHART_REPOSITORY),
            chart_path=str(self.spec_dir / dra_path) if dra_path is not None else None,
            values=dra.get("values", {}),
        )
        return m.Cluster(raw["name"], raw.get("migStrategy", "mixed"), operator, dra_driver)

    def oversubscription(self) -> m.Oversubscription:
        raw = self.data.get("oversubscription")
        if not isinstance(raw, dict) or not self.usable(("oversubscription",)):
            return m.Oversubscription()
        return m.Oversubscription(
            float(raw.get("maxRatio", 1.0)), {k: float(v) for k, v in raw.get("perResource", {}).items()}
        )

    def monitoring(self) -> m.Monitoring:
        raw = self.data.get("monitoring")
        if not isinstance(raw, dict) or not self.usable(("monitoring",)):
            return m.Monitoring()
        a = raw.get("alerts", {})
        d = m.Alerts()
        alerts = m.Alerts(
            float(a.get("idleBelow", d.idle_below)),
            a.get("idleFor", d.idle_for),
            float(a.get("quotaAlmostFull", d.quota_almost_full)),
            a.get("pendingFor", d.pending_for),
            a.get("migStuckFor", d.mig_stuck_for),
        )
        return m.Monitoring(
            bool(raw.get("enabled", False)),
            raw.get("namespace"),
            dict(raw.get("ruleLabels", {})),
            dict(raw.get("dashboardLabels", m.Monitoring().dashboard_labels)),
            alerts,
        )

    def tenant_shards(self) -> int:
        raw = self.data.get("sharding")
        if not isinstance(raw, dict) or not self.usable(("sharding",)):
            return 0
        return int(raw["tenantShards"])

    def queueing(self, cluster: m.Cluster | None) -> Queueing | None:
        raw = self.data.get("queueing")
        if not isinstance(raw, dict) or not self.usable(("queueing",)):
            return None
        return queueing_from_data(raw, cluster.name if cluster else "unknown")

    # -- tiers -------------------------------------------------------------------------------
    def tiers(self) -> dict[str, m.Tier | None]:
        out: dict[str, m.Tier | None] = {}
        raw = self.data.get("tiers")
        if not isinstance(raw, list):
            return out
        for i, t in enumerate(raw):
            path = ("tiers", i)
            if not self.usable(path) or not isinstance(t, dict):
                if isinstance(t, dict) and isinstance(t.get("name"), str):
                    out.setdefault(t["name"], None)  # known name: tenants naming it are not blamed twice
                continue
            name = t["name"]
            if name in out:
                self.error(DUPLICATE_TIER, path + ("name",), "duplicate tier name; tier names must be unique")
                continue
            out[name] = m.Tier(
                name,
                t["priority"],
                t.get("preemptionPolicy", "PreemptLowerPriority"),
                t.get("isolation", "shared"),
                t.get("description", ""),
                dict(t.get("maxPerPod", {})),
            )
        return out

    # -- node pools --------------------------------------------------------------------------
    def pools(self, cluster: m.Cluster | None) -> dict[str, m.NodePool]:
        out: dict[str, m.NodePool] = {}
        raw = self.data.get("nodePools")
        if not isinstance(raw, list):
            return out
        node_owner: dict[str, str] = {}
        for i, p in enumerate(raw):
            path = ("nodePools", i)
            if (
                not isinstance(p, dict)
                or not all(self.usable(path + (k,)) for k in ("name", "gpu", "gpusPerNode"))
                or not all(k in p for k in ("name", "gpu", "gpusPerNode"))
            ):
                self.pools_complete = False
                continue
            if p["name"] in out:
                self.error(DUPLICATE_POOL, path + ("name",), "duplicate node pool name; pool names must be unique")
                self.pools_complete = False  # what it advertises is not counted: do not blame tenants for it
                continue
            pool = self.pool(path, p, cluster, node_owner)
            if pool is not None:
                out[pool.name] = pool
                self.pool_paths[pool.name] = path
            else:
                self.pools_complete = False
        return out

    def pool(self, path: tuple, p: dict, cluster: m.Cluster | None, node_owner: dict[str, str]) -> m.NodePool | None:
        from gpupool.gpu.mig import catalog

        name = p["name"]
        model = catalog().resolve(p["gpu"])
        ok = self.usable(path)
        # Parts the schema rejected are skipped (already reported); judging them again would only add noise.
        sharing_raw = p.get("sharing", {}) if self.usable(path + ("sharing",)) else {}
        if not isinstance(sharing_raw, dict):
            sharing_raw = {}
        if model is None and "mig" in sharing_raw:
            self.no_mig_model(path + ("gpu",), p["gpu"])
            ok = False
        if not all(self.usable(path + (k,)) for k in ("nodes", "nodeSelector", "nodeCount")):
            # Which nodes the pool has is unknown: skip the node checks, still judge the sharing config.
            self.sharing(path + ("sharing",), sharing_raw, model, p["gpusPerNode"], cluster)
            return None
        nodes = list(p.get("nodes", []))
        selector = dict(p.get("nodeSelector", {}))
        count = p.get("nodeCount")
        if not self.node_choice_ok(path, nodes, selector, count):
            ok = False
        if not self.claim_nodes(path, nodes, name, node_owner):
            ok = False
        sharing = self.sharing(path + ("sharing",), sharing_raw, model, p["gpusPerNode"], cluster)
        if sharing is None or not ok or not self.usable(path):
            return None
        return m.NodePool(
            name=name,
            # the same lookup as `gpupool mig ...`: NVIDIA-L4 and L4 are one model in the plan (GP250 warns
            # about names it does not know, which stay as written)
            gpu_model=model.name if model else _known_name(p["gpu"]),
            gpus_per_node=p["gpusPerNode"],
            node_count=count if count is not None else len(nodes),
            nodes=tuple(nodes),
            node_selector=selector,
            sharing=sharing,
            price_per_gpu_hour=p.get("pricePerGpuHour"),
            rollout=self.rollout(p.get("rollout", {})),
            allocation=p.get("allocation", m.DEVICE_PLUGIN),
        )

    def no_mig_model(self, path: tuple, gpu: str) -> None:
        """Report a pool asking for MIG on a GPU model that has none (or that gpupool does not know)."""
        from gpupool.gpu.mig import catalog
        from gpupool.gpu.models import resolve_gpu

        known = resolve_gpu(gpu).gpu
        if known is not None:  # the same wording as `gpupool mig profiles --gpu L4`
            self.error(
                MIG_MODEL,
                path,
                f"{known.name} has no MIG (a whole-GPU model: share it "
                f"with timeSlicing or mps, or use a MIG model: {one_of(catalog().names(), 20)})",
            )
        else:
            self.error(
                MIG_MODEL,
                path,
                f"is not a MIG-capable GPU model gpupool knows{did_you_mean(gpu, catalog().names())}; "
                f"MIG models: {one_of(catalog().names(), 20)}",
            )

    def node_choice_ok(self, path: tuple, nodes: list, selector: dict, count: int | None) -> bool:
        """Whether the pool says which nodes it has and how many; reports each way it does not."""
        ok = True
        if not nodes and not selector:
            self.error(
                NO_NODES,
                path,
                "the pool selects no nodes: list `nodes` by name, or give the "
                "`nodeSelector` labels its node group carries (with `nodeCount`)",
            )
            ok = False
        if selector and not nodes and count is None:
            self.error(
                SELECTOR_COUNT,
                path,
                "`nodeCount` is required when nodes are chosen by `nodeSelector`: "
                "capacity checks need to know how many nodes the group has",
            )
            ok = False
        if count is not None and count < len(nodes):
            self.error(
                COUNT_BELOW_NODES,
                path + ("nodeCount",),
                f"nodeCount {count} is less than the "
                f"{len(nodes)} node{'s' if len(nodes) != 1 else ''} listed; set it to at least {len(nodes)} or remove it",
            )
            ok = False
        return ok

    def claim_nodes(self, path: tuple, nodes: list, name: str, node_owner: dict[str, str]) -> bool:
        """Record pool NAME as the owner of its listed nodes (one MIG and plugin config per node); False on a
        node listed twice or already in another pool."""
        ok = True
        seen: set[str] = set()
        for j, node in enumerate(nodes):
            if node in seen:
                self.error(NODE_TWICE, path + ("nodes", j), "this node is listed twice in this pool")
                ok = False
            elif node in node_owner:
                self.error(
                    NODE_IN_TWO_POOLS,
                    path + ("nodes", j),
                    f'this node is already in pool "{node_owner[node]}"; a node can carry only one MIG and one '
                    "device-plugin config",
                )
                ok = False
            seen.add(node)
            node_owner.setdefault(node, name)
        return ok

    @staticmethod
    def rollout(raw: dict) -> m.Rollout:
        base = m.Rollout()
        return m.Rollout(
            raw.get("maxUnavailable", base.max_unavailable),
            raw.get("cordon", base.cordon),
            raw.get("nodeTimeoutSeconds", base.node_timeout_seconds),
            raw.get("drain", base.drain),
            raw.get("drainTimeoutSeconds", base.drain_timeout_seconds),
            force=raw.get("force", base.force),
            delete_empty_dir_data=raw.get("deleteEmptyDirData", base.delete_empty_dir_data),
        )

    def sharing(self, path: tuple, raw: dict, model, gpus_per_node: int, cluster: m.Cluster | None) -> m.Sharing | None:
        ok = self.usable(path)
        groups: tuple[m.MigGroup, ...] | None = ()
        if "mig" in raw and self.usable(path + ("mig",)):
            if cluster is not None and cluster.mig_strategy != "mixed":
                self.error(
                    MIG_NEEDS_MIXED,
                    path + ("mig",),
                    f'MIG pools need cluster.migStrategy "mixed" (it is '
                    f'"{cluster.mig_strategy}"), so that each MIG profile is advertised as its own resource',
                )
                ok = False
            if model is not None:
                groups = self.mig(path + ("mig",), raw["mig"], model, gpus_per_node)
                ok = ok and groups is not None
        ts = raw.get("timeSlicing")
        mps = raw.get("mps")
        if ts is not None and mps is not None:
            self.error(
                TS_AND_MPS, path + ("mps",), "a pool uses either timeSlicing or mps, not both; remove one of them"
            )
            ok = False
        if mps is not None:
            if "mig" in raw:
                self.error(
                    MPS_WITH_MIG,
                    path + ("mps",),
                    "MPS cannot share MIG instances (the device plugin "
                    'rejects it: "sharing using MPS is not supported for MIG devices"); use timeSlicing '
                    "with MIG, or MPS on a pool without mig",
                )
                ok = False
            elif cluster is not None and cluster.mig_strategy == "mixed":
                self.error(
                    MPS_UNDER_MIXED,
                    path + ("mps",),
                    'MPS does not work with cluster.migStrategy "mixed": '
                    "the GPU Operator passes the strategy to every device plugin, which then refuses MPS "
                    '("using --mig-strategy=mixed is not supported with MPS"); set cluster.migStrategy: '
                    "none (only possible without MIG pools) or use timeSlicing",
                )
                ok = False
        if not ok:
            return None
        return m.Sharing(
            mig=groups or (),
            time_slicing=m.TimeSlicing(
                ts["replicas"], ts.get("renameToShared", True), ts.get("failRequestsGreaterThanOne", True)
            )
            if ts
            else None,
            mps=m.Mps(mps["replicas"], mps.get("renameToShared", True)) if mps else None,
        )

    def mig(self, path: tuple, raw: dict, model, gpus_per_node: int) -> tuple[m.MigGroup, ...] | None:
        forms = [k for k in ("layout", "preset", "perGpu") if k in raw]
        if len(forms) != 1:
            self.error(
                MIG_FORM,
                path,
                "give exactly one of `layout` (profile: count), `preset` (e.g. "
                f"all-balanced) or `perGpu`; found {', '.join(forms) if forms else 'none'}",
            )
            return None
        if "perGpu" not in raw:
            layout = self.mig_layout(path, raw, model)
            return None if layout is None else (m.MigGroup(tuple(range(gpus_per_node)), layout, raw.get("preset")),)
        groups = []
        owner: dict[int, int] = {}
        ok = True
        for k, entry in enumerate(raw["perGpu"]):
            epath = path + ("perGpu", k)
            for j, index in enumerate(entry["gpus"]):
                if index >= gpus_per_node:
                    self.error(
                        GPU_INDEX_RANGE,
                        epath + ("gpus", j),
                        f"GPU index {index} does not exist on a "
                        f"node with {gpus_per_node} GPU{'s' if gpus_per_node != 1 else ''}; valid indices are 0..{gpus_per_node - 1}",
                    )
                    ok = False
                elif index in owner:
                    self.error(
                        GPU_INDEX_TWICE,
                        epath + ("gpus", j),
                        f"GPU {index} already has a layout (perGpu[{owner[index]}]); each GPU index may appear once",
                    )
                    ok = False
                owner.setdefault(index, k)
            if ("layout" in entry) == ("preset" in entry):
                self.error(PER_GPU_FORM, epath, "give exactly one of `layout` or `preset` for these GPUs")
                ok = False
                continue
            layout = self.mig_layout(epath, entry, model)
            if layout is None:
                ok = False
                continue
            groups.append(m.MigGroup(tuple(sorted(set(entry["gpus"]))), layout, entry.get("preset")))
        if not ok:
            return None
        self.per_gpu.append((path, gpus_per_node, tuple(groups)))
        return tuple(groups)

    def mig_layout(self, path: tuple, raw: dict, model) -> dict[str, int] | None:
        from gpupool.gpu.mig import check_layout, compute_instance_split, resolve_preset

        if "preset" in raw:
            layout = resolve_preset(model, raw["preset"])
            if layout is None:
                presets = list(model.presets)
                self.error(
                    UNKNOWN_PRESET,
                    path + ("preset",),
                    f"is not an NVIDIA preset for {model.name}{did_you_mean(raw['preset'], presets)}; "
                    f"presets: {one_of(presets, 30)}",
                )
            return layout
        layout = raw["layout"]
        ok = True
        for profile in layout:
            whole = compute_instance_split(profile)
            if whole is not None:
                self.error(
                    COMPUTE_INSTANCE,
                    path + ("layout", profile),
                    "splits a GPU instance into compute instances, which the device plugin cannot advertise; use the "
                    f'whole-instance profile "{whole}"',
                    key=True,
                )
                ok = False
            elif profile not in model.profiles:
                self.error(
                    UNKNOWN_PROFILE,
                    path + ("layout", profile),
                    "is not a MIG profile of "
                    f"{model.name}{did_you_mean(profile, model.profiles)}; valid profiles: "
                    f"{one_of(model.profiles, 30)}",
                    key=True,
                )
                ok = False
        if not ok:
            return None
        if not any(layout.values()):
            self.error(
                ALL_ZERO,
                path + ("layout",),
                "every count is 0: give at least one instance, or remove mig to keep whole GPUs",
            )
            return None
        fit = check_layout(model, layout)
        for warning in fit.warnings:
            self.warn(LAYOUT_FIT, path + ("layout",), warning)
        if not fit.ok:
            self.error(LAYOUT_FIT, path + ("layout",), f"does not fit one {model.name}: " + "; ".join(fit.reasons))
            return None
        return {k: v for k, v in layout.items() if v}

    # -- tenants -----------------------------------------------------------------------------
    def tenants(
        self, tiers: dict[str, m.Tier | None], pools: dict[str, m.NodePool]
    ) -> dict[str, tuple[m.Tenant, tuple]]:
        out: dict[str, tuple[m.Tenant | None, tuple]] = {}
        raw = self.data.get("tenants")
        if not isinstance(raw, list):
            return {}
        advertisers = _advertisers(pools)
        for i, t in enumerate(raw):
            path = ("tenants", i)
            if not isinstance(t, dict) or not self.usable(path):
                continue
            name = t["name"]
            if name in out:
                first = self.loaded.source.value(out[name][1])
                self.error(
                    DUPLICATE_TENANT,
                    path + ("name",),
                    "duplicate tenant name (first defined in "
                    f"{first.file} line {first.line}); tenant names are namespace names and must be unique",
                )
                continue
            ok = True
            tier = tiers.get(t["tier"])
            if t["tier"] not in tiers:
                self.error(
                    UNKNOWN_TIER,
                    path + ("tier",),
                    f"unknown tier{did_you_mean(t['tier'], tiers)}; defined tiers: {one_of(tiers)}",
                )
                ok = False
            gpus = dict(t.get("gpus", {}))
            for resource in gpus:
                rpath = path + ("gpus", resource)
                pools_for = advertisers.get(resource)
                if not pools_for:
                    if self.pools_complete:
                        self.error(UNADVERTISED, rpath, _unadvertised(resource, advertisers), key=True)
                        ok = False
                    continue
                if tier is not None and tier.isolation == "dedicated":
                    shared = [p for p in pools_for if p.sharing.software_shared]
                    if shared:
                        how = shared[0].sharing.kind
                        fix = (
                            "; set renameToShared: true on that pool so shared GPUs get their own resource name"
                            if not shared[0].sharing.rename
                            else ""
                        )
                        self.error(
                            DEDICATED_SHARED,
                            rpath,
                            f'tier "{tier.name}" requires dedicated GPUs, but '
                            f'{resource} is supplied by pool "{shared[0].name}" ({how}), so its pods could '
                            f"share a GPU with other tenants{fix}",
                            key=True,
                        )
                        ok = False
            defaults = self.container_defaults(path, t.get("containerDefaults", {}))
            if defaults is None or not ok:
                out[name] = (None, path)  # reserve the name for duplicate detection
                continue
            out[name] = (
                m.Tenant(
                    name=name,
                    tier=t["tier"],
                    gpus=gpus,
                    compute={k: str(v) for k, v in t.get("compute", {}).items()},
                    container_defaults=defaults,
                    owners=tuple(t.get("owners", ())),
                    cost_center=t.get("costCenter"),
                    owner_role=t.get("ownerRole", "edit"),
                    labels=dict(t.get("labels", {})),
                    offboarded=t.get("offboarded", False),
                    source_file=self.loaded.source.value(path).file,
                    max_per_pod=dict(t.get("maxPerPod", {})),
                ),
                path,
            )
        return {k: (v[0], v[1]) for k, v in out.items() if v[0] is not None}

    def container_defaults(self, path: tuple, raw: dict) -> m.ContainerDefaults | None:
        base = m.ContainerDefaults()
        requests = {**base.requests, **{k: str(v) for k, v in raw.get("requests", {}).items()}}
        limits = {**base.limits, **{k: str(v) for k, v in raw.get("limits", {}).items()}}
        ok = True
        for key in ("cpu", "memory"):
            parsed = {}
            for part, values in (("requests", requests), ("limits", limits)):
                if key not in values:
                    continue  # no default limit unless the spec names one
                try:
                    parsed[part] = _quantity(values[key])
                except ValueError as exc:
                    self.error(QUANTITY, path + ("containerDefaults", part, key), str(exc))
                    ok = False
            if len(parsed) < 2:
                continue
            if parsed["requests"] > parsed["limits"] and key not in raw.get("requests", {}):
                requests[key] = limits[key]  # a default limit below gpupool's default request: request it all
                continue
            if parsed["requests"] > parsed["limits"]:
                self.error(
                    REQUEST_ABOVE_LIMIT,
                    path + ("containerDefaults",),
                    f"default {key} request "
                    f"{requests[key]} is above the default {key} limit {limits[key]}; a request must not "
                    "exceed its limit",
                )
                ok = False
        return m.ContainerDefaults(requests, limits) if ok else None


def _advertisers(pools: dict[str, m.NodePool]) -> dict[str, list[m.NodePool]]:
    out: dict[str, list[m.NodePool]] = {}
    for pool in pools.values():
        for name in pool.resources_per_node():
            out.setdefault(name, []).append(pool)
    return out


def _unadvertised(resource: str, advertisers: dict[str, list[m.NodePool]]) -> str:
    names = list(advertisers)
    hint = did_you_mean(resource, names)
    unshared = m.unshared_name(resource)
    if "+" in resource:
        hint = f' (the device plugin writes "+" as ".": "{resource.replace("+", ".")}")'
    elif m.shared_name(resource) in advertisers:
        pool = advertisers[m.shared_name(resource)][0]
        hint = (
            f' (pool "{pool.name}" shares its GPUs with renameToShared, so they are advertised as '
            f'"{m.shared_name(resource)}")'
        )
    elif unshared != resource and unshared in advertisers:
        hint = f' (no pool renames it to .shared; request "{unshared}")'
    return (
        f"no node pool advertises {resource}{hint}; under the cluster's MIG strategy and sharing renames "
        f"the pools advertise: {one_of(names, 30)}"
    )


def _known_name(gpu: str) -> str:
    from gpupool.gpu.models import resolve_gpu

    found = resolve_gpu(gpu).gpu
    return found.name if found is not None else gpu
