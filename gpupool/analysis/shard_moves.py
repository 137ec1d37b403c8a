"""The stacks of a sharded platform, and the order a run must take them in when tenants move between them.

A tenant moves between stacks when `sharding.tenantShards` changes (or sharding is switched on or off).
The stack it leaves deletes its objects that are not retained on delete (the owners' RoleBinding, the
per-pod admission policy); if the stack it joins had created (adopted) them first, that delete would remove
the new holder's objects and leave its state believing they exist. So a run that moves tenants goes in two
passes (`gpupool stacks up`, gpupool/deploy/stacks.py, takes them in the order of :func:`steps`):

1. release: every stack that holds a tenant it is no longer assigned runs with only the tenants it both
   holds and is assigned (the run setting gpupool:keepTenants), so it deletes or forgets the leaving ones and creates none;
2. apply: every stack runs with all its tenants.

What a stack holds is read from its state (`pulumi stack export`), not from its outputs: a dead run leaves
outputs of before it, while its state has every object it created. A rerun after a failure anywhere
recomputes both passes from the states, so no order of failures lets two stacks hold one tenant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from gpupool.k8s.desired import TENANT_PREFIX
from gpupool.model import sharding
from gpupool.spec.stack import CONFIG_NAMESPACE

TENANT_TYPE = "gpupool:tenancy:Tenant"
PLATFORM_TYPE = "gpupool:index:GpuPlatform"
# components/platform.py names each Tenant component <platform>-tenant-<name> (TENANT_PREFIX) under its GpuPlatform;
# gpupool 0.1's program named it tenant-<name> at the stack's root.


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _urn_type(urn: str) -> str:
    """The resource's own type: the last of the URN's type chain (urn:pulumi:STACK::PROJECT::A$B::NAME)."""
    parts = urn.split("::")
    return parts[2].split("$")[-1] if len(parts) >= 4 else ""


def tenant_of(resource: dict) -> str | None:
    """The tenant a Tenant component of a state holds, from its name and its parent's."""
    urn = str(resource.get("urn", ""))
    if resource.get("type") != TENANT_TYPE or "::" not in urn:
        return None
    name, parent = _urn_name(urn), str(resource.get("parent") or "")
    prefix = TENANT_PREFIX
    if _urn_type(parent) == PLATFORM_TYPE:
        prefix = f"{_urn_name(parent)}-{TENANT_PREFIX}"
    return name[len(prefix) :] if name.startswith(prefix) else None


def held_in_state(export: dict) -> set[str]:
    """Tenant names whose component is in a `pulumi stack export` document, pending creates included
    (a dead run may have started one): a child object is never in a state without its component."""
    deployment = export.get("deployment") or {}
    resources = list(deployment.get("resources") or [])
    resources += [op.get("resource") or {} for op in deployment.get("pending_operations") or []]
    return {t for t in (tenant_of(r) for r in resources) if t is not None}


@dataclass(frozen=True)
class StackRun:
    stack: str
    role: sharding.Role
    assigned: tuple[str, ...]  # what the spec gives this stack
    held: tuple[str, ...]  # what its state holds now (empty for a stack not created yet)
    exists: bool
    leaving: tuple[str, ...] = field(default=())  # held, still in the spec, assigned to another stack
    arriving: tuple[str, ...] = field(default=())

    @property
    def release_first(self) -> bool:
        return bool(self.leaving)

    @property
    def needed(self) -> bool:
        """Does a run take this stack at all? Not a shard stack that neither exists nor gets tenants."""
        return self.exists or bool(self.assigned) or self.role.platform

    @property
    def apply_pass(self) -> bool:
        """Does `up` run it in the apply pass? Not when its release pass already did all of it."""
        return self.needed and not (self.release_first and not self.arriving)

    @property
    def keep(self) -> tuple[str, ...]:
        """The tenants its release pass registers: held and still assigned."""
        held = set(self.held)
        return tuple(t for t in self.assigned if t in held)

    @property
    def shard_value(self) -> str:
        """Its `gpupool:shard` config value."""
        return "" if self.role.shard is None else sharding.shard_role(self.role.shard)


def shard_number(platform_stack: str, stack: str) -> int | None:
    """K when STACK is `<platform_stack>.tenants-<k>`, else None."""
    m = re.fullmatch(re.escape(platform_stack) + r"\.tenants-(0|[1-9][0-9]{0,3})", stack)
    return int(m.group(1)) if m else None


