"""What a change to a spec does, tenant first: pure computation from two models (no I/O, no printing).

`compute(base, head)` compares two validated specs (either may be None: a new stack, or a side that did not
validate) and returns a `SpecDiff`:
- tenants added, removed (with what happens to their namespace) and changed, with quota deltas;
- headroom per resource before and after (gpupool.analysis.plan);
- pools whose MIG layout changes, and the nodes MIG Manager will reconfigure (evicting their GPU workloads);
- device-plugin ConfigMap keys added, removed or changed (replicas before and after);
- the rendered Kubernetes objects (gpupool render) added, changed and removed, with a field-level summary.
Formatting lives in gpupool.cli.diff.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from gpupool.k8s import manifests
from gpupool.model import platform as m
from gpupool.analysis import plan as planmod
from gpupool.k8s import render


# -- result types --------------------------------------------------------------------------------

@dataclass(frozen=True)
class QuotaDelta:
    resource: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True)
class TenantChange:
    name: str
    kind: str  # "added" | "removed" | "changed"
    quotas: tuple[QuotaDelta, ...] = ()
    details: tuple[str, ...] = ()  # tier, cost centre, owners, offboarding
    namespace: str = ""  # what happens to the namespace when removed: "deleted" | "retained"
    tier: str = ""
    cost_center: str | None = None
    offboarded: bool = False
    retained_objects: tuple[str, ...] = ()  # removed tenants: rendered files left in the cluster, unmanaged
    deleted_objects: tuple[str, ...] = ()  # removed tenants: rendered files Pulumi deletes


@dataclass(frozen=True)
class Headroom:
    resource: str
    capacity_before: int | None
    capacity_after: int | None
    granted_before: int | None
    granted_after: int | None
    headroom_before: int | None
    headroom_after: int | None

    @property
    def changed(self) -> bool:
        return (self.capacity_before, self.granted_before, self.headroom_before) != \
            (self.capacity_after, self.granted_after, self.headroom_after)


@dataclass(frozen=True)
class MigChange:
    pool: str
    kind: str  # "changed" | "added" (a new MIG pool) | "nodes-added" (nodes joining an unchanged pool)
    config_before: str | None
    config_after: str | None
    layout_before: str
    layout_after: str
    nodes: tuple[str, ...]  # named nodes MIG Manager reconfigures
    node_selector: dict[str, str]  # for selector pools: every node matching it
    node_count: int
    reboot: bool


@dataclass(frozen=True)
class PluginChange:
    key: str
    kind: str  # "added" | "removed" | "changed"
    sharing_before: str | None
    sharing_after: str | None
    replicas_before: int | None
    replicas_after: int | None
    pools_before: tuple[str, ...]
    pools_after: tuple[str, ...]


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any


@dataclass(frozen=True)
class ObjectChange:
    file: str
    kind: str  # "added" | "removed" | "changed"
    object_kind: str
    object_name: str  # namespace/name or name
    fields: tuple[FieldChange, ...] = ()
    retained: bool = False  # removed but retainOnDelete: stays in the cluster, unmanaged
    patch: bool = False


@dataclass
class SpecDiff:
    tenants: list[TenantChange] = field(default_factory=list)
    headroom: list[Headroom] = field(default_factory=list)
    mig: list[MigChange] = field(default_factory=list)
    plugin: list[PluginChange] = field(default_factory=list)
    pool_plugin_keys: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # pool, key before/after
    objects: list[ObjectChange] = field(default_factory=list)
    head_ok: bool = True  # every resource has non-negative headroom in HEAD

    @property
    def evicting(self) -> list[MigChange]:
        return list(self.mig)

    @property
    def retained_namespaces(self) -> list[TenantChange]:
        return [t for t in self.tenants if t.kind == "removed" and t.namespace == "retained"]

    @property
    def empty(self) -> bool:
        return not (self.tenants or self.mig or self.plugin or self.objects or self.pool_plugin_keys
                    or any(h.changed for h in self.headroom))


# -- tenants -------------------------------------------------------------------------------------

def _effective(t: m.Tenant) -> dict[str, int]:
    """What the quota enforces: an offboarded tenant's quota is 0 everywhere."""
    return {} if t.offboarded else dict(t.gpus)


