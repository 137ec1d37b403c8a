"""Independent oracles for the MIG tests (no code shared with gpupool.gpu.mig beyond the catalog data).

Fit oracle: enumerate every arrangement of non-overlapping instances by scanning memory slots left to right
(each slot is either left empty or starts an instance whose allowed starts include it) and record the multiset
of profiles. A layout is placeable iff its multiset is one of those; the capacity rules are applied separately.
Loaded by the other test modules via importlib so it works whether or not `tests/` is a package.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
from pathlib import Path

from gpupool.gpu.mig import GpuModel, catalog


def load(name: str):
    """Import a sibling test helper module by file path."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_mig_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.cache
def arrangements(model_name: str) -> frozenset[tuple[tuple[str, int], ...]]:
    model = catalog().models[model_name]
    out: set[tuple[tuple[str, int], ...]] = set()

    def scan(slot: int, chosen: tuple[str, ...]) -> None:
        if slot >= model.memory_slices:
            out.add(tuple(sorted((p, chosen.count(p)) for p in set(chosen))))
            return
        scan(slot + 1, chosen)  # leave this slot empty
        for p in model.profiles.values():
            if slot in p.starts and slot + p.memory <= model.memory_slices:
                scan(slot + p.memory, chosen + (p.name,))

    scan(0, ())
    return frozenset(out)


def capacity_ok(model: GpuModel, layout: dict[str, int]) -> bool:
    prof = model.profiles
    return (
        all(n <= prof[p].max_count for p, n in layout.items())
        and sum(layout.values()) <= model.max_instances
        and sum(n for p, n in layout.items() if "+me" in p) <= 1
        and sum(prof[p].compute * n for p, n in layout.items()) <= model.compute_slices
    )


def oracle_fits(model: GpuModel, layout: dict[str, int]) -> bool:
    layout = {p: n for p, n in layout.items() if n}
    if not layout:
        return False
    key = tuple(sorted(layout.items()))
    return capacity_ok(model, layout) and key in arrangements(model.name)


@functools.cache
def feasible_layouts(model_name: str) -> tuple[dict[str, int], ...]:
    model = catalog().models[model_name]
    return tuple(dict(a) for a in sorted(arrangements(model_name)) if a and capacity_ok(model, dict(a)))


def check_placement(model: GpuModel, layout: dict[str, int], placements) -> None:
    """Assert a placement realises `layout`: allowed starts, right sizes, inside the GPU, no overlap."""
    counts: dict[str, int] = {}
    used: set[int] = set()
    for pl in placements:
        prof = model.profiles[pl.profile]
        assert pl.start in prof.starts, f"{pl.profile} at disallowed start {pl.start}"
        assert pl.size == prof.memory
        slots = set(range(pl.start, pl.start + pl.size))
        assert max(slots) < model.memory_slices
        assert not (slots & used), f"overlap at {sorted(slots & used)}"
        used |= slots
        counts[pl.profile] = counts.get(pl.profile, 0) + 1
    assert counts == {p: n for p, n in layout.items() if n}


def min_gpus_bruteforce(model: GpuModel, demand: dict[str, int], k_max: int = 4) -> int | None:
    """Exact minimum by trying every multiset of (projected, non-dominated) feasible layouts of size k."""
    names = [p for p, n in demand.items() if n]
    if not names:
        return 0
    cols = {tuple(L.get(p, 0) for p in names) for L in feasible_layouts(model.name)}
    cols = [c for c in cols if any(c) and not any(o != c and all(a >= b for a, b in zip(o, c)) for o in cols)]
    need = [demand[p] for p in names]
    for k in range(1, k_max + 1):
        for combo in itertools.combinations_with_replacement(cols, k):
            if all(sum(c[i] for c in combo) >= need[i] for i in range(len(names))):
                return k
    return None


def test_oracle_sanity():
    # The oracle itself must agree with the reference's worked examples (section 3.2, H100-80GB).
    h100 = catalog().models["H100-80GB"]
    assert oracle_fits(h100, {"1g.10gb": 4, "3g.40gb": 1})
    assert oracle_fits(h100, {"2g.20gb": 3, "1g.20gb": 1})
    assert not oracle_fits(h100, {"3g.40gb": 2, "1g.10gb": 1})
    assert not oracle_fits(h100, {"4g.40gb": 1, "2g.20gb": 2})
