"""The `queueing:` block of the spec (Kueue, kueue.x-k8s.io/v1beta2) as written: cohorts and per-tier policy.

What follows from it together with pools and grants (nominal quotas per flavor, what a tenant can be admitted)
is gpupool.model.queues. The block is opt-in: without it gpupool makes no Kueue object at all, so clusters
without Kueue's CRDs keep working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Limit = int | Mapping[str, int] | None  # one number for every resource, a number per resource, or none


@dataclass(frozen=True)
class QueuePolicy:
    """How the ClusterQueues of one tier's tenants share with their cohort (Kueue's own defaults, except
    reclaim: a lender takes its nominal quota back, which is what makes lending safe)."""

    borrowing_limit: Limit = None  # None: up to whatever the cohort can lend
    lending_limit: Limit = None  # None: all of its idle nominal quota
    reclaim: str = "Any"  # preemption.reclaimWithinCohort
    within_queue: str = "LowerPriority"  # preemption.withinClusterQueue
    borrow_within_cohort: str = "Never"  # preemption.borrowWithinCohort.policy
    weight: float = 1  # fairSharing.weight
    isolated: bool = False  # no cohort: neither borrows nor lends

    @staticmethod
    def _limit(limit: Limit, resource: str) -> int | None:
        if limit is None or isinstance(limit, int):
            return limit
        return limit.get(resource)

    def borrowing(self, resource: str) -> int | None:
        return self._limit(self.borrowing_limit, resource)

    def lending(self, resource: str) -> int | None:
        return self._limit(self.lending_limit, resource)

    def may_borrow(self) -> bool:
        """Whether some resource may be borrowed at all (a limit of 0 everywhere means never)."""
        if self.isolated:
            return False
        # A mapping leaves the resources it does not list unlimited.
        return not isinstance(self.borrowing_limit, int) or self.borrowing_limit > 0


@dataclass(frozen=True)
class Cohort:
    name: str
    parent: str | None  # None only for the root
    tenants: tuple[str, ...] = ()
    weight: float | None = None
    quota: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # pool -> resource -> count


@dataclass(frozen=True)
class Queueing:
    root: str
    cohorts: tuple[Cohort, ...] = ()  # the sub-cohorts as written (the root is implied)
    tiers: Mapping[str, QueuePolicy] = field(default_factory=dict)

    def policy(self, tier: str) -> QueuePolicy:
        return self.tiers.get(tier, QueuePolicy())

    def all_cohorts(self) -> tuple[Cohort, ...]:
        """The root, then the sub-cohorts (a sub-cohort without a parent hangs under the root)."""
        return (Cohort(self.root, None),) + self.cohorts

    def cohort_of(self, tenant: str, tier: str) -> str | None:
        """The cohort a tenant's ClusterQueue joins (None for an isolated tier): the first sub-cohort that
        lists it, else the root."""
        if self.policy(tier).isolated:
            return None
        return next((c.name for c in self.cohorts if tenant in c.tenants), self.root)


def _limit(raw: Any) -> Limit:
    if raw is None or isinstance(raw, int):
        return raw
    return {str(k): int(v) for k, v in raw.items()}


def from_data(raw: Mapping[str, Any], cluster_name: str) -> Queueing:
    """The block from schema-valid data (semantic checks are the GP52x/GP62x rules)."""
    root = raw.get("cohort", cluster_name)
    cohorts = tuple(
        Cohort(
            c["name"],
            c.get("parent", root),
            tuple(c.get("tenants", ())),
            c.get("weight"),
            {p: dict(r) for p, r in c.get("quota", {}).items()},
        )
        for c in raw.get("cohorts", ())
        if isinstance(c, dict) and isinstance(c.get("name"), str)
    )
    tiers = {
        name: QueuePolicy(
            _limit(p.get("borrowingLimit")),
            _limit(p.get("lendingLimit")),
            p.get("reclaim", "Any"),
            p.get("withinQueue", "LowerPriority"),
            p.get("borrowWithinCohort", "Never"),
            p.get("weight", 1),
            p.get("isolated", False),
        )
        for name, p in raw.get("tiers", {}).items()
        if isinstance(p, dict)
    }
    return Queueing(root, cohorts, tiers)
