"""Node pools added or removed, and nodes joining or leaving one."""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.analysis.diff.kind import Kind
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
