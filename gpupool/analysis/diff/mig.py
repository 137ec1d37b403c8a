"""Pools whose MIG layout changes: the nodes MIG Manager reconfigures (evicting their GPU workloads), the
rollout's waves, who is affected, and each side's instances as the placement solver lays them out (solved here,
once, so that no presenter runs the solver)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from gpupool.analysis.diff.configs import mig_config_by_pool
from gpupool.analysis.diff.tenants import effective
from gpupool.gpu.mig import GpuModel, Placement, catalog, check_layout
from gpupool.k8s import manifests, rollout
from gpupool.model import platform as m


class MigKind(StrEnum):
    CHANGED = "changed"  # the pool's layout changes
    ADDED = "added"  # a new MIG pool
    NODES_ADDED = "nodes-added"  # the layout is unchanged; nodes join the pool (or move from another one)


# (GPU indices, profile -> count per GPU) per MIG group of a pool.
MigGroups = tuple[tuple[tuple[int, ...], tuple[tuple[str, int], ...]], ...]


@dataclass(frozen=True)
class PlacedGroup:
    """One MIG group: its GPUs, and where the placement solver puts its instances on each of them."""

    gpus: tuple[int, ...]
    placements: tuple[Placement, ...]


@dataclass(frozen=True)
class SliceLayout:
    """A side's MIG groups placed on its GPU model (the slice maps); no model: MIG off, or not in the catalog."""

    model: GpuModel | None = None
    groups: tuple[PlacedGroup, ...] = ()


@dataclass(frozen=True)
class MigChange:
    pool: str
    kind: MigKind
    config_before: str | None
    config_after: str | None
    layout_before: str
    layout_after: str
    nodes: tuple[str, ...]  # named nodes MIG Manager reconfigures
    node_selector: dict[str, str]  # for selector pools: every node matching it
    node_count: int
    reboot: bool
    gpu_model: str = ""
    gpu_model_before: str = ""
    # (GPU indices, profile -> count per GPU) per MIG group; () when MIG is off. For the slice maps.
    groups_before: MigGroups = ()
    groups_after: MigGroups = ()
    # The rollout (gpupool.k8s.rollout): nodes already in a pool before roll in waves of `at_once`, each wave
    # after the previous one reported success; new nodes (in no pool before) are labelled at once, in no wave
    # (gpupool.k8s.mig_step still restarts and waits for a MIG Manager already running on one).
    waves: tuple[tuple[str, ...], ...] = ()
    new_nodes: tuple[str, ...] = ()
    at_once: int = 0
    cordon: bool = False
    node_timeout_seconds: int = 0
    drain_timeout_seconds: int = 0  # 0: the pool does not drain before the relabel
    tenants: tuple[str, ...] = ()  # tenants granted a resource this pool supplies (before or after): evicted
    tiers: tuple[str, ...] = ()  # their tiers
    # Each side's layout as the solver places it, for the slice maps (not in the JSON: it repeats the groups).
    slices_before: SliceLayout = SliceLayout()
    slices_after: SliceLayout = SliceLayout()

    @property
    def evicted_nodes(self) -> tuple[str, ...]:
        """Named nodes that had a MIG config before and get another one: their GPU workloads are evicted."""
        return tuple(n for n in self.nodes if n not in self.new_nodes)

    @property
    def evicts(self) -> bool:
        """Does MIG Manager evict anything? Not when every node it configures is new (no workloads yet)."""
        return bool(self.evicted_nodes) or (not self.nodes and self.kind != MigKind.NODES_ADDED)

    @property
    def worst_case_seconds(self) -> int:
        """Each wave waits at most the node timeout twice before the next starts: for its MIG Manager to restart
        with the new config (gpupool.k8s.rollout step 1b), then for its success; and the drain timeout between."""
        return len(self.waves) * (2 * self.node_timeout_seconds + self.drain_timeout_seconds)


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


def _groups(pool: m.NodePool | None) -> MigGroups:
    if pool is None:
        return ()
    return tuple((tuple(g.gpus), tuple(sorted(g.layout.items()))) for g in pool.sharing.mig)


def _slices(pool: m.NodePool | None) -> SliceLayout:
    model = catalog().resolve(pool.gpu_model) if pool is not None and pool.gpu_model else None
    groups = _groups(pool)
    if not groups or model is None:
        return SliceLayout()
    placed = (PlacedGroup(gpus, tuple(check_layout(model, dict(layout)).placements)) for gpus, layout in groups)
    return SliceLayout(model, tuple(placed))


