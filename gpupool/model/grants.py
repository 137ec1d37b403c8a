"""What a tenant's quota grants in GPU-equivalents, as written: a fact of the validated spec.

One granted unit of an advertised resource weighs what one unit of it is in physical GPUs
(NodePool.unit_gpu_fraction), averaged over the pools that supply it by their capacity of it, since a quota
names the resource and not the pool (docs/explanation/chargeback.md). The capacity plan (gpupool.analysis.plan), the
recording rules' `gpupool:tenant_granted_gpu_equivalents` (gpupool.monitoring.rules) and `gpupool usage`
read these figures from here, so none of them has to run the whole plan for one number.

Exact (`Fraction`): the plan's arithmetic, so every reader gets the same figure to the last digit.
"""

from __future__ import annotations

from fractions import Fraction

from gpupool.model import platform as m


def unit_weights(spec: m.Spec) -> dict[str, Fraction]:
    """Advertised resource -> one granted unit in GPU-equivalents, averaged over its supplying pools by
    capacity; a resource no pool supplies (or supplies none of) has no entry."""
    capacity: dict[str, int] = {}
    gpus: dict[str, Fraction] = {}
    for pool in spec.pools:
        per_node = pool.resources_per_node()
        for physical in sorted(pool.physical_terms()):
            advertised = pool.advertised_name(physical)
            units = per_node[advertised] * pool.node_count
            capacity[advertised] = capacity.get(advertised, 0) + units
            gpus[advertised] = gpus.get(advertised, Fraction(0)) + units * pool.unit_gpu_fraction(advertised)
    return {r: gpus[r] / c for r, c in capacity.items() if c}


def tenant_grants(tenant: m.Tenant) -> dict[str, int]:
    """What the tenant's quota grants, by resource name: nothing once it is offboarded (its quota is 0)."""
    return {} if tenant.offboarded else dict(sorted(tenant.gpus.items()))


def granted_gpu_equivalents(spec: m.Spec, weights: dict[str, Fraction] | None = None) -> dict[str, Fraction]:
    """Tenant name -> its grants in GPU-equivalents as written (more than it is charged where a resource is
    oversubscribed; the plan scales the charge, not the grant). WEIGHTS: unit_weights(spec), if already made."""
    w = unit_weights(spec) if weights is None else weights
    return {
        t.name: sum((n * w.get(r, Fraction(0)) for r, n in tenant_grants(t).items()), Fraction(0)) for t in spec.tenants
    }
