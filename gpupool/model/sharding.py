"""Which Pulumi stack holds which tenant, when a big platform is split into a platform stack and tenant shards.

The file backend rewrites a stack's whole state after every step, so one `pulumi up` costs O(resources²)
(docs/explanation/scale.md). Splitting the tenants over `sharding.tenantShards` stacks keeps each state small:
the platform stack (named as today, e.g. `dev`) holds the operator, the GPU ConfigMaps, the node pools and
the tiers; stack `dev.tenants-<k>` holds the tenants that `shard_of` assigns to shard k. Every stack's
program still validates the whole spec, so `gpupool validate`/`plan`/`diff` judge the whole platform.

The assignment is Lamping and Veach's jump consistent hash of the tenant name: it needs no state, adding or
removing a tenant moves no other tenant, and raising the shard count from N to N+1 moves only the tenants
that the new shard takes (about 1/(N+1) of them), never one between two old shards.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

TENANT_SHARD_PREFIX = "tenants-"
PLATFORM = ""  # the `gpupool:shard` value of the platform stack: unset


def jump_hash(key: int, buckets: int) -> int:
    """Jump consistent hash (Lamping & Veach 2014, "A Fast, Minimal Memory, Consistent Hash Algorithm")."""
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def shard_of(tenant: str, shards: int) -> int:
    """The tenant shard (0..shards-1) that holds TENANT: a stable function of its name alone."""
    key = int.from_bytes(hashlib.sha256(tenant.encode()).digest()[:8], "big")
    return jump_hash(key, shards)


def shard_role(k: int) -> str:
    """The `gpupool:shard` config value of tenant shard K."""
    return f"{TENANT_SHARD_PREFIX}{k}"


def shard_stack(platform_stack: str, k: int) -> str:
    """The Pulumi stack name of tenant shard K of PLATFORM_STACK (`dev` -> `dev.tenants-3`)."""
    return f"{platform_stack}.{shard_role(k)}"


@dataclass(frozen=True)
class Role:
    """What one stack registers: the platform part or not, and which tenants."""

    platform: bool
    shard: int | None  # None: the platform stack

    @property
    def name(self) -> str:
        return "platform" if self.shard is None else shard_role(self.shard)


PLATFORM_ROLE = Role(platform=True, shard=None)


def parse_role(value: str) -> Role:
    """The role a `gpupool:shard` config value names; ValueError with the accepted forms otherwise."""
    if value == PLATFORM:
        return PLATFORM_ROLE
    digits = value[len(TENANT_SHARD_PREFIX) :] if value.startswith(TENANT_SHARD_PREFIX) else ""
    if not digits.isdigit() or (len(digits) > 1 and digits.startswith("0")) or len(digits) > 4:
        raise ValueError(
            "gpupool:shard must be unset (the platform stack) or tenants-<k> with k a shard number such as tenants-0"
        )
    return Role(platform=False, shard=int(digits))


def holder(tenant: str, shards: int) -> Role:
    """The role of the stack that holds TENANT when the spec has SHARDS tenant shards (0: not sharded):
    the platform stack unsharded, else the shard `shard_of` gives."""
    return PLATFORM_ROLE if shards == 0 else Role(platform=False, shard=shard_of(tenant, shards))


def held_by(role: Role, tenants: list[str], shards: int) -> list[str]:
    """The tenants a stack of ROLE registers: those whose `holder` it is. So a left-over shard stack
    (unsharded now, or a number at or above the count) holds none, and running it releases what it has."""
    return [t for t in tenants if holder(t, shards) == role]


def assignment(tenants: list[str], shards: int) -> dict[int, list[str]]:
    """Shard number -> its tenants (every shard listed, empty ones too), in the order given."""
    out: dict[int, list[str]] = {k: [] for k in range(shards)}
    for t in tenants:
        out[shard_of(t, shards)].append(t)
    return out
