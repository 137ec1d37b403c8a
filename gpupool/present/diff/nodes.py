"""What happens to nodes: MIG re-layouts (evictions, the rollout's waves, slice maps) and pools' nodes."""

from __future__ import annotations

from gpupool.analysis.diff import Kind, MigChange, MigKind, SpecDiff
from gpupool.present.diff.words import counted, name_list
from gpupool.present.mig import slice_map
from gpupool.present.text import safe

EVICTS = "⚠ EVICTS GPU WORKLOADS"


def _duration(seconds: int) -> str:
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h".replace(".0 h", " h")


def mig_lines(d: SpecDiff) -> list[tuple[str, list[str]]]:
    """(the eviction sentence, its detail lines) per evicting MIG change."""
    out = []
    for c in d.evicting:
        if c.nodes:
            ev = c.evicted_nodes
            where = f"node{'s' if len(ev) != 1 else ''} {name_list(ev)}"
        else:
            sel = ", ".join(f"{k}={v}" for k, v in c.node_selector.items())
            where = f"every node matching {sel} ({c.node_count} expected)"
        what = {
            MigKind.CHANGED: f"{c.layout_before} → {c.layout_after}",
            MigKind.ADDED: f"new MIG pool: {c.layout_after}",
            MigKind.NODES_ADDED: f"nodes join the pool: {c.layout_after}",
        }[c.kind]
        cfg = f"mig.config {c.config_before or '(none)'} → {c.config_after}"
        reboot = "; nodes REBOOT (migRebootOnReconfigure)" if c.reboot else ""
        who = (
            f"; affected: {counted(len(c.tenants), 'tenant')} ({name_list(c.tenants)}), tier{'s' if len(c.tiers) != 1 else ''} "
            + ", ".join(c.tiers)
            if c.tenants
            else "; no tenant is granted what this pool supplies"
        )
        sentence = (
            f"{EVICTS} on {where} (pool {c.pool}): MIG Manager re-partitions the GPUs ({what}; {cfg}) "
            f"and evicts every GPU workload there first{reboot}{who}"
        )
        detail = []
        if c.waves:
            cordon = "cordoned, " if c.cordon else ""
            if c.drain_timeout_seconds:
                cordon += (
                    f"its GPU pods evicted (PodDisruptionBudgets respected; one not gone within "
                    f"{c.drain_timeout_seconds:,} s stops the rollout), "
                )
            per_wave = f"2 × {c.node_timeout_seconds:,} s"
            if c.drain_timeout_seconds:
                per_wave = f"({per_wave} + {c.drain_timeout_seconds:,} s)"
            detail.append(
                f"rollout: {counted(len(c.waves), 'wave')} of at most {counted(c.at_once, 'node')} unavailable at "
                f"once ({cordon}each waits for its MIG Manager to restart with the new config, then for "
                f"nvidia.com/mig.config.state=success, each at most {c.node_timeout_seconds:,} s; a failed node "
                f"stops the rollout); worst case {len(c.waves):,} × {per_wave} = "
                f"{_duration(c.worst_case_seconds)}: "
                + " → ".join(", ".join(w) for w in c.waves[:10])
                + (f" → … {len(c.waves) - 10:,} more waves" if len(c.waves) > 10 else "")
            )
        if c.new_nodes:
            detail.append(
                f"new node{'s' if len(c.new_nodes) != 1 else ''} {name_list(c.new_nodes)}: labelled at once, "
                "not in a wave; where MIG Manager already runs on one, its pod is restarted and its run waited for"
            )
        if not c.nodes:
            detail.append(
                "rollout: gpupool cannot name these nodes; the node-group tooling must roll them "
                "(cordon, relabel, wait for success, uncordon; see README)"
            )
        out.append((sentence, detail))
    return out


def slice_maps(c: MigChange) -> list[str]:
    """Before/after slice maps, one per MIG group (the GPUs of a group share one layout)."""

    out = []
    for title, side in (("before", c.slices_before), ("after", c.slices_after)):
        if side.model is None:
            out.append(f"{title}: MIG disabled (whole GPUs)")
            continue
        for group in side.groups:
            ids = ",".join(str(g) for g in group.gpus)
            out.append(f"{title}: {safe(side.model.name)} GPU {ids}")
            out.extend(slice_map(side.model, group.placements).splitlines())
    return out


def pool_lines(d: SpecDiff) -> list[str]:
    """Node pools added or removed, and nodes joining or leaving (new nodes have no workloads yet)."""
    joining = {c.pool: c for c in d.mig if not c.evicts}
    out = []
    for p in d.pools:
        layout = f" (MIG layout {joining[p.pool].layout_after}, applied at once)" if p.pool in joining else ""
        if p.kind == Kind.ADDED:
            n = counted(len(p.nodes_added), "node") if p.nodes_added else f"{p.count_after} selector nodes"
            out.append(f"+ pool {p.pool} added ({p.gpu_model}, {n}){layout}")
            continue
        if p.kind == Kind.REMOVED:
            gone = f": nodes {name_list(p.nodes_removed)} leave the platform" if p.nodes_removed else ""
            out.append(f"- pool {p.pool} removed{gone}; its GPUs no longer count as capacity")
            continue
        if p.nodes_added:
            out.append(f"+ pool {p.pool}: {name_list(p.nodes_added)} join (no workloads yet){layout}")
        if p.nodes_removed:
            out.append(
                f"- pool {p.pool}: {name_list(p.nodes_removed)} leave the platform (gpupool stops managing their "
                "labels; drain them before the node goes)"
            )
        if p.count_before != p.count_after:
            out.append(f"~ pool {p.pool}: expected nodes {p.count_before} → {p.count_after}")
    return out + cutover_lines(d)


def cutover_lines(d: SpecDiff) -> list[str]:
    """A pool switching `allocation`: what changes on its nodes, then each tenant grant it serves, before and after
    (a cutover keeps grants and pod specs; a grant changed in the same edit shows here too)."""
    out = []
    for c in d.cutovers:
        nodes = name_list(c.nodes) if c.nodes else f"its {c.node_count} selector nodes"
        if c.after == "dra":
            driver = (
                "which gpupool installs beside the GPU Operator; its kubelet plugin starts on a node once MIG Manager "
                "reports the layout there"
                if c.driver_installed
                else "which the cluster must run there first (cluster.draDriver.install: false)"
            )
            how = (
                f"the device plugin stops on {nodes}; pods asking the pool's names are served through its "
                f"DeviceClasses, by NVIDIA's DRA driver, {driver} (docs/explanation/dra.md)"
            )
        else:
            how = f"the device plugin starts on {nodes} and serves the pool's names again; its DeviceClasses go"
        out.append(f"~ pool {c.pool}: ⚠ allocation {c.before} → {c.after}: {how}; pod specs do not change")
        for g in c.grants:
            via = f" (DeviceClass {g.device_class})" if g.device_class else ""
            out.append(f"~ pool {c.pool}, tenant {g.tenant}: {g.resource} {g.before} → {g.after}{via}")
    return out
