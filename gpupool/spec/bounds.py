"""The numbers gpupool hands to Pulumi, the provider or the API server, bounded by what each consumer accepts.

A spec value beyond one of these would validate, plan and render, then fail (or be silently changed) in the
middle of a rollout. Each bound is the schema's own maximum (editors show it), and a value beyond it is
reported under the bound's rule id with the consumer's reason, instead of the generic schema id GP010.
tests/test_bounds.py checks that the schema and this table agree and that each bound is enforced.
"""

from __future__ import annotations

from dataclasses import dataclass

# Pulumi carries every number between the engine, the language host and the provider as a protobuf Value,
# whose number is a 64-bit float: whole numbers beyond 2^53 - 1 arrive changed (9007199254740993 -> ...992).
PULUMI_EXACT_INTEGER = 2**53 - 1
# Go's time.ParseDuration, which Pulumi uses for custom timeouts ("<N>s"), holds at most 2^63 - 1 ns.
GO_DURATION_SECONDS = (2**63 - 1) // 10**9  # 9,223,372,036
# k8s.io/apimachinery/pkg/api/resource: ParseQuantity clamps any amount above maxAllowed (math.go: max int64).
KUBERNETES_QUANTITY = 2**63 - 1


@dataclass(frozen=True)
class Bound:
    rule: str
    at: str  # the keyword's location in schemas/gpupool.schema.json
    keyword: str  # "maximum" or "minimum"
    limit: int
    why: str


BOUNDS: tuple[Bound, ...] = (
    Bound(
        "GP730",
        "$defs/rollout/properties/nodeTimeoutSeconds",
        "maximum",
        GO_DURATION_SECONDS,
        "Pulumi reads custom timeouts with Go's time.ParseDuration, which holds at most "
        f"{GO_DURATION_SECONDS:,} s (2^63 ns): a longer timeout makes every node patch fail to register in the "
        "middle of `pulumi up`",
    ),
    Bound(
        "GP731",
        "$defs/tier/properties/priority",
        "maximum",
        1_000_000_000,
        "the API server refuses PriorityClass values above 1,000,000,000, which are reserved for "
        "system-cluster-critical and system-node-critical",
    ),
    Bound(
        "GP731",
        "$defs/tier/properties/priority",
        "minimum",
        -(2**31),
        "a PriorityClass value is a 32-bit integer",
    ),
)

_BY_LOCATION = {(b.at, b.keyword): b for b in BOUNDS}


def bound_at(schema_path: tuple, keyword: str) -> Bound | None:
    """The bound a schema error at SCHEMA_PATH (the keyword's location, ending in KEYWORD) enforces."""
    return _BY_LOCATION.get(("/".join(str(p) for p in schema_path[:-1]), keyword))
