"""Headroom per resource before and after (gpupool.analysis.plan), counting quotas a removal leaves in force."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpupool.analysis import plan as planmod
from gpupool.model import platform as m


@dataclass(frozen=True)
class Headroom:
    resource: str
    capacity_before: int | None
    capacity_after: int | None
    granted_before: int | None
    granted_after: int | None
    headroom_before: int | None
    headroom_after: int | None
    allowed_before: int | None = None  # what the oversubscription policy allows in total (capacity × ratio)
    allowed_after: int | None = None
    retained_after: int = 0  # of granted_after: quotas of tenants removed without offboarding (still in force)

    @property
    def changed(self) -> bool:
        return (self.capacity_before, self.granted_before, self.headroom_before) != (
            self.capacity_after,
            self.granted_after,
            self.headroom_after,
        )


def headroom_changes(base_plan: planmod.CapacityPlan | None, head_plan: planmod.CapacityPlan | None) -> list[Headroom]:
    b = {r.resource: r for r in (base_plan.resources if base_plan else ())}
    a = {r.resource: r for r in (head_plan.resources if head_plan else ())}
    out = []
    for name in sorted(set(b) | set(a)):
        rb, ra = b.get(name), a.get(name)
        out.append(
            Headroom(
                name,
                rb.capacity if rb else None,
                ra.capacity if ra else None,
                rb.granted if rb else None,
                ra.granted if ra else None,
                rb.headroom if rb else None,
                ra.headroom if ra else None,
                rb.allowed if rb else None,
                ra.allowed if ra else None,
            )
        )
    return out


def retained_tenants(base: m.Spec | None, head: m.Spec | None) -> tuple[m.Tenant, ...]:
    """BASE tenants HEAD drops without offboarding: their quotas stay in the cluster (retainOnDelete)."""
    if base is None or head is None:
        return ()
    kept = {t.name for t in head.tenants}
    return tuple(t for t in base.tenants if t.name not in kept and not t.offboarded)


def with_retained(headroom: list[Headroom], retained: tuple[m.Tenant, ...]) -> list[Headroom]:
    return [
        replace(h, retained_after=sum(t.gpus.get(h.resource, 0) for t in retained)) if retained else h for h in headroom
    ]
