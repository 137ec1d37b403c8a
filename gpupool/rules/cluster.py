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


@rule("GP102", "the operator chartPath is outside the repository")
def chart_path_inside(ctx: Context) -> None:
    """A local chart (air-gapped: the chart shipped beside the spec) is named relative to the spec and must
    stay inside the repository (the nearest directory above the spec holding `.git` or `Pulumi.yaml`), links
    followed: an absolute path, or one that climbs out, would deploy whatever that path holds on the machine
    that runs the deploy, which reviewers of the repository cannot see.

    Passes:
        cluster:
          name: dev
          gpuOperator: {chartVersion: v26.7.0}
    Fails:
        cluster:
          name: dev
          gpuOperator: {chartPath: /opt/charts/gpu-operator}
    """
    from gpupool.gpu import local_chart

    chart_path = _operator(ctx).get("chartPath")
    if isinstance(chart_path, str):
        why = local_chart.outside(ctx.spec_dir, chart_path)
        if why:
            ctx.error(("cluster", "gpuOperator", "chartPath"), f"{why}; commit the chart under the repository")


@rule("GP103", "the operator chartPath is not a GPU Operator chart gpupool can configure")
def chart_path_is_the_operator(ctx: Context) -> None:
    """A local chart must have the GPU Operator chart's structure where gpupool relies on it: `Chart.yaml`
    named `gpu-operator`, and in `values.yaml` the keys gpupool sets (`mig.strategy`, `migManager.config`,
    `devicePlugin.config`); a chart without them deploys and ignores the MIG and sharing configs. Its
    version should be the spec's `chartVersion`, which a local chart replaces. A warning: the chart is the
    team's to choose (docs/howto/chart-upgrade.md, "Air-gapped").

    Passes:
        cluster:
          name: dev
          gpuOperator: {chartVersion: v26.7.0}
    Fails:
        cluster:
          name: dev
          gpuOperator: {chartPath: .}
    """
    from gpupool.gpu import local_chart

    op = _operator(ctx)
    chart_path = op.get("chartPath")
    if not isinstance(chart_path, str) or local_chart.outside(ctx.spec_dir, chart_path):
        return  # GP102: nothing outside the repository is read
    where = ctx.spec_dir / chart_path
    if not where.exists():
        return  # GP101
    from gpupool.gpu.operator_facts import chart_version

    pinned = op.get("chartVersion") if isinstance(op.get("chartVersion"), str) else chart_version()
    for problem in local_chart.problems(where, pinned):
        ctx.warn(("cluster", "gpuOperator", "chartPath"), problem)
