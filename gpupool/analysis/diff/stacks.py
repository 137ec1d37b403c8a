"""Tenants another Pulumi stack holds after the change (sharding.tenantShards changed)."""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.model import platform as m
from gpupool.model import sharding


@dataclass(frozen=True)
class StackMove:
    """A tenant in both specs that another Pulumi stack holds in HEAD (sharding.tenantShards changed)."""

    tenant: str
    before: str  # the stack role: "platform" or "tenants-<k>"
    after: str


def holder(spec: m.Spec, tenant: str) -> str:
    """The role name of the Pulumi stack that holds TENANT under SPEC's sharding."""
    return sharding.holder(tenant, spec.tenant_shards).name


def stack_moves(base: m.Spec | None, head: m.Spec | None) -> list[StackMove]:
    if base is None or head is None:
        return []
    in_base = {t.name for t in base.tenants}
    moves = [StackMove(t.name, holder(base, t.name), holder(head, t.name)) for t in head.tenants if t.name in in_base]
    return sorted((mv for mv in moves if mv.before != mv.after), key=lambda mv: mv.tenant)