def tenant_changes(base: m.Spec | None, head: m.Spec | None) -> list[TenantChange]:
    before = {t.name: t for t in (base.tenants if base else ())}
    after = {t.name: t for t in (head.tenants if head else ())}
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if b is None:
            quotas = tuple(QuotaDelta(r, 0, n) for r, n in sorted(_effective(a).items()))
            out.append(TenantChange(name, "added", quotas, tier=a.tier, cost_center=a.cost_center,
                                    offboarded=a.offboarded))
        elif a is None:
            quotas = tuple(QuotaDelta(r, n, 0) for r, n in sorted(_effective(b).items()) if n)
            out.append(TenantChange(name, "removed", quotas, namespace="deleted" if b.offboarded else "retained",
                                    tier=b.tier, cost_center=b.cost_center, offboarded=b.offboarded))
        else:
            eb, ea = _effective(b), _effective(a)
            quotas = tuple(QuotaDelta(r, eb.get(r, 0), ea.get(r, 0)) for r in sorted(set(eb) | set(ea))
                           if eb.get(r, 0) != ea.get(r, 0))
            details = []
            if b.offboarded != a.offboarded:
                details.append("offboarded: quota set to 0; removing it from the spec will then delete its namespace"
                               if a.offboarded else "no longer offboarded: quota restored")
            if b.tier != a.tier:
                details.append(f"tier {b.tier} → {a.tier}")
            if b.cost_center != a.cost_center:
                details.append(f"cost centre {b.cost_center or '-'} → {a.cost_center or '-'}")
            if tuple(b.owners) != tuple(a.owners):
                added = [o for o in a.owners if o not in b.owners]
                removed = [o for o in b.owners if o not in a.owners]
                details.append("owners " + ", ".join([f"+{o}" for o in added] + [f"-{o}" for o in removed]))
            if dict(b.compute) != dict(a.compute):
                details.append("compute quota " + ", ".join(
                    f"{k} {b.compute.get(k, '-')} → {a.compute.get(k, '-')}"
                    for k in sorted(set(b.compute) | set(a.compute)) if b.compute.get(k) != a.compute.get(k)))
            if b.container_defaults != a.container_defaults:
                details.append("container defaults changed")
            if dict(b.labels) != dict(a.labels):
                details.append("namespace labels changed")
            if quotas or details:
                out.append(TenantChange(name, "changed", quotas, tuple(details), tier=a.tier,
                                        cost_center=a.cost_center, offboarded=a.offboarded))
    return out


# -- headroom ------------------------------------------------------------------------------------

def headroom_changes(base_plan: planmod.CapacityPlan | None, head_plan: planmod.CapacityPlan | None) -> list[Headroom]:
    b = {r.resource: r for r in (base_plan.resources if base_plan else ())}
    a = {r.resource: r for r in (head_plan.resources if head_plan else ())}
    out = []
    for name in sorted(set(b) | set(a)):
        rb, ra = b.get(name), a.get(name)
        out.append(Headroom(name, rb and rb.capacity, ra and ra.capacity, rb and rb.granted, ra and ra.granted,
                            rb and rb.headroom, ra and ra.headroom))
    return out


# -- MIG -----------------------------------------------------------------------------------------

def layout_text(pool: m.NodePool | None) -> str:
    if pool is None or not pool.sharing.mig:
        return "MIG disabled"
    parts = []
    for g in pool.sharing.mig:
        body = g.preset or " + ".join(f"{p}×{n}" for p, n in sorted(g.layout.items()))
        if len(g.gpus) == pool.gpus_per_node:
            parts.append(body)
        else:
            word = "GPU" if len(g.gpus) == 1 else "GPUs"
            parts.append(f"{word} {manifests.gpu_ranges(g.gpus).replace('+', ',')}: {body}")
    return "; ".join(parts)