def role_of(platform_stack: str, stack: str) -> sharding.Role | None:
    """The role STACK has in PLATFORM_STACK's platform: the platform stack's, a shard's, or None (not one of its
    stacks)."""
    if stack == platform_stack:
        return sharding.PLATFORM_ROLE
    k = shard_number(platform_stack, stack)
    return None if k is None else sharding.Role(platform=False, shard=k)


def stack_runs(
    platform_stack: str,
    tenants: list[str],
    shards: int,
    states: dict[str, dict] | None = None,
    settled: AbstractSet[str] = frozenset(),
) -> list[StackRun]:
    """Every stack of the platform in the order a run takes them: the platform stack, the shards the spec
    names, then left-over shard stacks (numbers the count no longer reaches) that still exist in STATES
    (stack name -> its `pulumi stack export`). A SETTLED stack (in STATES, its state not read) holds what it
    is assigned: its recorded up registered exactly that (gpupool.deploy.records)."""
    states = states or {}
    numbers = set(range(shards)) | {k for k in (shard_number(platform_stack, s) for s in states) if k is not None}
    roles = [sharding.Role(platform=True, shard=None)]
    roles += [sharding.Role(platform=False, shard=k) for k in sorted(numbers)]
    spec_tenants = set(tenants)
    runs = []
    for role in roles:
        stack = platform_stack if role.shard is None else sharding.shard_stack(platform_stack, role.shard)
        assigned = tuple(sharding.held_by(role, tenants, shards))
        held = held_in_state(states[stack]) if stack in states else set()
        if stack in settled:
            held = set(assigned)
        runs.append(
            StackRun(
                stack,
                role,
                assigned,
                tuple(sorted(held)),
                stack in states,
                tuple(sorted((held & spec_tenants) - set(assigned))),
                tuple(t for t in assigned if t not in held),
            )
        )
    return runs


def as_json(platform_stack: str, shards: int, runs: list[StackRun]) -> dict:
    return {
        "platformStack": platform_stack,
        "tenantShards": shards,
        "sharded": bool(shards) or len(runs) > 1,  # or shard stacks are left from a sharded spec
        "moves": any(r.release_first for r in runs),
        "stacks": [
            {
                "stack": r.stack,
                "shard": r.shard_value,
                "platform": r.role.platform,
                "exists": r.exists,
                "tenants": list(r.assigned),
                "held": list(r.held),
                "leaving": list(r.leaving),
                "arriving": list(r.arriving),
                "releaseFirst": r.release_first,
                "keep": list(r.keep),
                "run": r.needed,
                "applyPass": r.apply_pass,
            }
            for r in runs
        ],
    }


def steps(op: str, runs: list[StackRun]) -> list[tuple[StackRun, tuple[str, ...] | None]]:
    """The stacks OP takes, in order, each with the tenants its release pass keeps (None: an ordinary run).

    preview: every stack a run takes. up: the release pass of every stack that loses tenants, then the
    apply pass (a stack whose release was all of its run is not taken again). destroy: every existing
    stack, the shards first and the platform stack last (it holds the tiers and the operator they use)."""
    if op == "preview":
        return [(r, None) for r in runs if r.needed]
    if op == "up":
        return [(r, r.keep) for r in runs if r.release_first] + [(r, None) for r in runs if r.apply_pass]
    if op == "destroy":
        return [(r, None) for r in reversed(runs) if r.exists]
    raise ValueError(f"unknown op {op!r}")


# The release pass tells the program which tenants it keeps through one stack setting of that run only, an inline
# JSON list of names: `gpupool stacks` hands it over as the run's --config-file (gpupool.deploy.run_config, so the
# committed stack file never holds it), components/platform.py reads it. Written and read here.
KEEP_SETTING = "keepTenants"
KEEP_KEY = f"{CONFIG_NAMESPACE}:{KEEP_SETTING}"


def keep_config(keep: tuple[str, ...] | None) -> dict[str, str]:
    """The run settings of a release pass that keeps KEEP (nothing for an ordinary run)."""
    return {} if keep is None else {KEEP_KEY: json.dumps(list(keep))}


def parse_keep(value: str | None) -> set[str] | None:
    """The tenants the running release pass keeps (the KEEP_KEY setting), or None outside one; ValueError when the
    value is not a JSON list of names."""
    if not value:
        return None
    try:
        names = json.loads(value)
    except ValueError:
        raise ValueError(f"{KEEP_KEY}: not JSON") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{KEEP_KEY}: not a JSON list of tenant names")
    return set(names)
