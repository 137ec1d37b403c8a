"""GP150-GP199: the GPU Operator's operand environment (facts in gpupool/gpu/gpu-operator.yaml)."""

from __future__ import annotations

from gpupool.rules.registry import Context, rule


@rule("GP150", "operator values set a variable the GPU Operator manages")
def operator_managed_env(ctx: Context) -> None:
    """The operator merges `values.<operand>.env` into its own DaemonSet template by variable name, after
    its own settings, so an entry for a variable the operator sets itself replaces the operator's value on
    every node. The worst case is `DEVICE_LIST_STRATEGY`: since v25.10 CDI is on by default and the operator
    sets `cdi-annotations,cdi-cri`; a copied `envvar` turns CDI device injection off (a warning).

    Passes:
        cluster:
          name: dev
          gpuOperator:
            values:
              devicePlugin:
                env: [{name: MY_DEBUG, value: "1"}]
    Fails:
        cluster:
          name: dev
          gpuOperator:
            values:
              devicePlugin:
                env: [{name: DEVICE_LIST_STRATEGY, value: envvar}]
    """
    from gpupool.gpu.operator_facts import chart_version
    from gpupool.gpu.operator_facts import operator_managed_env as managed

    raw = ctx.data.get("cluster") if isinstance(ctx.data, dict) else None
    if not isinstance(raw, dict) or not ctx.usable(("cluster", "gpuOperator", "values")):
        return
    op = raw.get("gpuOperator")
    values = op.get("values") if isinstance(op, dict) else None
    if not isinstance(values, dict):
        return
    for operand, names in managed().items():
        section = values.get(operand)
        env = section.get("env") if isinstance(section, dict) else None
        if not isinstance(env, list):
            continue
        for i, entry in enumerate(env):
            name = entry.get("name") if isinstance(entry, dict) else None
            if name in names:
                ctx.warn(
                    ("cluster", "gpuOperator", "values", operand, "env", i, "name"),
                    f"{name} is set by the GPU Operator itself (chart {chart_version()}); this entry "
                    f"replaces the operator's value in the {operand} DaemonSet. Remove it unless you "
                    "mean to override the operator",
                )