def _mig_by_pool(built: manifests.Plan | None) -> dict[str, str]:
    """pool -> mig-parted config name (MIG-capable pools only), as manifests.build derived it."""
    if built is None:
        return {}
    return {pool: c["migConfig"] for pool, c in built.pool_configs.items() if c["migConfig"]}


def _plugin_by_pool(built: manifests.Plan | None) -> tuple[dict[str, str], dict[str, str]]:
    """(device-plugin ConfigMap data, pool -> key), as manifests.build derived them."""
    if built is None:
        return {}, {}
    data = next(o for o in built.objects if o.name == "device-plugin-config").manifest["data"]
    return data, {pool: c["devicePluginConfig"] for pool, c in built.pool_configs.items()}


def mig_changes(base: m.Spec | None, head: m.Spec | None, built_b: manifests.Plan | None,
                built_a: manifests.Plan | None) -> list[MigChange]:
    if head is None:
        return []
    cfg_a = _mig_by_pool(built_a)
    cfg_b = _mig_by_pool(built_b)
    pools_b = {p.name: p for p in (base.pools if base else ())}
    # What each named node was configured as before, whichever pool it was in.
    node_cfg_b: dict[str, str | None] = {}
    for p in (base.pools if base else ()):
        for n in p.nodes:
            node_cfg_b[n] = cfg_b.get(p.name)
    reboot = head.cluster.operator.mig_reboot
    out = []
    for pool in head.pools:
        after = cfg_a.get(pool.name)
        if after is None:
            continue  # not MIG-capable: MIG Manager does not touch it
        old = pools_b.get(pool.name)
        before = cfg_b.get(pool.name) if old else None
        if pool.nodes:
            nodes = tuple(n for n in pool.nodes if node_cfg_b.get(n, "<new>") != after)
            if not nodes:
                continue
            if old is not None and before == after:
                kind = "nodes-added"
            else:
                kind = "added" if old is None else "changed"
            if kind == "added" and after == manifests.MIG_DISABLED and all(n not in node_cfg_b for n in nodes):
                continue  # a new non-MIG pool of new nodes: MIG stays off, nothing to reconfigure
            out.append(MigChange(pool.name, kind, before, after, layout_text(old), layout_text(pool), nodes, {},
                                 len(nodes), reboot))
        else:
            if old is not None and before == after:
                continue
            if old is None and after == manifests.MIG_DISABLED:
                continue
            out.append(MigChange(pool.name, "added" if old is None else "changed", before, after, layout_text(old),
                                 layout_text(pool), (), dict(pool.node_selector), pool.node_count, reboot))
    return out


# -- device plugin -------------------------------------------------------------------------------

def _plugin_summary(text: str | None) -> tuple[str | None, int | None]:
    if text is None:
        return None, None
    doc = yaml.safe_load(text) or {}
    sharing = doc.get("sharing") or {}
    for kind, label in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        if kind in sharing:
            res = sharing[kind].get("resources") or []
            return label, (res[0].get("replicas") if res else None)
    return "exclusive", 1


def plugin_changes(built_b: manifests.Plan | None,
                   built_a: manifests.Plan | None) -> tuple[list[PluginChange], list[tuple]]:
    data_b, by_pool_b = _plugin_by_pool(built_b)
    data_a, by_pool_a = _plugin_by_pool(built_a)
    out = []
    for key in sorted(set(data_b) | set(data_a)):
        tb, ta = data_b.get(key), data_a.get(key)
        if tb == ta:
            continue
        kind = "added" if tb is None else "removed" if ta is None else "changed"
        sb, rb = _plugin_summary(tb)
        sa, ra = _plugin_summary(ta)
        out.append(PluginChange(key, kind, sb, sa, rb, ra,
                                tuple(sorted(p for p, k in by_pool_b.items() if k == key)),
                                tuple(sorted(p for p, k in by_pool_a.items() if k == key))))
    moved = [(p, by_pool_b.get(p), by_pool_a.get(p)) for p in sorted(set(by_pool_b) & set(by_pool_a))
             if by_pool_b.get(p) != by_pool_a.get(p)]
    return out, moved


