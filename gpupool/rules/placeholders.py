"""GP59x: onboarding placeholders (`gpupool tenant new` writes them; validation fails until they are filled in)."""

from __future__ import annotations

from gpupool.rules.registry import Context, rule

# What `gpupool tenant new` writes where only the requester knows the answer. Both pass the schema (a group
# name, a label value) so that the file is otherwise a normal tenant file, and this rule is what rejects them.
OWNER_PLACEHOLDER = "TODO-owner-group"
COST_CENTER_PLACEHOLDER = "TODO-cost-center"
RULE_ID = "GP590"


@rule(RULE_ID, "a tenant still has the placeholders `gpupool tenant new` wrote")
def placeholders(ctx: Context) -> None:
    """`gpupool tenant new` scaffolds a tenant file with placeholder owners and cost centre, so that the
    onboarding pull request cannot merge until someone names the groups that own the namespace (they are bound
    to its workload role) and the cost centre the GPUs are charged to.

    Passes:
        tenants:
          - {name: team-a, tier: standard, owners: [team-a-admins], costCenter: cc-1200, gpus: {nvidia.com/gpu: 4}}
    Fails:
        tenants:
          - {name: team-a, tier: standard, owners: [TODO-owner-group], costCenter: TODO-cost-center,
             gpus: {nvidia.com/gpu: 4}}
    """
    raw = ctx.data.get("tenants") if isinstance(ctx.data, dict) else None
    for i, t in enumerate(raw if isinstance(raw, list) else ()):
        if not isinstance(t, dict):
            continue
        owners = t.get("owners")
        if isinstance(owners, list) and ctx.usable(("tenants", i, "owners")):
            for j, owner in enumerate(owners):
                if owner == OWNER_PLACEHOLDER:
                    ctx.error(
                        ("tenants", i, "owners", j),
                        "still the placeholder from `gpupool tenant new`: list the groups that own this "
                        "tenant (they may run workloads in its namespace)",
                    )
        if t.get("costCenter") == COST_CENTER_PLACEHOLDER and ctx.usable(("tenants", i, "costCenter")):
            ctx.error(
                ("tenants", i, "costCenter"),
                "still the placeholder from `gpupool tenant new`: give the cost centre its GPUs are "
                "charged to (a label value such as cc-4100)",
            )
