"""Suggest per-GPU MIG layouts that supply a demand (profile -> instances) on the fewest GPUs.

Why this shape: a GPU model has only a few dozen maximal single-GPU layouts, so the problem is a small integer
covering program  min sum(x_l)  s.t.  sum_l x_l * layout_l >= demand,  x integer >= 0  over those layouts.
HiGHS solves it to a proven optimum (branch and bound closes the gap to 0); the program has one variable per
non-dominated layout and one row per demanded profile whatever the counts are, so time and memory do not grow
with the demand (counts are only right-hand sides). The answer is kept as (layout, number of GPUs) pairs,
never one entry per GPU. `highspy` is imported inside the solver, so only `mig suggest` pays for it.
Demands no Kubernetes cluster could hold are refused before anything is solved (MAX_GPUS).
Every layout returned is re-checked with `gpupool.gpu.mig.check_layout`.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpupool.gpu.mig import GpuModel, check_layout, closest_profile, compute_instance_split, fits


@dataclass
class Suggestion:
    model: str
    demand: dict[str, int]
    layouts: list[tuple[dict[str, int], int]]  # distinct per-GPU layout -> number of GPUs using it
    gpus: int
    lower_bound: int  # resource bound: compute, memory, instance count, per-profile max
    supplied: dict[str, int]
    bound: int = 0  # the solver's proven lower bound (= gpus when optimal), at least lower_bound
    optimal: bool = False  # proven minimal by HiGHS (the branch-and-bound gap closed)
    solve_seconds: float = 0.0  # HiGHS wall time

    def per_gpu(self) -> list[dict[str, int]]:
        """One layout per GPU, in order (GPUs sharing a layout are adjacent). Only for small answers (one
        node's GPUs): a huge demand's answer stays as (layout, count) pairs."""
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
    optimal: bool = True  # every per-node solve was proven optimal
    solve_seconds: float = 0.0  # HiGHS wall time over all the solves


# ---------------------------------------------------------------------------------------------- helpers


def _model(model: GpuModel | str) -> GpuModel:
    if isinstance(model, GpuModel):
        return model
    from gpupool.gpu.models import require_mig

    return require_mig(model)  # UnknownGpu is a ValueError


def _check_demand(model: GpuModel, demand: Mapping[str, int]) -> dict[str, int]:
    errors = []
    clean: dict[str, int] = {}
    for name, n in demand.items():
        if compute_instance_split(name) is not None:
            errors.append(f"{name} is a compute-instance split the device plugin cannot advertise")
        elif name not in model.profiles:
            guess = closest_profile(model, str(name))
            errors.append(
                f"{name} is not a MIG profile of {model.name}" + (f" (did you mean {guess}?)" if guess else "")
            )
        elif isinstance(n, bool) or not isinstance(n, int) or n < 0:
            errors.append(f"demand for {name} must be an integer >= 0, got {n!r}")
        elif n:
            clean[name] = n
    if errors:
        raise ValueError("; ".join(errors) + f". Valid profiles of {model.name}: {', '.join(model.profiles)}")
    return clean


@functools.cache
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
        grown = (v[:j] + (v[j] + 1,) + v[j + 1 :] for j in range(len(v)))
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


# ---------------------------------------------------------------------------------------------- solver

# Kubernetes supports clusters of up to 5,000 nodes, and the spec allows at most 64 GPUs per node: a demand
# whose resource lower bound exceeds this cannot be placed in any cluster gpupool manages, so it is refused
# instead of solved (the numbers then also stay far inside the solver's exact-integer range).
MAX_NODES = 5_000
MAX_GPUS_PER_NODE = 64
MAX_GPUS = MAX_NODES * MAX_GPUS_PER_NODE
TIME_LIMIT_S = 10.0  # the programs are tiny; this only guards against a solver pathology


class DemandTooLarge(ValueError):
    """The demand needs more GPUs than any one cluster can have."""


def _limit(model: GpuModel, need: Mapping[str, int], lb: int) -> None:
    if lb > MAX_GPUS:
        shown = lb if lb < 10**12 else f"about 10^{len(str(lb)) - 1}"
        raise DemandTooLarge(
            f"this demand needs at least {shown} {model.name} GPUs; no Kubernetes cluster holds "
            f"more than {MAX_GPUS:,} ({MAX_NODES:,} nodes × {MAX_GPUS_PER_NODE} GPUs), so it is "
            "not computed; check the counts"
        )


@dataclass
class _Solved:
    x: list[int]
    bound: int
    optimal: bool
    seconds: float


def _solve(cols: list[tuple[int, ...]], need: tuple[int, ...], time_limit: float = TIME_LIMIT_S) -> _Solved:
    """min sum(x) s.t. cols^T x >= need, x integer >= 0, with HiGHS; x is returned as exact integers.

    `highspy._Highs` is the plain solver binding: the `highspy.Highs` wrapper installs Python callbacks whose
    set-up prints a banner to the C stdout, which would corrupt our output. (Imported from `highspy._core`,
    where it is defined: highspy's own `__init__.pyi` leaves it out.)"""
    import highspy
    import numpy as np
    from highspy._core import _Highs

    n, m = len(cols), len(need)
    h = _Highs()
    for option, value in (
        ("output_flag", False),
        ("threads", 1),
        ("mip_rel_gap", 0.0),
        ("mip_abs_gap", 0.5),
        ("time_limit", float(time_limit)),
        ("random_seed", 0),
    ):
        h.setOptionValue(option, value)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, m
    lp.col_cost_ = np.ones(n)
    lp.col_lower_ = np.zeros(n)
    lp.col_upper_ = np.full(n, highspy.kHighsInf)
    lp.row_lower_ = np.array(need, dtype=float)
    lp.row_upper_ = np.full(m, highspy.kHighsInf)
    start, index, coef = [0], [], []
    for col in cols:
        for i, v in enumerate(col):
            if v:
                index.append(i)
                coef.append(float(v))
        start.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array(start, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(coef)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h.passModel(lp)
    t = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - t
    status = h.getModelStatus()
    info = h.getInfo()
    x = [max(0, round(v)) for v in h.getSolution().col_value] if info.primal_solution_status else [0] * n
    # Integer arithmetic decides feasibility, not the solver's tolerances: top up any shortfall (none expected)
    # with single-profile layouts, and then the answer is no longer claimed optimal.
    short = [max(0, need[i] - sum(c[i] * k for c, k in zip(cols, x))) for i in range(m)]
    topped = False
    for i, r in enumerate(short):
        if r:
            best = max(range(n), key=lambda j: cols[j][i])
            x[best] += -(-r // cols[best][i])
            topped = True
    bound = max(0, math.ceil(info.mip_dual_bound - 1e-6)) if math.isfinite(info.mip_dual_bound) else 0
    optimal = status == highspy.HighsModelStatus.kOptimal and not topped
    if optimal:
        bound = sum(x)
    return _Solved(x, min(bound, sum(x)), optimal, seconds)


# ---------------------------------------------------------------------------------------------- suggest


def suggest(model: GpuModel | str, demand: Mapping[str, int]) -> Suggestion:
    """Per-GPU layouts supplying at least `demand` (profile -> MIG instances) on the fewest GPUs (proven by
    HiGHS; `optimal` is False only if the solver hit its time limit).

    Raises ValueError for an unknown model or profile or a negative / non-integer count, and DemandTooLarge
    (a ValueError) for a demand no cluster could hold.
    """
    m = _model(model)
    need_map = _check_demand(m, demand)
    lb = _resource_bound(m, need_map)
    if not need_map:
        return Suggestion(m.name, {}, [], 0, 0, {}, 0, True)
    _limit(m, need_map, lb)
    names = [p for p in m.profiles if p in need_map]
    need = tuple(need_map[p] for p in names)
    cols = _nondominated([tuple(dict(L).get(p, 0) for p in names) for L in maximal_layouts(m)])
    cols = [c for c in cols if any(c)]
    solved = _solve(cols, need)
    layouts = []
    for col, n in sorted(((c, k) for c, k in zip(cols, solved.x) if k), key=lambda t: (-t[1], t[0])):
        layout = {p: v for p, v in zip(names, col) if v}
        fit = check_layout(m, layout)
        if not fit.ok:  # an internal error, never a user error: fail loudly
            raise AssertionError(f"suggested layout {layout} does not fit {m.name}: {fit.reasons}")
        layouts.append((layout, n))
    gpus = sum(solved.x)
    supplied = {p: sum(col[i] * k for col, k in zip(cols, solved.x)) for i, p in enumerate(names)}
    return Suggestion(
        m.name, dict(need_map), layouts, gpus, lb, supplied, max(lb, solved.bound), solved.optimal, solved.seconds
    )


def suggest_per_node(model: GpuModel | str, demand: Mapping[str, int], gpus_per_node: int) -> NodeSuggestion:
    """Identical nodes: the fewest nodes N such that one node's GPUs supply ceil(demand / N).

    A node pool has one MIG section for all its nodes, so every node gets the same per-GPU layouts. Whether
    N nodes suffice is monotone in N (ceil(demand / N) only shrinks, and so does the GPUs it needs), so N is
    found by bisection: a few dozen solves at most, whatever the demand.
    Raises ValueError when no single node layout can carry every profile (e.g. 7g + 4g on 1-GPU nodes).
    """
    m = _model(model)
    if not isinstance(gpus_per_node, int) or isinstance(gpus_per_node, bool) or gpus_per_node < 1:
        raise ValueError(f"gpus per node must be a positive integer, got {gpus_per_node!r}")
    need = _check_demand(m, demand)
    if not need:
        return NodeSuggestion(m.name, {}, gpus_per_node, 0, [], {})
    free = suggest(m, need)
    seconds = [free.solve_seconds]

    def per_node(nodes: int) -> Suggestion:
        s = suggest(m, {p: -(-n // nodes) for p, n in need.items()})
        seconds.append(s.solve_seconds)
        return s

    lo = max(1, -(-free.gpus // gpus_per_node))
    hi = max(lo, max(need.values()))  # at hi nodes each node needs at most one instance of each profile
    best = per_node(hi)
    if best.gpus > gpus_per_node:
        raise ValueError(
            f"one {gpus_per_node}-GPU node of {m.name} cannot carry one instance of every "
            f"profile in {need}; split the demand over node pools"
        )
    while lo < hi:
        mid = (lo + hi) // 2
        s = per_node(mid)
        if s.gpus <= gpus_per_node:
            hi, best = mid, s
        else:
            lo = mid + 1
    nodes, s = hi, best  # best is always the solve at hi
    per_gpu = s.per_gpu()  # at most gpus_per_node entries
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
    return NodeSuggestion(m.name, need, gpus_per_node, nodes, per_gpu, supplied, s.optimal, sum(seconds))


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