# -- rendered objects ----------------------------------------------------------------------------

def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            plain = key.replace("-", "").replace("_", "").isalnum()
            out.update(_flatten(v, f"{prefix}.{key}" if plain and prefix else key if plain else f'{prefix}["{key}"]'))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def field_changes(before: dict, after: dict) -> tuple[FieldChange, ...]:
    fb, fa = _flatten(before), _flatten(after)
    return tuple(FieldChange(p, fb.get(p), fa.get(p)) for p in sorted(set(fb) | set(fa)) if fb.get(p) != fa.get(p))


def _object_name(manifest: dict) -> str:
    meta = manifest.get("metadata", {})
    return f"{meta['namespace']}/{meta.get('name', '')}" if meta.get("namespace") else meta.get("name", "")


def object_changes(base_objects: list, head_objects: list) -> list[ObjectChange]:
    objs_b = {render.file_name(o): o for o in base_objects}
    objs_a = {render.file_name(o): o for o in head_objects}
    # A rendered file is its header (component, patch, retain flags) plus the dumped manifest, and the dump is
    # deterministic: comparing those inputs says whether the file changes, without dumping 10,000s of YAML docs.
    def same(x, y) -> bool:
        return (x.component, x.patch, x.retain_on_delete, x.manifest) == (y.component, y.patch, y.retain_on_delete,
                                                                          y.manifest)
    out = []
    for name in sorted(set(objs_b) | set(objs_a)):
        ob, oa = objs_b.get(name), objs_a.get(name)
        if oa is None:
            out.append(ObjectChange(name, "removed", ob.kind, _object_name(ob.manifest), retained=ob.retain_on_delete,
                                    patch=ob.patch))
        elif ob is None:
            out.append(ObjectChange(name, "added", oa.kind, _object_name(oa.manifest), patch=oa.patch))
        elif not same(ob, oa):
            out.append(ObjectChange(name, "changed", oa.kind, _object_name(oa.manifest),
                                    field_changes(ob.manifest, oa.manifest), patch=oa.patch))
    return out


# -- all of it -----------------------------------------------------------------------------------

def compute(base: m.Spec | None, head: m.Spec | None) -> SpecDiff:
    base_plan = planmod.compute(base) if base else None
    head_plan = planmod.compute(head) if head else None
    # Built once per side: configs, pool labels and objects all come from the same build.
    built_b = manifests.build(base) if base else None
    built_a = manifests.build(head) if head else None
    plugin, moved = plugin_changes(built_b, built_a)
    base_objects = built_b.objects if built_b else []
    head_objects = built_a.objects if built_a else []
    tenants = []
    for t in tenant_changes(base, head):
        if t.kind == "removed":
            mine = [o for o in base_objects if o.component == f"tenant:{t.name}"]
            t = replace(t, retained_objects=tuple(render.file_name(o) for o in mine if o.retain_on_delete),
                        deleted_objects=tuple(render.file_name(o) for o in mine if not o.retain_on_delete))
        tenants.append(t)
    return SpecDiff(
        tenants=tenants,
        headroom=headroom_changes(base_plan, head_plan),
        mig=mig_changes(base, head, built_b, built_a),
        plugin=plugin,
        pool_plugin_keys=moved,
        objects=object_changes(base_objects, head_objects),
        head_ok=head_plan.ok if head_plan else False,
    )
