"""The MIG demand a spec's tenants put on one pool (`gpupool mig suggest --pool NAME SPEC`).

The demand is derived from the spec, per MIG resource the pool advertises:
- the total granted to (active) tenants when only this pool supplies the resource; when several pools supply
  it, this pool's share in proportion to its capacity (as `gpupool plan` attributes grants);
- with time-slicing (or MPS), divided by the replicas and rounded up: instances, not replicas, are placed.
Then `gpupool.gpu.suggest.suggest` runs exactly as in the explicit mode (same output), followed by a
comparison with the pool's current layout. `derive_demand` is the pure part (used by tests and the bench).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from gpupool.model import platform as m

if TYPE_CHECKING:
    from gpupool.gpu.mig import GpuModel


class SpecModeError(Exception):
    """A usage problem (unknown pool, not a MIG-capable GPU, conflicting arguments): exit 2."""


@dataclass
class DerivedDemand:
    pool: m.NodePool
    model: GpuModel
    demand: dict[str, int] = field(default_factory=dict)  # MIG profile -> instances
    whole_gpus: int = 0  # nvidia.com/gpu granted on this pool's MIG-disabled GPUs
    # (advertised resource, total granted, this pool's share in advertised units, physical units needed)
    rows: list[tuple[str, int, Fraction, int]] = field(default_factory=list)


def derive_demand(spec: m.Spec, pool_name: str) -> DerivedDemand:
    from gpupool.gpu.mig import catalog

    pool = next((p for p in spec.pools if p.name == pool_name), None)
    if pool is None:
        raise SpecModeError(f"no node pool {pool_name!r} in the spec; pools: {', '.join(p.name for p in spec.pools)}")
    model = catalog().resolve(pool.gpu_model)
    if model is None:
        from gpupool.gpu.models import mig_problem, resolve_gpu

        raise SpecModeError(f"pool {pool_name!r}: {mig_problem(resolve_gpu(pool.gpu_model))}")
    granted = spec.granted()
    capacity = spec.capacity()
    pool_capacity = pool.capacity()
    replicas = pool.sharing.replicas
    out = DerivedDemand(pool, model)
    by_resource = {p.resource_name: p.name for p in model.profiles.values()}
    for advertised in sorted(pool_capacity):
        physical = pool.physical_name(advertised)
        total = granted.get(advertised, 0)
        share = (
            Fraction(total * pool_capacity[advertised], capacity[advertised]) if capacity[advertised] else Fraction(0)
        )
        units = math.ceil(share / replicas)
        out.rows.append((advertised, total, share, units))
        if physical in by_resource:
            if units:
                out.demand[by_resource[physical]] = units
        else:
            out.whole_gpus += units
    return out


def current_nodes_needed(d: DerivedDemand) -> int:
    per_node = d.pool.physical_resources_per_node()
    need = {m.mig_resource(p): n for p, n in d.demand.items()}
    if d.whole_gpus:
        need[m.GPU] = d.whole_gpus
    return max([math.ceil(n / per_node[r]) for r, n in need.items() if per_node.get(r)] or [0])
