"""GP4xx: tiers (PriorityClasses and the isolation they promise)."""

from __future__ import annotations

from gpupool.model import build as B
from gpupool.rules.registry import Context, declare, rule

RESERVED_TIER_PREFIX = "system-"


def _tiers(ctx: Context):
    """(path, raw tier) for each tier the schema accepted."""
    raw = ctx.data.get("tiers") if isinstance(ctx.data, dict) else None
    if not isinstance(raw, list):
        return
    for i, t in enumerate(raw):
        if isinstance(t, dict) and ctx.usable(("tiers", i)):
            yield ("tiers", i), t


@rule("GP401", 'a tier name starts with "system-"')
def reserved_prefix(ctx: Context) -> None:
    """Kubernetes reserves the `system-` prefix for its own PriorityClasses and refuses to create others.

    Passes:
        tiers:
          - {name: standard, priority: 100}
    Fails:
        tiers:
          - {name: system-standard, priority: 100}
    """
    for path, t in _tiers(ctx):
        name = t["name"]
        if name.startswith(RESERVED_TIER_PREFIX):
            ctx.error(
                path + ("name",),
                f'starts with "{RESERVED_TIER_PREFIX}", which Kubernetes '
                "reserves for its own PriorityClasses; choose another name",
            )


declare(
    B.DUPLICATE_TIER,
    "two tiers have the same name",
    """
Tier names are PriorityClass names; the second tier of a name is not built.

Passes:
    tiers:
      - {name: standard, priority: 100}
      - {name: batch, priority: 10}
Fails:
    tiers:
      - {name: standard, priority: 100}
      - {name: standard, priority: 10}
""",
)


@rule("GP403", "two tiers have the same priority")
def same_priority(ctx: Context) -> None:
    """Tiers with equal priority cannot preempt each other, which is rarely what two tiers are for (a
    warning).

    Passes:
        tiers:
          - {name: standard, priority: 100}
          - {name: batch, priority: 10}
    Fails:
        tiers:
          - {name: standard, priority: 100}
          - {name: batch, priority: 100}
    """
    raw = ctx.data.get("tiers") if isinstance(ctx.data, dict) else None
    # Names of tiers the schema rejected count too: a later tier of that name is a duplicate (GP402's).
    names: set[str] = set()
    priorities: dict[int, str] = {}
    for i, t in enumerate(raw if isinstance(raw, list) else ()):
        if not isinstance(t, dict):
            continue
        if not ctx.usable(("tiers", i)):
            if isinstance(t.get("name"), str):
                names.add(t["name"])
            continue
        path = ("tiers", i)
        if t["name"] in names:
            continue
        names.add(t["name"])
        if t["priority"] in priorities:
            ctx.warn(
                path + ("priority",),
                f'same priority as tier "{priorities[t["priority"]]}"; '
                "tiers with equal priority cannot preempt each other",
            )
        priorities.setdefault(t["priority"], t["name"])
