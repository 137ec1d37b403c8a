"""GP1xx: the cluster and its GPU Operator."""

from __future__ import annotations

from gpupool.rules.registry import Context, rule

# Operator values that override what gpupool derives are refused by GP808 (gpupool.rules.security).


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
        ctx.error(
            ("cluster", "gpuOperator", "chartPath"),
            f"does not exist (relative to {ctx.spec_dir}); give a chart directory "
            "or .tgz, or remove chartPath to use the NVIDIA Helm repository",
        )
