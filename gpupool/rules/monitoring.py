"""GP16x: the monitoring block (docs/explanation/monitoring.md): what would make gpupool's figures wrong or empty."""

from __future__ import annotations

from typing import Any

from gpupool.gpu.dcgm_exporter import RESOURCE_NAMES_ENV, VIRTUAL_GPUS_ENV
from gpupool.monitoring.duration import DurationError, parse_ms
from gpupool.rules.registry import Context, rule

VALUES = ("cluster", "gpuOperator", "values")


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _enabled(ctx: Context) -> bool:
    return ctx.usable(("monitoring",)) and _get(ctx.data, "monitoring", "enabled") is True


@rule("GP160", "monitoring is enabled but the DCGM exporter is not")
def needs_exporter(ctx: Context) -> None:
    """Used GPU-equivalents and the idle and XID alerts read the DCGM exporter's series.

    Passes:
        monitoring: {enabled: true}
    Fails:
        cluster:
          name: dev
          gpuOperator: {dcgmExporter: false}
        monitoring: {enabled: true}
    """
    if _enabled(ctx) and _get(ctx.data, "cluster", "gpuOperator", "dcgmExporter") is False:
        ctx.error(
            ("cluster", "gpuOperator", "dcgmExporter"),
            "must be true while monitoring.enabled is true (usage and the idle and XID alerts read the "
            "DCGM exporter); or set monitoring.enabled: false",
        )


@rule("GP161", "operator values undo the DCGM exporter's attribution")
def attribution_values(ctx: Context) -> None:
    """With monitoring on, gpupool sets the exporter's ServiceMonitor `honorLabels: true` (else Prometheus
    renames the exporter's `namespace` to `exported_namespace` and no GPU series belongs to a tenant), and the
    variables that attribute shared GPUs (KUBERNETES_VIRTUAL_GPUS, NVIDIA_RESOURCE_NAMES). Values that
    replace them would make every tenant's usage zero. With a time-sliced or MPS pool gpupool also sets
    `dcgmExporter.hostPID: true`: virtual-GPU mode reports DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED per
    process for every GPU pod, 0 without the host's PIDs; values that turn it off are a warning (a cluster
    whose policy forbids host PIDs may choose that, at the cost of those two series for other readers).

    Passes:
        monitoring: {enabled: true}
    Fails:
        cluster:
          name: dev
          gpuOperator: {values: {dcgmExporter: {serviceMonitor: {honorLabels: false}}}}
        monitoring: {enabled: true}
    """
    if not _enabled(ctx) or not ctx.usable(VALUES):
        return
    sm = _get(ctx.data, *VALUES, "dcgmExporter", "serviceMonitor")
    if isinstance(sm, dict):
        for key in ("honorLabels", "enabled"):
            if key in sm and sm[key] is not True:
                ctx.error(
                    VALUES + ("dcgmExporter", "serviceMonitor", key),
                    f"dcgmExporter.serviceMonitor.{key} must be true while monitoring is enabled (gpupool sets "
                    "it: honorLabels keeps the exporter's namespace and pod labels); remove it",
                    key=True,
                )
    host_pid = _get(ctx.data, *VALUES, "dcgmExporter", "hostPID")
    shared = ctx.spec is not None and any(p.sharing.software_shared for p in ctx.spec.pools)
    if host_pid is not None and host_pid is not True and shared:
        ctx.warn(
            VALUES + ("dcgmExporter", "hostPID"),
            "turns off the host PIDs gpupool gives the exporter with a time-sliced or MPS pool: its "
            "virtual-GPU mode then reports DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED as 0 for every GPU pod, "
            "for every reader of the exporter (docs/explanation/monitoring.md); remove it unless your cluster forbids host PIDs",
            key=True,
        )
    env = _get(ctx.data, *VALUES, "dcgmExporter", "env")
    if isinstance(env, list):
        for i, item in enumerate(env):
            if isinstance(item, dict) and item.get("name") in (VIRTUAL_GPUS_ENV, RESOURCE_NAMES_ENV):
                ctx.error(
                    VALUES + ("dcgmExporter", "env", i, "name"),
                    "is set by gpupool while monitoring is enabled (it attributes shared GPUs to pods); "
                    "remove this entry",
                )


@rule("GP162", "a custom DCGM metrics list may lack the counters gpupool reads")
def custom_counters(ctx: Context) -> None:
    """gpupool's figures read DCGM_FI_PROF_GR_ENGINE_ACTIVE (the activity MIG instances report;
    DCGM_FI_DEV_GPU_UTIL is not reported for them) and DCGM_FI_DEV_XID_ERRORS, both in the exporter's default
    collectors file. A metrics ConfigMap named in the values replaces that file, and gpupool cannot read it:
    a warning to keep both counters in it.

    Passes:
        monitoring: {enabled: true}
    Fails:
        cluster:
          name: dev
          gpuOperator: {values: {dcgmExporter: {config: {name: my-dcgm-metrics}}}}
        monitoring: {enabled: true}
    """
    if _enabled(ctx) and ctx.usable(VALUES) and _get(ctx.data, *VALUES, "dcgmExporter", "config", "name"):
        ctx.warn(
            VALUES + ("dcgmExporter", "config"),
            "replaces the exporter's default counters; keep DCGM_FI_PROF_GR_ENGINE_ACTIVE and "
            "DCGM_FI_DEV_XID_ERRORS in it, or gpupool usage and the idle and XID alerts have no data",
            key=True,
        )


# Every field the schema types as a duration ($defs/duration) is handed to Prometheus as a rule's `for:`, which
# it reads with prometheus/common model/time.go ParseDuration (commit d2417e2, lines 199-253: units in order,
# lines 238-240; "duration out of range" above 2^63-1 ns, lines 243-249). gpupool.monitoring.duration holds
# that grammar; tests/test_monitoring_durations.py checks every $defs/duration field is listed here.
DURATIONS = (
    ("monitoring", "alerts", "idleFor"),
    ("monitoring", "alerts", "pendingFor"),
    ("monitoring", "alerts", "migStuckFor"),
)


@rule("GP163", "an alert duration Prometheus cannot read")
def prometheus_durations(ctx: Context) -> None:
    """Prometheus reads a rule's `for:` with its own duration grammar (prometheus/common model/time.go,
    ParseDuration): units y, w, d, h, m, s, ms each at most once, biggest first, and at most 2^63-1 ns. It
    refuses a rule file holding one it cannot read, and with it every gpupool alert and recording rule.

    Passes:
        monitoring: {enabled: true, alerts: {pendingFor: 1h30m}}
    Fails:
        monitoring: {enabled: true, alerts: {pendingFor: 30m2h}}
    """
    for path in DURATIONS:
        value = _get(ctx.data, *path)
        if not isinstance(value, str) or not ctx.usable(path):
            continue
        try:
            parse_ms(value)
        except DurationError as e:
            ctx.error(path, f"must be a Prometheus duration ({e}); Prometheus refuses the whole rule file otherwise")
