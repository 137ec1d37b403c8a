"""Node pools added or removed, nodes joining or leaving one, and pools switching how their devices are handed out
(`allocation`: the device plugin or DRA, docs/explanation/dra.md)."""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.analysis.diff.kind import Kind
from gpupool.k8s import dra
from gpupool.model import platform as m


@dataclass(frozen=True)
class PoolChange:
    """A node pool added or removed, or nodes joining or leaving one (named nodes, or a selector's count)."""

    pool: str
    kind: Kind
    nodes_added: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    count_before: int = 0
    count_after: int = 0
    gpu_model: str = ""


def pool_changes(base: m.Spec | None, head: m.Spec | None) -> list[PoolChange]:
    if head is None:
        return []
    before = {p.name: p for p in (base.pools if base else ())}
    after = {p.name: p for p in head.pools}
    nodes_a = {n for p in after.values() for n in p.nodes}
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name), after.get(name)
        if a is None:
            assert b is not None
            gone = tuple(n for n in b.nodes if n not in nodes_a)
            out.append(PoolChange(name, Kind.REMOVED, (), gone, b.node_count, 0, b.gpu_model))
            continue
        added = tuple(n for n in a.nodes if n not in (b.nodes if b else ()))
        removed = tuple(n for n in (b.nodes if b else ()) if n not in a.nodes and n not in nodes_a)
        count_b = b.node_count if b and not b.nodes else 0
        count_a = a.node_count if not a.nodes else 0
        if b is None:
            out.append(PoolChange(name, Kind.ADDED, added, (), 0, count_a, a.gpu_model))
        elif added or removed or count_b != count_a:
            out.append(PoolChange(name, Kind.CHANGED, added, removed, count_b, count_a, a.gpu_model))
    return out


@dataclass(frozen=True)
class GrantAcross:
    """One tenant's grant of a name the pool serves, before and after the cutover, and the DRA class serving it."""

    tenant: str
    resource: str
    before: int
    after: int
    device_class: str


@dataclass(frozen=True)
class AllocationCutover:
    """A pool whose devices change hands: from the device plugin to DRA (or back). The device plugin stops (or
    starts) on its nodes, pods asking the pool's names are served through its DeviceClasses (or the plugin), and each
    tenant granted those names keeps its pod specs; `grants` lists each such grant before and after."""

    pool: str
    before: str
    after: str
    nodes: tuple[str, ...]
    node_count: int
    grants: tuple[GrantAcross, ...]
    # Whether gpupool installs NVIDIA's DRA driver on HEAD's side (cluster.draDriver.install; gpupool.k8s.dra_install).
    driver_installed: bool = False


def allocation_cutovers(base: m.Spec | None, head: m.Spec | None) -> list[AllocationCutover]:
    if base is None or head is None:
        return []
    before = {p.name: p for p in base.pools}
    grants_b = {t.name: t.gpus for t in base.tenants}
    grants_a = {t.name: t.gpus for t in head.tenants}
    out = []
    for pool in head.pools:
        old = before.get(pool.name)
        if old is None or old.allocation == pool.allocation:
            continue
        dra_side = pool if pool.dra else old
        classes = dra.pool_classes(dra_side)
        names = sorted(set(classes) | {old.advertised_name(r) for r in old.physical_resources_per_node()})
        rows = tuple(
            GrantAcross(t, r, grants_b.get(t, {}).get(r, 0), grants_a.get(t, {}).get(r, 0), classes.get(r, ""))
            for t in sorted(set(grants_b) | set(grants_a))
            for r in names
            if grants_b.get(t, {}).get(r, 0) or grants_a.get(t, {}).get(r, 0)
        )
        out.append(
            AllocationCutover(
                pool.name,
                old.allocation,
                pool.allocation,
                tuple(pool.nodes),
                pool.node_count,
                rows,
                head.cluster.dra_driver.install,
            )
        )
    return out
