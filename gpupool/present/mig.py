"""How MIG geometry is drawn for people."""

from __future__ import annotations


def slice_map(model, placements) -> str:
    """`[1g.10gb|1g.10gb|   3g.40gb   ]`-style map: one cell per memory slice, an instance spans its cells."""
    width = max([len(p.profile) for p in placements] + [3])
    cells: list[str] = []
    header: list[str] = []
    slot = 0
    by_start = {p.start: p for p in placements}
    while slot < model.memory_slices:
        p = by_start.get(slot)
        span = p.size if p else 1
        w = span * width + (span - 1)
        cells.append((p.profile if p else "-").center(w))
        header.append(str(slot).ljust(w))
        slot += span
    return " " + " ".join(header).rstrip() + "\n[" + "|".join(cells) + "]"
