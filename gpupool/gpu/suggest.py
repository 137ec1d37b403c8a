"""Suggest per-GPU MIG layouts that supply a demand (profile -> instances) on the fewest GPUs.

Why this shape: a GPU model has only a few dozen maximal single-GPU layouts, so the problem is a small integer
covering program  min sum(x_l)  s.t.  sum_l x_l * layout_l >= demand,  x integer >= 0  over those layouts.
- Small demands (a handful of GPUs) are solved exactly by iterative-deepening search.
- Large demands solve the LP relaxation (a tiny simplex: one row per layout, one column per profile), keep
  floor(x), and cover the small residual exactly. The LP value is also a valid lower bound, tighter than the
  simple resource bound because it knows the geometry (e.g. 4g + 2g×2 never fits on one GPU).
Every layout returned is re-checked with `gpupool.gpu.mig.check_layout`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from gpupool.gpu.mig import GpuModel, catalog, check_layout, closest_profile, compute_instance_split, fits

_EPS = 1e-9


@dataclass
class Suggestion:
    model: str
    demand: dict[str, int]
    layouts: list[tuple[dict[str, int], int]]   # distinct per-GPU layout -> number of GPUs using it
    gpus: int
    lower_bound: int          # resource bound: compute, memory, instance count, per-profile max
    supplied: dict[str, int]
    lp_bound: int = 0         # ceil(LP relaxation): also a valid lower bound, at least lower_bound
    optimal: bool = False     # proven minimal (gpus meets a lower bound, or exhaustive search)

    def per_gpu(self) -> list[dict[str, int]]:
        """One layout per GPU, in order (GPUs sharing a layout are adjacent)."""
        return [dict(layout) for layout, n in self.layouts for _ in range(n)]


@dataclass
class NodeSuggestion:
    """Identical nodes of `gpus_per_node` GPUs; `per_gpu[i]` is the layout of GPU index i on every node."""
    model: str
    demand: dict[str, int]
    gpus_per_node: int
    nodes: int
    per_gpu: list[dict[str, int]]
    supplied: dict[str, int] = field(default_factory=dict)  # over all nodes


# ---------------------------------------------------------------------------------------------- helpers


def _model(model: GpuModel | str) -> GpuModel:
    if isinstance(model, GpuModel):
        return model
    found = catalog().resolve(model)
    if found is None:
        raise ValueError(f"unknown GPU model {model!r} (known: {', '.join(catalog().names())})")
    return found


def _check_demand(model: GpuModel, demand: Mapping[str, int]) -> dict[str, int]:
    errors = []
    clean: dict[str, int] = {}
    for name, n in demand.items():
        if compute_instance_split(name) is not None:
            errors.append(f"{name} is a compute-instance split the device plugin cannot advertise")
        elif name not in model.profiles:
            guess = closest_profile(model, str(name))
            errors.append(f"{name} is not a MIG profile of {model.name}"
                          + (f" (did you mean {guess}?)" if guess else ""))
        elif isinstance(n, bool) or not isinstance(n, int) or n < 0:
            errors.append(f"demand for {name} must be an integer >= 0, got {n!r}")
        elif n:
            clean[name] = n
    if errors:
        raise ValueError("; ".join(errors) + f". Valid profiles of {model.name}: {', '.join(model.profiles)}")
    return clean


@functools.lru_cache(maxsize=None)
def maximal_layouts(model: GpuModel) -> tuple[tuple[tuple[str, int], ...], ...]:
    """Every feasible single-GPU layout to which no further instance can be added (cached per model).

    Enumerated once by depth-first search over profile counts; feasibility is monotone (removing an
    instance never breaks a layout), so a branch stops at the first infeasible count.
    """
    names = list(model.profiles)
    feasible: list[tuple[int, ...]] = []

    def rec(i: int, counts: list[int]) -> None:
        if i == len(names):
            if any(counts):
                feasible.append(tuple(counts))
            return
        for n in range(model.profiles[names[i]].max_count + 1):
            counts.append(n)
            ok = n == 0 or fits(model, {p: c for p, c in zip(names, counts) if c})
            if ok:
                rec(i + 1, counts)
            counts.pop()
            if not ok:
                break

    rec(0, [])
    fs = set(feasible)
    maximal = []
    for v in feasible:
        grown = (v[:j] + (v[j] + 1,) + v[j + 1:] for j in range(len(v)))
        if not any(g in fs for g in grown):
            maximal.append(tuple((p, c) for p, c in zip(names, v) if c))
    return tuple(maximal)


def _resource_bound(model: GpuModel, demand: Mapping[str, int]) -> int:
    if not any(demand.values()):
        return 0
    prof = model.profiles
    compute = sum(prof[p].compute * n for p, n in demand.items())
    memory = sum(prof[p].memory * n for p, n in demand.items())
    instances = sum(demand.values())
    bounds = [
        math.ceil(compute / model.compute_slices),
        math.ceil(memory / model.memory_slices),
        math.ceil(instances / model.max_instances),
    ]
    bounds += [math.ceil(n / prof[p].max_count) for p, n in demand.items()]
    # At most one +me instance per GPU, whatever its profile.
    bounds.append(sum(n for p, n in demand.items() if prof[p].is_media_extension))
    return max(bounds)


def lower_bound(model: GpuModel | str, demand: Mapping[str, int]) -> int:
    """max(ceil(compute/budget), ceil(memory/slices), ceil(instances/max), per-profile ceil(count/max))."""
    m = _model(model)
    return _resource_bound(m, _check_demand(m, demand))


def _nondominated(vectors: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    uniq = sorted(set(vectors), key=lambda v: -sum(v))
    keep: list[tuple[int, ...]] = []
    for v in uniq:
        if not any(all(a >= b for a, b in zip(k, v)) for k in keep):
            keep.append(v)
    return keep


# ------------------------------------------------------------------------------------- exact small search


class _Budget(Exception):
    pass


def _exact_cover(columns: list[tuple[int, ...]], need: tuple[int, ...], k_max: int,
                 bound, budget: int = 200_000) -> list[tuple[int, ...]] | None:
    """Fewest columns (with repetition) covering `need`, using at most k_max; None if none within k_max.

    Iterative deepening from the lower bound. Branching is on the unmet profile with the fewest useful
    columns: any cover must contain a column supplying it, so the search is complete. Raises _Budget when the
    node budget runs out (the caller then falls back to a heuristic).
    """
    m = len(need)
    nodes = [0]
    failed: set[tuple[tuple[int, ...], int]] = set()

    def rec(r: tuple[int, ...], k: int) -> list[tuple[int, ...]] | None:
        if not any(r):
            return []
        if k == 0 or bound(r) > k or (r, k) in failed:
            return None
        nodes[0] += 1
        if nodes[0] > budget:
            raise _Budget
        best_p, best_cols = -1, None
        for p in range(m):
            if r[p]:
                cols = [c for c in columns if c[p]]
                if best_cols is None or len(cols) < len(best_cols):
                    best_p, best_cols = p, cols
        if not best_cols:
            failed.add((r, k))
            return None
        # Try the columns that cover most of what is left first; dedupe after capping to r.
        seen = set()
        ordered = []
        for c in best_cols:
            capped = tuple(min(a, b) for a, b in zip(c, r))
            if capped not in seen:
                seen.add(capped)
                ordered.append((capped, c))
        ordered = [(cap, c) for cap, c in ordered
                   if not any(o != cap and all(x >= y for x, y in zip(o, cap)) for o, _ in ordered)]
        ordered.sort(key=lambda t: -sum(t[0]))
        for capped, c in ordered:
            sub = rec(tuple(a - b for a, b in zip(r, capped)), k - 1)
            if sub is not None:
                return [c] + sub
        failed.add((r, k))
        return None

    for k in range(max(bound(need), 0), k_max + 1):
        found = rec(need, k)
        if found is not None:
            return found
    return None


# ------------------------------------------------------------------------------------------------- LP


def _lp_cover(columns: list[tuple[int, ...]], need: tuple[int, ...]) -> list[float]:
    """Fractional x >= 0 minimising sum(x) with sum x_l * columns[l] >= need.

    Solved through the dual  max need·y  s.t.  columns·y <= 1, y >= 0  with a condensed (Tucker) tableau:
    one row per layout, one column per nonbasic variable, so a pivot costs O(layouts × profiles). Bland's rule
    prevents cycling. The primal x_l is the shadow price of row l in the optimal tableau.
    """
    n, m = len(columns), len(need)
    T = [list(map(float, c)) for c in columns]      # rows: basic vars (initially slacks s_l)
    b = [1.0] * n
    c = [float(v) for v in need]                    # reduced costs of nonbasic vars (initially y_p)
    basic = [("s", i) for i in range(n)]
    nonbasic = [("y", j) for j in range(m)]
    for _ in range(10_000):
        enter = None
        for j in sorted(range(m), key=lambda j: nonbasic[j]):
            if c[j] > _EPS:
                enter = j
                break
        if enter is None:
            break
        row, best = None, None
        for i in range(n):
            if T[i][enter] > _EPS:
                ratio = b[i] / T[i][enter]
                if best is None or ratio < best - _EPS or (abs(ratio - best) <= _EPS and basic[i] < basic[row]):
                    row, best = i, ratio
        if row is None:  # unbounded dual: some profile no layout supplies (cannot happen after validation)
            raise ValueError("demand cannot be supplied by any layout")
        p = T[row][enter]
        Tr = T[row]
        new_r = [v / p for v in Tr]
        new_r[enter] = 1.0 / p
        br = b[row] / p
        for i in range(n):
            if i == row:
                continue
            Ti = T[i]
            f = Ti[enter]
            if f != 0.0:
                for j in range(m):
                    Ti[j] -= f * new_r[j]
                Ti[enter] = -f / p
                b[i] -= f * br
        ce = c[enter]
        for j in range(m):
            c[j] -= ce * new_r[j]
        c[enter] = -ce / p
        T[row], b[row] = new_r, br
        basic[row], nonbasic[enter] = nonbasic[enter], basic[row]
    x = [0.0] * n
    for j, (kind, idx) in enumerate(nonbasic):
        if kind == "s":
            x[idx] = max(0.0, -c[j])
    return x


# ---------------------------------------------------------------------------------------------- suggest


def _greedy(columns: list[tuple[int, ...]], need: tuple[int, ...], weights: Sequence[float]) -> list[tuple[int, ...]]:
    """Fallback: repeatedly take the layout covering the most remaining (weighted) demand."""
    out = []
    r = list(need)
    while any(r):
        best = max(columns, key=lambda col: sum(w * min(a, b) for w, a, b in zip(weights, col, r)))
        out.append(best)
        r = [max(0, a - b) for a, b in zip(r, best)]
    return out


def suggest(model: GpuModel | str, demand: Mapping[str, int], *, exact_up_to: int = 8) -> Suggestion:
    """Per-GPU layouts supplying at least `demand` (profile -> MIG instances) on as few GPUs as we can find.

    Raises ValueError for an unknown model or profile, or a negative / non-integer count.
    """
    m = _model(model)
    need_map = _check_demand(m, demand)
    lb = _resource_bound(m, need_map)
    if not need_map:
        return Suggestion(m.name, {}, [], 0, 0, {}, 0, True)
    names = [p for p in m.profiles if p in need_map]
    need = tuple(need_map[p] for p in names)
    cols = _nondominated([tuple(dict(L).get(p, 0) for p in names) for L in maximal_layouts(m)])
    cols = [c for c in cols if any(c)]

    def bound(r: tuple[int, ...]) -> int:
        return _resource_bound(m, {p: v for p, v in zip(names, r) if v})

    x = _lp_cover(cols, need)
    lp = sum(x)
    lp_bound = max(lb, math.ceil(lp - 1e-6))
    chosen: list[tuple[int, ...]] | None = None
    optimal = False

    if lp_bound <= exact_up_to:
        try:
            chosen = _exact_cover(cols, need, k_max=lp_bound + len(names), bound=bound)
            optimal = chosen is not None
        except _Budget:
            chosen = None
    if chosen is None:
        base = [math.floor(v + 1e-7) for v in x]
        chosen = _round_and_repair(cols, need, base, bound, x)
    gpus = len(chosen)
    if gpus <= lp_bound:
        optimal = True

    groups: dict[tuple[int, ...], int] = {}
    for col in chosen:
        groups[col] = groups.get(col, 0) + 1
    layouts = []
    for col, n in sorted(groups.items(), key=lambda t: (-t[1], t[0])):
        layout = {p: v for p, v in zip(names, col) if v}
        fit = check_layout(m, layout)
        if not fit.ok:  # an internal error, never a user error: fail loudly
            raise AssertionError(f"suggested layout {layout} does not fit {m.name}: {fit.reasons}")
        layouts.append((layout, n))
    supplied = {p: sum(col[i] for col in chosen) for i, p in enumerate(names)}
    return Suggestion(m.name, dict(need_map), layouts, gpus, lb, supplied, lp_bound, optimal)


def _round_and_repair(cols, need, base, bound, x) -> list[tuple[int, ...]]:
    """floor(LP) plus an exact cover of the residual; also tries giving back a GPU or two of the rounded part
    to the exact search, which often recovers the LP ceiling."""

    def residual(b):
        r = list(need)
        for col, k in zip(cols, b):
            if k:
                r = [a - k * v for a, v in zip(r, col)]
        return tuple(max(0, v) for v in r)

    def expand(b):
        return [col for col, k in zip(cols, b) for _ in range(k)]

    weights = [1.0] * len(need)
    best: list[tuple[int, ...]] | None = None
    frac = sum(1 for v, k in zip(x, base) if v - k > 1e-7)
    for give_back in range(0, 3):
        b = list(base)
        # remove `give_back` GPUs from the most used layouts
        for _ in range(give_back):
            i = max(range(len(b)), key=lambda i: b[i])
            if b[i] == 0:
                break
            b[i] -= 1
        r = residual(b)
        limit = frac + give_back + 1 if best is None else len(best) - sum(b) - 1
        if limit < 0:
            continue
        try:
            rest = _exact_cover(cols, r, k_max=limit, bound=bound, budget=20_000)
        except _Budget:
            rest = None
        if rest is None and best is None:
            rest = _greedy(cols, r, weights)
        if rest is not None:
            cand = expand(b) + rest
            if best is None or len(cand) < len(best):
                best = cand
    assert best is not None
    return best


def suggest_per_node(model: GpuModel | str, demand: Mapping[str, int], gpus_per_node: int) -> NodeSuggestion:
    """Identical nodes: find the fewest nodes N such that one node's GPUs supply ceil(demand / N).

    A node pool has one MIG section for all its nodes, so every node gets the same per-GPU layouts.
    Raises ValueError when no single node layout can carry every profile (e.g. 7g + 4g on 1-GPU nodes).
    """
    m = _model(model)
    if not isinstance(gpus_per_node, int) or isinstance(gpus_per_node, bool) or gpus_per_node < 1:
        raise ValueError(f"gpus per node must be a positive integer, got {gpus_per_node!r}")
    need = _check_demand(m, demand)
    if not need:
        return NodeSuggestion(m.name, {}, gpus_per_node, 0, [], {})
    nodes = max(1, math.ceil(suggest(m, need).gpus / gpus_per_node))
    while True:
        per_node = {p: math.ceil(n / nodes) for p, n in need.items()}
        s = suggest(m, per_node)
        if s.gpus <= gpus_per_node:
            per_gpu = s.per_gpu()
            # Spare GPUs repeat the layouts already chosen: extra supply beats idle MIG-enabled GPUs.
            i = 0
            while len(per_gpu) < gpus_per_node:
                per_gpu.append(dict(per_gpu[i]))
                i += 1
            # keep GPUs with the same layout adjacent so the perGpu index lists stay readable
            order = []
            for g in per_gpu:
                if g not in order:
                    order.append(g)
            per_gpu = [dict(g) for g in order for _ in range(per_gpu.count(g))]
            supplied = {p: nodes * sum(g.get(p, 0) for g in per_gpu) for p in need}
            return NodeSuggestion(m.name, need, gpus_per_node, nodes, per_gpu, supplied)
        if all(v <= 1 for v in per_node.values()):
            raise ValueError(f"one {gpus_per_node}-GPU node of {m.name} cannot carry one instance of every "
                             f"profile in {need}; split the demand over node pools")
        nodes += 1


# ----------------------------------------------------------------------------------------- spec fragment


def _flow(layout: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{p}: {n}" for p, n in layout.items()) + "}"


def _preset_for(model: GpuModel, layout: Mapping[str, int]) -> str | None:
    balanced = model.presets.get("all-balanced")
    return "all-balanced" if balanced is not None and dict(balanced) == dict(layout) else None


def spec_fragment(model: GpuModel | str, per_gpu: Sequence[Mapping[str, int]]) -> str:
    """The node pool's `sharing.mig` section for GPUs 0..len(per_gpu)-1 of every node.

    One layout for all GPUs -> `layout:`; otherwise `perGpu:` groups of GPU indices, where all-balanced is
    written as a preset reference and other layouts explicitly (clearer than `all-<profile>` names in review).
    """
    m = _model(model)
    distinct: list[dict[str, int]] = []
    for g in per_gpu:
        if dict(g) not in distinct:
            distinct.append(dict(g))
    lines = ["sharing:", "  mig:"]
    if len(distinct) == 1:
        lines.append(f"    layout: {_flow(distinct[0])}          # one layout for every GPU of the node")
        return "\n".join(lines) + "\n"
    lines.append("    perGpu:")
    for layout in distinct:
        idx = [i for i, g in enumerate(per_gpu) if dict(g) == layout]
        lines.append(f"      - gpus: [{', '.join(map(str, idx))}]")
        preset = _preset_for(m, layout)
        lines.append(f"        preset: {preset}" if preset else f"        layout: {_flow(layout)}")
    return "\n".join(lines) + "\n"
