"""Numbers a consumer (Pulumi, the provider, the API server) cannot take as the spec allows them.

GP020 is found by the loader and GP730/GP731 by the schema check (gpupool.spec.bounds names the consumer of
each); this module documents them. GP021 reads the quantities a namespace's quota and defaults are made of.
"""

from __future__ import annotations

from fractions import Fraction

from gpupool.rules.registry import Context, declare, rule
from gpupool.spec.bounds import BOUNDS, KUBERNETES_QUANTITY
from gpupool.spec.input_limits import MAX_FILE_BYTES, MAX_RUN_BYTES
from gpupool.spec.loader import MAX_DEPTH, R_INEXACT, R_TOO_BIG, R_TOO_DEEP
from gpupool.spec.quantity import BINARY_SUFFIXES, parse_quantity

INEXACT = declare(
    R_INEXACT,
    "a whole number is too large for Pulumi to carry exactly",
    """
Pulumi passes every value between its engine, the program and the provider as a protobuf number, a 64-bit
float: a whole number beyond 9,007,199,254,740,991 (2^53 - 1) reaches the cluster as a different number (a
quota, a chart value), and the next preview shows a change that never goes away. Anywhere in the spec,
chart values included.

Passes:
    tenants:
      - name: team-a
        gpus: {nvidia.com/gpu: 4}
Fails:
    tenants:
      - name: team-a
        gpus: {nvidia.com/gpu: 9007199254740993}
""",
)


TOO_BIG = declare(
    R_TOO_BIG,
    "a file is not read: too large, or not a regular file",
    f"""
Every input is bounded, so that no pull request can make validation run out of memory or time: a spec or
tenant file larger than {MAX_FILE_BYTES >> 10:,} KiB (`--max-file-size`), or the files of one spec together
beyond {MAX_RUN_BYTES >> 10:,} KiB (`--max-input-size`), is not read; nor is a FIFO, a device or a socket
(`validate - < /dev/zero`, a tenant file that is a symlink to /dev/zero), on the working tree and at the
`diff --base` commit alike. A spec of 1,000 tenants and 100 pools is about 350 KB; the run cap is what every
command handles within 60 s on two loaded cores (docs/reference/cli.md, "Input limits").

Passes:
    tenants:
      - name: team-a
Fails:
    # a tenant file that is a symlink to /dev/zero
""",
)


TOO_DEEP = declare(
    R_TOO_DEEP,
    "values are nested too deeply",
    f"""
Values nested more than {MAX_DEPTH} levels deep (counted from the spec's root), anywhere, chart values
included. Real specs stay within about 12; render and the YAML emitter recurse per level, so deeper values
that passed validation used to crash render.

Passes:
    cluster:
      gpuOperator: {{chartVersion: v26.7.0, values: {{driver: {{enabled: false}}}}}}
Fails:
    cluster:
      gpuOperator: {{chartVersion: v26.7.0, values: {{a: {{a: {{a: ... 70 levels ... }}}}}}}}
""",
)


def _bound_doc(rule_id: str) -> str:
    bounds = [b for b in BOUNDS if b.rule == rule_id]
    return " ".join(f"{b.keyword.capitalize()} {b.limit:,}: {b.why}." for b in bounds)


NODE_TIMEOUT = declare(
    "GP730",
    "a rollout timeout is longer than Pulumi can take",
    _bound_doc("GP730")
    + """

Passes:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 8, nodes: [gpu-1], sharing: {mig: {preset: all-1g.10gb}},
         rollout: {nodeTimeoutSeconds: 3600}}
Fails:
    nodePools:
      - {name: a100, gpu: A100-80GB, gpusPerNode: 8, nodes: [gpu-1], sharing: {mig: {preset: all-1g.10gb}},
         rollout: {nodeTimeoutSeconds: 1000000000000}}
""",
)

PRIORITY = declare(
    "GP731",
    "a tier's priority is outside what a PriorityClass takes",
    _bound_doc("GP731")
    + """

Passes:
    tiers:
      - {name: standard, priority: 1000}
Fails:
    tiers:
      - {name: standard, priority: 2000000000}
""",
)


def _unclamped(value: str | int | float) -> Fraction:
    """The amount a quantity asks for (parse_quantity stops binary ones at 2^63 - 1, as Kubernetes does)."""
    text = str(value)
    for suffix, factor in BINARY_SUFFIXES.items():
        if text.endswith(suffix):
            return parse_quantity(text[: -len(suffix)] or "x") * factor
    return parse_quantity(text)


@rule("GP021", "a quantity is larger than Kubernetes stores")
def quantity_too_large(ctx: Context) -> None:
    """The API server clamps every quantity above 2^63 - 1 (k8s.io/apimachinery/pkg/api/resource: math.go's
    maxAllowed, applied in ParseQuantity) without saying so: a namespace quota of `memory: 1e30` would be
    stored as 9223372036854775807, and Pulumi would see a difference on every preview.

    Passes:
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}, compute: {memory: 512Gi}}
    Fails:
        tenants:
          - {name: team-a, tier: standard, owners: [a], gpus: {nvidia.com/gpu: 4}, compute: {memory: 1e30}}
    """
    tenants = ctx.data.get("tenants") if isinstance(ctx.data, dict) else None
    for i, t in enumerate(tenants if isinstance(tenants, list) else ()):
        if not isinstance(t, dict):
            continue
        places: list[tuple[tuple[str, ...], object]] = [(("compute",), t.get("compute"))]
        defaults = t.get("containerDefaults")
        if isinstance(defaults, dict):
            places += [(("containerDefaults", part), defaults.get(part)) for part in ("requests", "limits")]
        for where, values in places:
            if not isinstance(values, dict):
                continue
            for key, value in values.items():
                path = ("tenants", i, *where, key)
                if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not ctx.usable(path):
                    continue
                try:
                    amount = _unclamped(value)
                except ValueError:
                    continue  # the schema or the builder reports it
                if amount > KUBERNETES_QUANTITY:
                    ctx.error(
                        path,
                        f"is larger than {KUBERNETES_QUANTITY:,} (2^63 - 1), which the API server would store "
                        "instead without a word; give a quantity below it (such as 512Gi)",
                    )
