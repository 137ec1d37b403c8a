"""What a change to a spec does, tenant first: pure computation from two models (no I/O, no printing).

`compute(base, head)` compares two validated specs (either may be None: a new stack, or a side that did not
validate) and returns a `SpecDiff` (result.py). One module per aspect:
- tenants.py: tenants added, removed (with what happens to their namespace) and changed, with quota deltas;
- headroom.py: headroom per resource before and after (gpupool.analysis.plan);
- mig.py: pools whose MIG layout changes, the nodes MIG Manager will reconfigure (evicting their GPU
  workloads) and each side's layout as the placement solver places it;
- pools.py: node pools added or removed, nodes joining or leaving; stacks.py: tenants changing Pulumi stack;
- configs.py: device-plugin ConfigMap keys added, removed or changed, and per pool unified diffs of its MIG
  Manager and device-plugin config entries;
- objects.py: the rendered Kubernetes objects (gpupool render) added, changed and removed, field by field;
- queues.py: the Kueue queues (docs/explanation/queueing.md);
- reconcile.py: for an invalid side, only what the valid parts of both sides support is compared;
- compute.py: all of it, each side built once.

Formatting lives in gpupool.present.diff. This package's names are re-exported here: callers import
`gpupool.analysis.diff` and need not know which module holds what.
"""

from __future__ import annotations

from gpupool.analysis.diff.compute import compare, compute
from gpupool.analysis.diff.configs import ConfigDiff, PluginChange, config_diffs, plugin_changes
from gpupool.analysis.diff.headroom import Headroom, headroom_changes
from gpupool.analysis.diff.kind import Kind
from gpupool.analysis.diff.mig import MigChange, MigKind, PlacedGroup, SliceLayout, layout_text, mig_changes
from gpupool.analysis.diff.objects import FieldChange, ObjectChange, field_changes, object_changes
from gpupool.analysis.diff.pools import PoolChange, pool_changes
from gpupool.analysis.diff.reconcile import Unknown, UnknownCause, reconcile
from gpupool.analysis.diff.result import Alert, Risk, SpecDiff
from gpupool.analysis.diff.stacks import StackMove, holder, stack_moves
from gpupool.analysis.diff.tenants import (
    ACCESS_ASPECTS,
    METADATA_ASPECTS,
    ROLE_RANK,
    Aspect,
    Detail,
    LimitLift,
    Namespace,
    QuotaDelta,
    TenantChange,
    TierRaise,
    max_per_pod_lifts,
    raise_text,
    tenant_changes,
    tier_raise,
)

__all__ = [
    "ACCESS_ASPECTS",
    "METADATA_ASPECTS",
    "ROLE_RANK",
    "Alert",
    "Aspect",
    "ConfigDiff",
    "Detail",
    "FieldChange",
    "Headroom",
    "Kind",
    "LimitLift",
    "MigChange",
    "MigKind",
    "Namespace",
    "ObjectChange",
    "PlacedGroup",
    "PluginChange",
    "PoolChange",
    "QuotaDelta",
    "Risk",
    "SliceLayout",
    "SpecDiff",
    "StackMove",
    "TenantChange",
    "TierRaise",
    "Unknown",
    "UnknownCause",
    "compare",
    "compute",
    "config_diffs",
    "field_changes",
    "headroom_changes",
    "holder",
    "layout_text",
    "max_per_pod_lifts",
    "mig_changes",
    "object_changes",
    "plugin_changes",
    "pool_changes",
    "raise_text",
    "reconcile",
    "stack_moves",
    "tenant_changes",
    "tier_raise",
]
