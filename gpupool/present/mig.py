"""How MIG geometry is drawn for people."""

from __future__ import annotations

from collections.abc import Sequence

from gpupool.gpu.mig import GpuModel, Placement
from gpupool.present.text import safe


def slice_map(model: GpuModel, placements: Sequence[Placement]) -> str:
    """`[1g.10gb|1g.10gb|   3g.40gb   ]`-style map: one cell per memory slice, an instance spans its cells.
    Two lines, whatever the profile names hold (they are shown through `safe`)."""
    names = {p.start: safe(p.profile) for p in placements}
    width = max([len(n) for n in names.values()] + [3])
    cells: list[str] = []
    header: list[str] = []
    slot = 0
    by_start = {p.start: p for p in placements}
    while slot < model.memory_slices:
        p = by_start.get(slot)
        span = p.size if p else 1
        w = span * width + (span - 1)
        cells.append((names[slot] if p else "-").center(w))
        header.append(str(slot).ljust(w))
        slot += span
    return " " + " ".join(header).rstrip() + "\n[" + "|".join(cells) + "]"
