"""`gpupool plan SPEC`: capacity, grants, headroom, GPU-equivalents per tenant and cost centre, chargeback.

Formats: table (terminals, at most 100 columns for realistic specs), markdown (pull-request comments),
json (scripts; docs/reference/plan-json.md) and csv (chargeback line items: one row per tenant, resource and pool).
Exit status: 0 = printed and every resource has non-negative headroom, 1 = invalid spec, 2 = usage error.
"""

from __future__ import annotations

FORMATS = ("table", "json", "markdown", "csv")


def register(sub) -> None:
    p = sub.add_parser(
        "plan",
        help="capacity plan: supply, grants, headroom, GPU-equivalents, chargeback",
        description="Per pool and resource: capacity supplied, granted, headroom and oversubscription; "
        "per tenant and cost centre: GPU-equivalents, share of the cluster and, with "
        "pricePerGpuHour on pools, chargeback per hour and per 730-hour month.",
    )
    from gpupool.cli.common import add_output_format, add_spec_argument

    add_spec_argument(p)

    add_output_format(
        p,
        FORMATS,
        "table",
        help="table (default), json (docs/reference/plan-json.md), markdown or csv (chargeback line items)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from gpupool.analysis import plan as planmod
    from gpupool.cli.common import spec_path, valid_spec_or_fail

    spec = valid_spec_or_fail(spec_path(args), "invalid, no plan")
    plan = planmod.compute(spec)
    from gpupool.present.plan import FORMATTERS

    print(FORMATTERS[args.output](plan), end="")
    return 0 if plan.ok else 1
