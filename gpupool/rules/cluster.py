"""GP1xx: the cluster and its GPU Operator."""
from __future__ import annotations

from gpupool.rules.registry import Context, rule

# Helm values gpupool derives from the spec; overriding them through `values` defeats plan-time checks.
MANAGED_VALUES = (("mig", "strategy"), ("migManager", "config"), ("devicePlugin", "config"))


def _operator(ctx: Context) -> dict:
    raw = ctx.data.get("cluster") if isinstance(ctx.data, dict) else None
    if not isinstance(raw, dict) or not ctx.usable(("cluster",)):
        return {}
    op = raw.get("gpuOperator", {})
    return op if isinstance(op, dict) else {}


@rule("GP101", "the operator chartPath does not exist")
def chart_path_exists(ctx: Context) -> None:
    """A local chart (`cluster.gpuOperator.chartPath`, relative to the spec file) must exist, or the rollout
    would fail only when Helm looks for it.

    Passes:
        cluster:
          name: dev
          gpuOperator: {chartVersion: v26.7.0}
    Fails:
        cluster:
          name: dev
          gpuOperator: {chartPath: charts/no-such-chart}
    """
    chart_path = _operator(ctx).get("chartPath")
    if chart_path is not None and not (ctx.spec_dir / chart_path).exists():
        ctx.error(("cluster", "gpuOperator", "chartPath"),
                  f'"{chart_path}" does not exist (relative to {ctx.spec_dir}); give a chart directory '
                  "or .tgz, or remove chartPath to use the NVIDIA Helm repository")


@rule("GP102", "operator values override what gpupool derives")
def managed_values(ctx: Context) -> None:
    """`mig.strategy`, `migManager.config` and `devicePlugin.config` are derived from the spec; setting them
    under `gpuOperator.values` makes the plan describe a cluster that will not exist (a warning).

    Passes:
        cluster:
          name: dev
          gpuOperator:
            values: {dcgmExporter: {enabled: false}}
    Fails:
        cluster:
          name: dev
          gpuOperator:
            values: {mig: {strategy: single}}
    """
    values = _operator(ctx).get("values", {})
    for keys in MANAGED_VALUES:
        node = values
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        if node is not None:
            ctx.warn(("cluster", "gpuOperator", "values") + keys,
                     f"overrides the {'.'.join(keys)} value gpupool derives from the spec; "
                     "plan-time checks no longer describe what the cluster will do")