def _change(
    pool: m.NodePool, old: m.NodePool | None, kind: MigKind, configs: tuple[str | None, str], reboot: bool
) -> MigChange:
    """What every MIG change says: the configs and layouts before and after, and for a selector pool its nodes."""
    return MigChange(
        pool=pool.name,
        kind=kind,
        config_before=configs[0],
        config_after=configs[1],
        layout_before=layout_text(old),
        layout_after=layout_text(pool),
        nodes=(),
        node_selector=dict(pool.node_selector),
        node_count=pool.node_count,
        reboot=reboot,
        gpu_model=pool.gpu_model,
        gpu_model_before=old.gpu_model if old else "",
        groups_before=_groups(old),
        groups_after=_groups(pool),
        slices_before=_slices(old),
        slices_after=_slices(pool),
    )


def _named_change(
    pool: m.NodePool,
    old: m.NodePool | None,
    configs: tuple[str | None, str],
    node_cfg_b: dict[str, str | None],
    reboot: bool,
) -> MigChange | None:
    """A pool of named nodes: the nodes whose config changes, and the waves they roll in."""
    before, after = configs
    nodes = tuple(n for n in pool.nodes if node_cfg_b.get(n, "<new>") != after)
    if not nodes:
        return None
    if old is not None and before == after:
        kind = MigKind.NODES_ADDED
    else:
        kind = MigKind.ADDED if old is None else MigKind.CHANGED
    if kind == MigKind.ADDED and after == manifests.MIG_DISABLED and all(n not in node_cfg_b for n in nodes):
        return None  # a new non-MIG pool of new nodes: MIG stays off, nothing to reconfigure
    new_nodes = tuple(n for n in nodes if n not in node_cfg_b)
    # The program chains every node in waves; a node whose config is unchanged passes at once, so what really
    # waits is each wave's changed nodes, in order.
    rolled = tuple(
        w for w in (tuple(n for n in wave if n in nodes and n not in new_nodes) for wave in rollout.waves(pool)) if w
    )
    return replace(
        _change(pool, old, kind, configs, reboot),
        nodes=nodes,
        node_selector={},
        node_count=len(nodes),
        waves=rolled,
        new_nodes=new_nodes,
        at_once=max((len(w) for w in rolled), default=0),
        cordon=pool.rollout.cordon,
        node_timeout_seconds=pool.rollout.node_timeout_seconds,
        drain_timeout_seconds=pool.rollout.drain_timeout_seconds if pool.rollout.drains else 0,
    )


def _selector_change(
    pool: m.NodePool, old: m.NodePool | None, configs: tuple[str | None, str], reboot: bool
) -> MigChange | None:
    """A selector pool: gpupool cannot name its nodes, so no waves; every matching node is reconfigured."""
    before, after = configs
    if old is not None and before == after:
        return None
    if old is None and after == manifests.MIG_DISABLED:
        return None
    return _change(pool, old, MigKind.ADDED if old is None else MigKind.CHANGED, configs, reboot)


def mig_changes(
    base: m.Spec | None,
    head: m.Spec | None,
    built_b: manifests.DesiredObjects | None,
    built_a: manifests.DesiredObjects | None,
) -> list[MigChange]:
    if head is None:
        return []
    cfg_a = mig_config_by_pool(built_a)
    cfg_b = mig_config_by_pool(built_b)
    pools_b = {p.name: p for p in (base.pools if base else ())}
    # What each named node was configured as before, whichever pool it was in.
    node_cfg_b: dict[str, str | None] = {}
    for p in base.pools if base else ():
        for n in p.nodes:
            node_cfg_b[n] = cfg_b.get(p.name)
    reboot = head.cluster.operator.mig_reboot
    out = []
    for pool in head.pools:
        after = cfg_a.get(pool.name)
        if after is None:
            continue  # not MIG-capable: MIG Manager does not touch it
        old = pools_b.get(pool.name)
        configs = (cfg_b.get(pool.name) if old else None, after)
        if pool.nodes:
            change = _named_change(pool, old, configs, node_cfg_b, reboot)
        else:
            change = _selector_change(pool, old, configs, reboot)
        if change is not None:
            out.append(change)
    return out


def with_evicted_tenants(base: m.Spec | None, head: m.Spec, change: MigChange) -> MigChange:
    """The tenants (and their tiers) granted a resource the re-laid-out pool supplies, before or after."""
    pools = [p for s in (base, head) if s for p in s.pools if p.name == change.pool]
    resources = {r for p in pools for r in p.resources_per_node()}
    tenants = [t for s in (base, head) if s for t in s.tenants if set(effective(t)) & resources]
    names = tuple(sorted({t.name for t in tenants}))
    return replace(change, tenants=names, tiers=tuple(sorted({t.tier for t in tenants})))
