"""`gpupool mig suggest --spec SPEC --pool NAME`: MIG layouts for what the tenants are granted on one pool.

The demand is derived from the spec, per MIG resource the pool advertises:
- the total granted to (active) tenants when only this pool supplies the resource; when several pools supply
  it, this pool's share in proportion to its capacity (as `gpupool plan` attributes grants);
- with time-slicing (or MPS), divided by the replicas and rounded up: instances, not replicas, are placed.
Then `gpupool.mig_suggest.suggest` runs exactly as in the explicit mode (same output), followed by a
comparison with the pool's current layout. `derive_demand` is the pure part (used by tests and the bench).
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction

from gpupool import model as m


class SpecModeError(Exception):
    """A usage problem (unknown pool, not a MIG-capable GPU, conflicting arguments): exit 2."""


@dataclass
class DerivedDemand:
    pool: m.NodePool
    model: object  # gpupool.mig.GpuModel
    demand: dict[str, int] = field(default_factory=dict)  # MIG profile -> instances
    whole_gpus: int = 0  # nvidia.com/gpu granted on this pool's MIG-disabled GPUs
    # (advertised resource, total granted, this pool's share in advertised units, physical units needed)
    rows: list[tuple[str, int, Fraction, int]] = field(default_factory=list)


def derive_demand(spec: m.Spec, pool_name: str) -> DerivedDemand:
    from gpupool.mig import catalog

    pool = next((p for p in spec.pools if p.name == pool_name), None)
    if pool is None:
        raise SpecModeError(f"no node pool {pool_name!r} in the spec; pools: {', '.join(p.name for p in spec.pools)}")
    model = catalog().resolve(pool.gpu_model)
    if model is None:
        raise SpecModeError(f"pool {pool_name!r} has {pool.gpu_model} GPUs, which are not MIG-capable "
                            f"(MIG models: {', '.join(catalog().names())})")
    granted = spec.granted()
    capacity = spec.capacity()
    pool_capacity = pool.capacity()
    replicas = pool.sharing.replicas
    out = DerivedDemand(pool, model)
    by_resource = {p.resource_name: p.name for p in model.profiles.values()}
    for advertised in sorted(pool_capacity):
        physical = advertised
        if pool.sharing.rename and advertised.endswith(m.SHARED_SUFFIX):
            physical = advertised[: -len(m.SHARED_SUFFIX)]
        total = granted.get(advertised, 0)
        share = Fraction(total * pool_capacity[advertised], capacity[advertised]) if capacity[advertised] else Fraction(0)
        units = math.ceil(share / replicas)
        out.rows.append((advertised, total, share, units))
        if physical in by_resource:
            if units:
                out.demand[by_resource[physical]] = units
        else:
            out.whole_gpus += units
    return out


def _fmt(x: Fraction) -> str:
    return str(int(x)) if x.denominator == 1 else f"{float(x):.2f}"


def _current_nodes_needed(d: DerivedDemand) -> int:
    per_node = d.pool.physical_resources_per_node()
    need = {m.mig_resource(p): n for p, n in d.demand.items()}
    if d.whole_gpus:
        need[m.GPU] = d.whole_gpus
    return max([math.ceil(n / per_node[r]) for r, n in need.items() if per_node.get(r)] or [0])


def run_spec(args: argparse.Namespace) -> int:
    from gpupool.commands import mig as migcmd
    from gpupool.diff import layout_text
    from gpupool.commands.common import valid_spec_or_report

    try:
        if not args.spec or not args.pool:
            raise SpecModeError("spec mode needs both --spec SPEC and --pool NAME")
        if args.gpu or args.demand:
            raise SpecModeError("give either --gpu MODEL PROFILE=COUNT... or --spec SPEC --pool NAME, not both")
        from pathlib import Path

        if not Path(args.spec).is_file():
            raise SpecModeError(f"{args.spec}: no such file")
        spec = valid_spec_or_report(args.spec, "invalid; fix it before deriving a MIG demand from it")
        if spec is None:
            return 1
        derived = derive_demand(spec, args.pool)
    except SpecModeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pool, model = derived.pool, derived.model
    print(f"demand derived from {args.spec}, pool {pool.name} ({pool.node_count}×{pool.gpus_per_node} {model.name}"
          f"{f', {pool.sharing.kind} ×{pool.sharing.replicas}' if pool.sharing.replicas != 1 else ''}):")
    for advertised, total, share, units in derived.rows:
        how = f"granted {total}"
        if share != total:
            how += f", this pool's share {_fmt(share)}"
        if pool.sharing.replicas != 1:
            how += f" / {pool.sharing.replicas} replicas"
        print(f"  {advertised}: {how} → {units}")
    if derived.whole_gpus:
        print(f"  plus {derived.whole_gpus} whole GPUs (MIG disabled) for {m.GPU}: not part of the MIG suggestion")
    print()
    per_node = args.gpus_per_node
    if per_node is None and not derived.whole_gpus:
        per_node = pool.gpus_per_node
    code = migcmd.cmd_suggest(argparse.Namespace(
        gpu=model.name, gpus_per_node=per_node, demand=[f"{p}={n}" for p, n in derived.demand.items()],
        spec=None, pool=None))
    if code != 0:
        return code
    from gpupool.mig_suggest import suggest

    s = suggest(model, derived.demand)
    now_nodes = _current_nodes_needed(derived)
    suggested = s.gpus + derived.whole_gpus
    print(f"\ncompared with the current layout ({layout_text(pool)}):")
    print(f"  pool now:        {pool.node_count} nodes × {pool.gpus_per_node} GPUs = {pool.total_gpus} GPUs")
    print(f"  needed now:      {now_nodes} nodes = {now_nodes * pool.gpus_per_node} GPUs with the current layout")
    print(f"  suggested:       {suggested} GPUs"
          + (f" ({s.gpus} MIG + {derived.whole_gpus} whole)" if derived.whole_gpus else "")
          + f", {math.ceil(suggested / pool.gpus_per_node)} nodes of {pool.gpus_per_node} GPUs")
    diff = now_nodes * pool.gpus_per_node - suggested
    if diff > 0:
        print(f"  the suggested layout needs {diff} fewer GPUs than the current one for the same grants")
    elif diff < 0:
        print(f"  the current layout packs this demand tighter by {-diff} GPUs (node granularity included)")
    else:
        print("  the current layout is as tight as the suggestion")
    return 0
