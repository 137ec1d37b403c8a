"""Semantic validation: from schema-valid data to the validated model, with every problem located.

Checks run per section and skip only the items whose shape the schema already rejected, so one run
reports every error it can. The model is returned only when there are no errors: nothing is applied
from an invalid spec.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpupool.model import platform as m
from gpupool.spec.diagnostics import ERROR, WARNING, Report, SpecError, did_you_mean, one_of
from gpupool.spec.loader import LoadedSpec, load_spec
from gpupool.spec.paths import render_path
from gpupool.spec.quantity import parse_quantity

RESERVED_TIER_PREFIX = "system-"
_COMPUTE_INSTANCE_PROFILE = re.compile(r"^\d+c\.")
# Helm values gpupool derives from the spec; overriding them through `values` defeats plan-time checks.
MANAGED_VALUES = (("mig", "strategy"), ("migManager", "config"), ("devicePlugin", "config"))


@dataclass
class Result:
    loaded: LoadedSpec
    report: Report
    spec: m.Spec | None  # only when there are no errors: nothing is applied from an invalid spec
    partial: m.Spec | None = None  # the model of whatever did validate (for diffs of invalid specs)

    @property
    def ok(self) -> bool:
        return self.spec is not None


def validate_file(path: str | Path, *, cwd: Path | None = None) -> Result:
    loaded = load_spec(path, cwd=cwd)
    return validate_loaded(loaded)


def load_valid_spec(path: str | Path) -> m.Spec:
    """The model of a valid spec, or SpecError carrying every diagnostic."""
    result = validate_file(path)
    if result.spec is None:
        raise SpecError(result.report.sorted())
    return result.spec


def validate_loaded(loaded: LoadedSpec) -> Result:
    report = loaded.report
    if loaded.data is None:
        return Result(loaded, report, None)
    from gpupool.spec import schema

    bad = schema.check(loaded, report)
    checker = _Checker(loaded, report, bad)
    spec = checker.run()
    from gpupool.rules.registry import Context, run_rules

    run_rules(Context(loaded, report, spec, bad))
    return Result(loaded, report, spec if not report.errors else None, partial=spec)


def _has_bad(bad: set[tuple], prefix: tuple) -> bool:
    n = len(prefix)
    return any(p[:n] == prefix for p in bad)


class _Checker:
    def __init__(self, loaded: LoadedSpec, report: Report, bad: set[tuple]):
        self.loaded = loaded
        self.data = loaded.data
        self.report = report
        self.bad = bad
        # Relative paths in the spec are relative to the spec file (not to the label, which is relative to cwd).
        self.spec_dir = Path(loaded.file_path or loaded.path).parent
        # With a broken pool, what the cluster advertises is unknown: quota names are then not judged.
        self.pools_complete = self.usable(("nodePools",))

    # -- reporting helpers -------------------------------------------------------------------
    def error(self, path: tuple, message: str, *, key: bool = False) -> None:
        self._add(ERROR, path, message, key)

    def warn(self, path: tuple, message: str, *, key: bool = False) -> None:
        self._add(WARNING, path, message, key)

    def _add(self, severity: str, path: tuple, message: str, key: bool) -> None:
        where = self.loaded.source.key(path) if key else self.loaded.source.value(path)
        self.report.add(severity, where, render_path(path, self.data), message)

    def usable(self, prefix: tuple) -> bool:
        return not _has_bad(self.bad, prefix)

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> m.Spec | None:
        if not isinstance(self.data, dict):
            return None
        cluster = self.cluster()
        tiers = self.tiers()
        pools = self.pools(cluster)
        tenants = self.tenants(tiers, pools)
        over = self.oversubscription()
        spec = m.Spec(cluster or m.Cluster("unknown"), tuple(pools.values()),
                      tuple(t for t in tiers.values() if t is not None), tuple(t for t, _ in tenants.values()),
                      over, self.loaded.path)
        # Capacity is judged whenever every pool is known, even with errors elsewhere, so one run reports
        # all it can; tenants that failed their own checks are left out (that can only hide an overrun).
        if self.pools_complete and self.usable(("oversubscription",)):
            self.capacity(spec, tenants)
        if not self.report.errors:
            self.idle_pools(spec)
        return spec if cluster is not None else None

    # -- cluster -----------------------------------------------------------------------------
    def cluster(self) -> m.Cluster | None:
        raw = self.data.get("cluster")
        if not isinstance(raw, dict) or not self.usable(("cluster",)):
            return None
        op = raw.get("gpuOperator", {})
        chart_path = op.get("chartPath")
        if chart_path is not None:
            resolved = (self.spec_dir / chart_path)
            if not resolved.exists():
                self.error(("cluster", "gpuOperator", "chartPath"),
                           f'"{chart_path}" does not exist (relative to {self.spec_dir}); give a chart directory '
                           "or .tgz, or remove chartPath to use the NVIDIA Helm repository")
            chart_path = str(resolved)
        values = op.get("values", {})
        for keys in MANAGED_VALUES:
            node = values
            for k in keys:
                node = node.get(k) if isinstance(node, dict) else None
            if node is not None:
                self.warn(("cluster", "gpuOperator", "values") + keys,
                          f"overrides the {'.'.join(keys)} value gpupool derives from the spec; "
                          "plan-time checks no longer describe what the cluster will do")
        operator = m.GpuOperator(
            chart_version=op.get("chartVersion", m.DEFAULT_CHART_VERSION),
            repository=op.get("repository", m.DEFAULT_CHART_REPOSITORY),
            chart_path=chart_path,
            namespace=op.get("namespace", m.DEFAULT_OPERATOR_NAMESPACE),
            driver=op.get("driver", True),
            toolkit=op.get("toolkit", True),
            dcgm_exporter=op.get("dcgmExporter", True),
            mig_reboot=op.get("migRebootOnReconfigure", False),
            values=values,
        )
        return m.Cluster(raw["name"], raw.get("migStrategy", "mixed"), operator)

    def oversubscription(self) -> m.Oversubscription:
        raw = self.data.get("oversubscription")
        if not isinstance(raw, dict) or not self.usable(("oversubscription",)):
            return m.Oversubscription()
        return m.Oversubscription(float(raw.get("maxRatio", 1.0)),
                                  {k: float(v) for k, v in raw.get("perResource", {}).items()})

    # -- tiers -------------------------------------------------------------------------------
    def tiers(self) -> dict[str, m.Tier]:
        out: dict[str, m.Tier] = {}
        raw = self.data.get("tiers")
        if not isinstance(raw, list):
            return out
        priorities: dict[int, str] = {}
        for i, t in enumerate(raw):
            path = ("tiers", i)
            if not self.usable(path) or not isinstance(t, dict):
                if isinstance(t, dict) and isinstance(t.get("name"), str):
                    out.setdefault(t["name"], None)  # known name: tenants naming it are not blamed twice
                continue
            name = t["name"]
            if name.startswith(RESERVED_TIER_PREFIX):
                self.error(path + ("name",), f'"{name}" starts with "{RESERVED_TIER_PREFIX}", which Kubernetes '
                           "reserves for its own PriorityClasses; choose another name")
            if name in out:
                self.error(path + ("name",), f'duplicate tier "{name}"; tier names must be unique')
                continue
            if t["priority"] in priorities:
                self.warn(path + ("priority",), f'same priority as tier "{priorities[t["priority"]]}"; '
                          "tiers with equal priority cannot preempt each other")
            priorities.setdefault(t["priority"], name)
            out[name] = m.Tier(name, t["priority"], t.get("preemptionPolicy", "PreemptLowerPriority"),
                               t.get("isolation", "shared"), t.get("description", ""))
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
            if not isinstance(p, dict) or not all(self.usable(path + (k,)) for k in ("name", "gpu", "gpusPerNode")) \
                    or not all(k in p for k in ("name", "gpu", "gpusPerNode")):
                self.pools_complete = False
                continue
            if p["name"] in out:
                self.error(path + ("name",), f'duplicate node pool "{p["name"]}"; pool names must be unique')
                self.pools_complete = False  # what it advertises is not counted: do not blame tenants for it
                continue
            pool = self.pool(path, p, cluster, node_owner)
            if pool is not None:
                out[pool.name] = pool
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
        wants_mig = "mig" in sharing_raw
        if model is None and wants_mig:
            self.error(path + ("gpu",), f'"{p["gpu"]}" is not a MIG-capable GPU model gpupool knows'
                       f'{did_you_mean(p["gpu"], catalog().names())}; MIG models: {one_of(catalog().names(), 20)}')
            ok = False
        if not all(self.usable(path + (k,)) for k in ("nodes", "nodeSelector", "nodeCount")):
            # Which nodes the pool has is unknown: skip the node checks, still judge the sharing config.
            self.sharing(path + ("sharing",), sharing_raw, model, p["gpusPerNode"], cluster)
            return None
        nodes = list(p.get("nodes", []))
        selector = dict(p.get("nodeSelector", {}))
        count = p.get("nodeCount")
        if not nodes and not selector:
            self.error(path, "the pool selects no nodes: list `nodes` by name, or give the `nodeSelector` labels "
                             "its node group carries (with `nodeCount`)")
            ok = False
        if selector and not nodes and count is None:
            self.error(path, "`nodeCount` is required when nodes are chosen by `nodeSelector`: capacity checks "
                             "need to know how many nodes the group has")
            ok = False
        if count is not None and count < len(nodes):
            self.error(path + ("nodeCount",), f"nodeCount {count} is less than the {len(nodes)} nodes listed; "
                                              f"set it to at least {len(nodes)} or remove it")
            ok = False
        seen: set[str] = set()
        for j, node in enumerate(nodes):
            if node in seen:
                self.error(path + ("nodes", j), f'node "{node}" is listed twice in this pool')
                ok = False
            elif node in node_owner:
                self.error(path + ("nodes", j), f'node "{node}" is already in pool "{node_owner[node]}"; a node '
                                                "can carry only one MIG and one device-plugin config")
                ok = False
            seen.add(node)
            node_owner.setdefault(node, name)
        sharing = self.sharing(path + ("sharing",), sharing_raw, model, p["gpusPerNode"], cluster)
        if sharing is None or not ok or not self.usable(path):
            return None
        return m.NodePool(
            name=name,
            gpu_model=model.name if model else p["gpu"],
            gpus_per_node=p["gpusPerNode"],
            node_count=count if count is not None else len(nodes),
            nodes=tuple(nodes),
            node_selector=selector,
            sharing=sharing,
            price_per_gpu_hour=p.get("pricePerGpuHour"),
        )

    def sharing(self, path: tuple, raw: dict, model, gpus_per_node: int, cluster: m.Cluster | None) -> m.Sharing | None:
        ok = self.usable(path)
        groups: tuple[m.MigGroup, ...] = ()
        if "mig" in raw and self.usable(path + ("mig",)):
            if cluster is not None and cluster.mig_strategy != "mixed":
                self.error(path + ("mig",), f'MIG pools need cluster.migStrategy "mixed" (it is '
                           f'"{cluster.mig_strategy}"), so that each MIG profile is advertised as its own resource')
                ok = False
            if model is not None:
                groups = self.mig(path + ("mig",), raw["mig"], model, gpus_per_node)
                ok = ok and groups is not None
        ts = raw.get("timeSlicing")
        mps = raw.get("mps")
        if ts is not None and mps is not None:
            self.error(path + ("mps",), "a pool uses either timeSlicing or mps, not both; remove one of them")
            ok = False
        if mps is not None:
            if "mig" in raw:
                self.error(path + ("mps",), "MPS cannot share MIG instances (the device plugin rejects it: "
                           "\"sharing using MPS is not supported for MIG devices\"); use timeSlicing with MIG, "
                           "or MPS on a pool without mig")
                ok = False
            elif cluster is not None and cluster.mig_strategy == "mixed":
                self.error(path + ("mps",), 'MPS does not work with cluster.migStrategy "mixed": the GPU Operator '
                           "passes the strategy to every device plugin, which then refuses MPS (\"using "
                           "--mig-strategy=mixed is not supported with MPS\"); set cluster.migStrategy: none "
                           "(only possible without MIG pools) or use timeSlicing")
                ok = False
        if not ok:
            return None
        return m.Sharing(
            mig=groups or (),
            time_slicing=m.TimeSlicing(ts["replicas"], ts.get("renameToShared", True),
                                       ts.get("failRequestsGreaterThanOne", True)) if ts else None,
            mps=m.Mps(mps["replicas"], mps.get("renameToShared", True)) if mps else None,
        )

    def mig(self, path: tuple, raw: dict, model, gpus_per_node: int) -> tuple[m.MigGroup, ...] | None:
        forms = [k for k in ("layout", "preset", "perGpu") if k in raw]
        if len(forms) != 1:
            self.error(path, "give exactly one of `layout` (profile: count), `preset` (e.g. all-balanced) or "
                             f"`perGpu`; found {', '.join(forms) if forms else 'none'}")
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
                    self.error(epath + ("gpus", j), f"GPU index {index} does not exist on a node with "
                               f"{gpus_per_node} GPUs; valid indices are 0..{gpus_per_node - 1}")
                    ok = False
                elif index in owner:
                    self.error(epath + ("gpus", j), f"GPU {index} already has a layout (perGpu[{owner[index]}]); "
                                                    "each GPU index may appear once")
                    ok = False
                owner.setdefault(index, k)
            if ("layout" in entry) == ("preset" in entry):
                self.error(epath, "give exactly one of `layout` or `preset` for these GPUs")
                ok = False
                continue
            layout = self.mig_layout(epath, entry, model)
            if layout is None:
                ok = False
                continue
            groups.append(m.MigGroup(tuple(sorted(set(entry["gpus"]))), layout, entry.get("preset")))
        if ok:
            uncovered = sorted(set(range(gpus_per_node)) - set(owner))
            if uncovered:
                self.warn(path + ("perGpu",), f"GPUs {uncovered} have no MIG layout: they stay whole GPUs "
                                              "(MIG disabled) and are advertised as nvidia.com/gpu")
        return tuple(groups) if ok else None

    def mig_layout(self, path: tuple, raw: dict, model) -> dict[str, int] | None:
        from gpupool.gpu.mig import check_layout, resolve_preset

        if "preset" in raw:
            layout = resolve_preset(model, raw["preset"])
            if layout is None:
                presets = list(model.presets)
                self.error(path + ("preset",), f'"{raw["preset"]}" is not an NVIDIA preset for {model.name}'
                           f'{did_you_mean(raw["preset"], presets)}; presets: {one_of(presets, 30)}')
            return layout
        layout = raw["layout"]
        ok = True
        for profile in layout:
            if _COMPUTE_INSTANCE_PROFILE.match(profile):
                self.error(path + ("layout", profile), f'"{profile}" splits a GPU instance into compute instances, '
                           "which the device plugin cannot advertise; use the whole-instance profile "
                           f'"{_COMPUTE_INSTANCE_PROFILE.sub("", profile)}"', key=True)
                ok = False
            elif profile not in model.profiles:
                self.error(path + ("layout", profile), f'"{profile}" is not a MIG profile of {model.name}'
                           f'{did_you_mean(profile, model.profiles)}; valid profiles: {one_of(model.profiles, 30)}',
                           key=True)
                ok = False
        if not ok:
            return None
        if not any(layout.values()):
            self.error(path + ("layout",), "every count is 0: give at least one instance, or remove mig to keep whole GPUs")
            return None
        fit = check_layout(model, layout)
        for warning in getattr(fit, "warnings", []):
            self.warn(path + ("layout",), warning)
        if not fit.ok:
            self.error(path + ("layout",), f"does not fit one {model.name}: " + "; ".join(fit.reasons))
            return None
        return {k: v for k, v in layout.items() if v}

    # -- tenants -----------------------------------------------------------------------------
    def tenants(self, tiers: dict[str, m.Tier], pools: dict[str, m.NodePool]) -> dict[str, tuple[m.Tenant, tuple]]:
        out: dict[str, tuple[m.Tenant, tuple]] = {}
        raw = self.data.get("tenants")
        if not isinstance(raw, list):
            return out
        advertisers = self._advertisers(pools)
        for i, t in enumerate(raw):
            path = ("tenants", i)
            if not isinstance(t, dict) or not self.usable(path):
                continue
            name = t["name"]
            if name in out:
                first = self.loaded.source.value(out[name][1])
                self.error(path + ("name",), f'duplicate tenant "{name}" (first defined in {first.file} line '
                                             f"{first.line}); tenant names are namespace names and must be unique")
                continue
            ok = True
            tier = tiers.get(t["tier"])
            if t["tier"] not in tiers:
                self.error(path + ("tier",), f'unknown tier "{t["tier"]}"{did_you_mean(t["tier"], tiers)}; '
                           f"defined tiers: {one_of(tiers)}")
                ok = False
            gpus = dict(t.get("gpus", {}))
            for resource, count in gpus.items():
                rpath = path + ("gpus", resource)
                pools_for = advertisers.get(resource)
                if not pools_for:
                    if self.pools_complete:
                        self.error(rpath, self._unadvertised(resource, advertisers), key=True)
                        ok = False
                    continue
                if tier is not None and tier.isolation == "dedicated":
                    shared = [p for p in pools_for if p.sharing.software_shared]
                    if shared:
                        how = shared[0].sharing.kind
                        fix = ("; set renameToShared: true on that pool so shared GPUs get their own resource name"
                               if not shared[0].sharing.rename else "")
                        self.error(rpath, f'tier "{tier.name}" requires dedicated GPUs, but {resource} is supplied '
                                   f'by pool "{shared[0].name}" ({how}), so its pods could share a GPU with other '
                                   f"tenants{fix}", key=True)
                        ok = False
            defaults = self.container_defaults(path, t.get("containerDefaults", {}))
            compute = {k: str(v) for k, v in t.get("compute", {}).items()}
            if not t.get("owners"):
                self.warn(path, "no owners: nobody but cluster administrators can run workloads in this namespace; "
                                "add the groups that own it under owners")
            if not gpus and not t.get("offboarded"):
                self.warn(path, "no GPU quota: every GPU resource will be limited to 0 in this namespace")
            if defaults is None or not ok:
                out[name] = (None, path)  # reserve the name for duplicate detection
                continue
            tenant = m.Tenant(
                name=name, tier=t["tier"], gpus=gpus, compute=compute, container_defaults=defaults,
                owners=tuple(t.get("owners", ())), cost_center=t.get("costCenter"), labels=dict(t.get("labels", {})),
                offboarded=t.get("offboarded", False), source_file=self.loaded.source.value(path).file,
            )
            out[name] = (tenant, path)
        return {k: v for k, v in out.items() if v[0] is not None}

    def container_defaults(self, path: tuple, raw: dict) -> m.ContainerDefaults | None:
        base = m.ContainerDefaults()
        requests = {**base.requests, **{k: str(v) for k, v in raw.get("requests", {}).items()}}
        limits = {**base.limits, **{k: str(v) for k, v in raw.get("limits", {}).items()}}
        ok = True
        for key in ("cpu", "memory"):
            parsed = {}
            for part, values in (("requests", requests), ("limits", limits)):
                try:
                    parsed[part] = parse_quantity(values[key])
                except ValueError as exc:
                    self.error(path + ("containerDefaults", part, key), str(exc))
            if len(parsed) < 2:
                ok = False
                continue
            request, limit = parsed["requests"], parsed["limits"]
            if request > limit:
                self.error(path + ("containerDefaults",), f"default {key} request {requests[key]} is above the "
                           f"default {key} limit {limits[key]}; a request must not exceed its limit")
                ok = False
        return m.ContainerDefaults(requests, limits) if ok else None

    @staticmethod
    def _advertisers(pools: dict[str, m.NodePool]) -> dict[str, list[m.NodePool]]:
        out: dict[str, list[m.NodePool]] = {}
        for pool in pools.values():
            for name in pool.resources_per_node():
                out.setdefault(name, []).append(pool)
        return out

    @staticmethod
    def _unadvertised(resource: str, advertisers: dict[str, list[m.NodePool]]) -> str:
        names = list(advertisers)
        hint = did_you_mean(resource, names)
        if "+" in resource:
            hint = f' (the device plugin writes "+" as ".": "{resource.replace("+", ".")}")'
        elif resource + m.SHARED_SUFFIX in advertisers:
            pool = advertisers[resource + m.SHARED_SUFFIX][0]
            hint = (f' (pool "{pool.name}" shares its GPUs with renameToShared, so they are advertised as '
                    f'"{resource}{m.SHARED_SUFFIX}")')
        elif resource.endswith(m.SHARED_SUFFIX) and resource[: -len(m.SHARED_SUFFIX)] in advertisers:
            hint = f' (no pool renames it to .shared; request "{resource[: -len(m.SHARED_SUFFIX)]}")'
        return (f"no node pool advertises {resource}{hint}; under the cluster's MIG strategy and sharing renames "
                f"the pools advertise: {one_of(names, 30)}")

    # -- capacity ----------------------------------------------------------------------------
    def capacity(self, spec: m.Spec, tenants: dict[str, tuple[m.Tenant, tuple]]) -> None:
        capacity = spec.capacity()
        for resource, granted in spec.granted().items():
            supply = capacity.get(resource, 0)
            ratio = spec.oversubscription.ratio_for(resource)
            allowed = spec.oversubscription.allowed(resource, supply)
            if granted <= allowed:
                continue
            holders = sorted(((t.gpus[resource], t.name) for t in spec.active_tenants if t.gpus.get(resource)),
                             reverse=True)
            biggest = holders[0][1]
            shown = ", ".join(f"{n} {c}" for c, n in holders[:5]) + (", ..." if len(holders) > 5 else "")
            sources = ", ".join(f'{p.name} {p.node_count}x{p.resources_per_node()[resource]}'
                                for p in spec.pools if resource in p.resources_per_node())
            policy = (f"oversubscription allows {ratio:g}x" if ratio != 1 else "no oversubscription is allowed")
            self.error(tenants[biggest][1] + ("gpus", resource),
                       f"tenants are granted {granted} {resource} in total ({shown}) but the pools supply {supply} "
                       f"({sources}) and {policy}: {granted - allowed} too many; lower quotas, add nodes, or raise "
                       f'oversubscription.perResource["{resource}"]', key=True)
        for resource in spec.oversubscription.per_resource:
            if resource not in capacity:
                self.warn(("oversubscription", "perResource", resource),
                          f"no pool advertises {resource}; this policy has no effect", key=True)

    def idle_pools(self, spec: m.Spec) -> None:
        granted = spec.granted()
        for i, pool in enumerate(spec.pools):
            if not any(granted.get(r) for r in pool.resources_per_node()):
                path = next(("nodePools", k) for k, p in enumerate(self.data["nodePools"]) if p.get("name") == pool.name)
                self.warn(path, "no tenant is granted any resource this pool supplies; its GPUs would sit idle")
