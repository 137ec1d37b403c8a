"""gpupool's alerts: the `gpupool.alerts` group of the PrometheusRule (gpupool.monitoring.rules assembles the
groups). docs/explanation/monitoring.md has the runbook of each alert, the anchor every `runbook_url` points at.

Each alert is meant to be quiet on a healthy cluster and to fire on the failure it names
(tests/e2e/test_monitoring_rules.py proves both with promtool, on series generated from the prod spec):

- grants are compared with what the pools' nodes advertise, not with ResourceQuotas: under Kueue a tenant's
  `gpu-quota` is its admission ceiling (nominal quota plus borrowing, gpupool.model.queues.max_admitted), not
  its grant, so quotas add up to more than exists by design;
- an XID alerts as a change of DCGM_FI_DEV_XID_ERRORS, which holds the *last* XID and never resets
  (NVIDIA/dcgm-exporter#500), hardware XIDs apart from those user programs cause;
- gpupool's own `pending` MIG state (written where a rollout does not wait, gpupool.k8s.rollout) is not
  "stuck": only a cordoned node (a rollout is on it) or a rebooting one is, past the rollout's own deadline;
- a pool node without DCGM series, a pool short of nodes, Kueue work left pending and a tenant's ClusterQueue
  that is not active each have an alert.

Recorded series added here (Prometheus' level:metric:operations naming) come first in the group: a group's
rules run in order, so the alerts below them read this evaluation's values.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpupool.model import platform as m
from gpupool.model import queues
from gpupool.monitoring import promql as q
from gpupool.monitoring.duration import parse_seconds

RUNBOOK = "docs/explanation/monitoring.md"  # gpupool's docs: each alert's runbook is the section named after it

# Static series (what the spec says), recorded beside the alerts that read them.
GRANTED = "namespace_resource:gpupool_granted:count"  # {namespace, tenant, resource}: a grant, in units
POOL_NODES = "pool:gpupool_nodes:count"  # {pool}: nodes the spec gives the pool
QUEUE_NOMINAL = "pool_resource:gpupool_kueue_nominal_quota:sum"  # {pool, resource (kube-state-metrics)}
CLUSTER_QUEUES = "cluster_queue:gpupool_kueue_cluster_queue:info"  # {cluster_queue, namespace}: 1
# Live: what each pool's nodes advertise now, per resource (kube-state-metrics spelling).
POOL_ALLOCATABLE = "pool_resource:kube_node_status_allocatable:sum"

UNSCHEDULABLE = "kube_node_spec_unschedulable"  # kube-state-metrics internal/store/node.go: {node}, 1 = cordoned
KUEUE_PENDING = "kueue_pending_workloads"  # kueue v0.19.2 pkg/metrics/metrics.go 411-419: {cluster_queue, status}
KUEUE_CQ_STATUS = "kueue_cluster_queue_status"  # ... 772-778 and ReportClusterQueueStatus 1193-1203

# XIDs a user program causes (NVIDIA's XID catalog, docs.nvidia.com/deploy/xid-errors: 13 Graphics Engine
# Exception, 31 GPU memory page fault, 43 GPU stopped processing, 45 preemptive cleanup after a previous error;
# the table lists "user application error" among their causes and restarting the application as the action
# (inferred for the exact resolution buckets: the catalog's rows could not be read here in full)).
APPLICATION_XIDS = (13, 31, 43, 45)
XID_HARDWARE_WINDOW = "1h"  # how long a new hardware XID keeps its alert firing
XID_APPLICATION_WINDOW = "15m"


def _num(x: Fraction | float | int) -> str:
    """A PromQL number literal; exact fractions keep 12 significant digits."""
    return f"{float(x):.12g}"


def _static(record: str, value: Fraction | float | int, labels: dict[str, str]) -> dict[str, Any]:
    return {"record": record, "expr": f"vector({_num(value)})", "labels": dict(labels)}


def anchor(alert: str) -> str:
    """The docs/explanation/monitoring.md anchor of an alert's runbook: its `### Name` heading, as GitHub slugs it."""
    return alert.lower()


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str, **labels: str) -> dict:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, **labels},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOK}#{anchor(name)}",
        },
    }


def _with_node(expr: str) -> str:
    """A dcgm-exporter expression with its host as `node` (as gpupool.monitoring.promql.dcgm does for a selector)."""
    return f'label_replace(label_replace({expr}, "node", "$1", "Hostname", "(.+)"), "node", "$1", "hostname", "(.+)")'


def _node_state(state: str) -> str:
    return f'max by (node) ({q.NODE_LABELS}{{{q.MIG_STATE_LABEL}="{state}"}})'


def in_mig_rollout() -> str:
    """Nodes MIG Manager is working on: rebooting, or `pending` on a cordoned node. gpupool also writes `pending`
    itself where a rollout does not wait (a node it never rolled, adoption, nothing changed; gpupool.k8s.rollout),
    and that state may stay for good; but it cordons a node only for the time MIG Manager reconfigures it."""
    return f"({_node_state('rebooting')} or ({_node_state('pending')} and on(node) ({UNSCHEDULABLE} == 1)))"


def mig_stuck_for(spec: m.Spec) -> str:
    """MigConfigStuck's `for`: the slowest MIG pool's rollout deadline (rollout.nodeTimeoutSeconds, after which
    `gpupool up` itself fails naming the node) plus monitoring.alerts.migStuckFor."""
    deadline = max(
        (p.rollout.node_timeout_seconds for p in spec.pools if p.mig_capable), default=m.Rollout().node_timeout_seconds
    )
    total = deadline + int(parse_seconds(spec.monitoring.alerts.mig_stuck_for))
    return f"{total // 60}m" if total % 60 == 0 else f"{total}s"


def static_rules(spec: m.Spec) -> list[dict[str, Any]]:
    """Grants, pool sizes and (with queueing) the Kueue nominal quotas and ClusterQueues, from the spec."""
    out: list[dict[str, Any]] = []
    for t in spec.active_tenants:
        for resource, n in sorted(t.gpus.items()):
            if n > 0:
                out.append(_static(GRANTED, n, {"namespace": t.namespace, "tenant": t.name, "resource": resource}))
    for pool in spec.pools:
        out.append(_static(POOL_NODES, pool.node_count, {"pool": pool.name}))
    if spec.queueing is not None:
        for line in queues.flavor_lines(spec, spec.queueing):
            if line.nominal + line.cohort_quota > 0:
                labels = {"pool": line.flavor, "resource": q.ksm_resource(line.resource)}
                out.append(_static(QUEUE_NOMINAL, line.nominal + line.cohort_quota, labels))
        for t in spec.active_tenants:
            out.append(_static(CLUSTER_QUEUES, 1, {"cluster_queue": t.name, "namespace": t.namespace}))
    out.append(
        {
            "record": POOL_ALLOCATABLE,
            "expr": (
                f'sum by (pool, resource) ({q.ALLOCATABLE}{{resource=~"{q.GPU_RESOURCES}"}}'
                f" * on(node) group_left(pool) {q.NODE_POOL})"
            ),
        }
    )
    return out


def capacity_alerts(spec: m.Spec) -> list[dict[str, Any]]:
    """Grants and nominal quotas against what the pools' nodes advertise now; pools short of nodes."""
    out = []
    # A node MIG Manager is reconfiguring advertises nothing for a while (the device plugin is paused, the node
    # may reboot): a planned dip, not drift. The capacity alerts wait while a re-layout runs (cluster-wide for
    # the per-resource one, per pool for Kueue's); MigConfigStuck watches a re-layout that does not end.
    rolling = in_mig_rollout()
    rolling_pools = f"({rolling} * on(node) group_left(pool) {q.NODE_POOL})"
    # One rule per resource: each has its own oversubscription ratio. `or vector(0)`: no node advertising the
    # resource at all is +Inf, not silence.
    for resource in spec.advertised_resources():
        ratio = spec.oversubscription.exact_ratio_for(resource)
        out.append(
            _alert(
                "GpuQuotaOvercommit",
                f"sum({GRANTED}{{resource={q.quoted(resource)}}})"
                f" / (sum({POOL_ALLOCATABLE}{{resource={q.quoted(q.ksm_resource(resource))}}}) or vector(0))"
                f" > {_num(ratio)} unless on() count({rolling})",
                "15m",
                "warning",
                "GPU grants promise more than the pools' nodes advertise",
                f"Tenant grants of {resource} add up to {{{{ $value | humanize }}}}x what the pools' nodes advertise; "
                f"the spec allows {float(ratio):g}x. Nodes are missing, drained, or advertise less than the spec says.",
                resource=resource,
            )
        )
    if spec.queueing is not None:
        out.append(
            _alert(
                "GpuQueueQuotaOvercommit",
                f"({QUEUE_NOMINAL} > on(pool, resource) ({POOL_ALLOCATABLE} or {QUEUE_NOMINAL} * 0))"
                f" unless on(pool) {rolling_pools}",
                "15m",
                "warning",
                "Kueue nominal quotas exceed what a pool's nodes advertise",
                "The ClusterQueues' nominal quota of {{ $labels.resource }} on pool {{ $labels.pool }} "
                "({{ $value }}) is more than the pool's nodes advertise: Kueue admits work that cannot be placed.",
            )
        )
    out.append(
        _alert(
            "GpuPoolNodesMissing",
            f"{POOL_NODES} > on(pool) (count by (pool) ({q.NODE_POOL}) or {POOL_NODES} * 0)",
            "15m",
            "warning",
            "A pool has fewer nodes than the spec gives it",
            "Pool {{ $labels.pool }} should have {{ $value }} nodes labelled gpupool.dev/pool; fewer exist.",
        )
    )
    return out


def quota_alerts(spec: m.Spec) -> list[dict[str, Any]]:
    """A tenant near its grant; GPU pods and Kueue workloads left pending; ClusterQueues not active."""
    a = spec.monitoring.alerts
    used = (
        f'label_replace(sum by (namespace, resource) ({q.QUOTA}{{resourcequota="gpu-quota", type="used", '
        f'resource=~"requests\\\\.nvidia\\\\.com/.+"}}), "resource", "$1", "resource", "requests\\\\.(.+)")'
    )
    out = [
        _alert(
            "GpuQuotaAlmostFull",
            f"{used} / on(namespace, resource) group_left(tenant) {GRANTED} >= {_num(a.quota_almost_full)}",
            "15m",
            "info",
            "A tenant uses almost all of its GPU grant",
            "{{ $labels.namespace }} uses {{ $value | humanizePercentage }} of its {{ $labels.resource }} grant.",
        ),
        _alert(
            "GpuPodsPending",
            f"sum by (namespace, pod) ({q.GPU_REQUESTS})"
            f' * on(namespace, pod) group_left() (max by (namespace, pod) ({q.PHASE}{{phase="Pending"}}) == 1) > 0',
            a.pending_for,
            "warning",
            "A GPU pod cannot be scheduled",
            f"{{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} has been pending with a GPU request for {a.pending_for}.",
        ),
    ]
    if spec.queueing is None:
        return out
    # max by (cluster_queue, status): with Kueue in HA every replica may export the gauge (label replica_role).
    out += [
        _alert(
            "KueueWorkloadsPending",
            f"sum by (cluster_queue) (max by (cluster_queue, status) ({KUEUE_PENDING}))"
            f" * on(cluster_queue) group_left(namespace) {CLUSTER_QUEUES} > 0",
            a.pending_for,
            "warning",
            "Kueue holds a tenant's workloads pending",
            f"ClusterQueue {{{{ $labels.cluster_queue }}}} has had {{{{ $value }}}} pending workloads for {a.pending_for}.",
        ),
        _alert(
            "KueueClusterQueueInactive",
            f"{CLUSTER_QUEUES} unless on(cluster_queue)"
            f' (max by (cluster_queue) ({KUEUE_CQ_STATUS}{{status="active"}}) == 1)',
            "15m",
            "warning",
            "A tenant's ClusterQueue is not active",
            "ClusterQueue {{ $labels.cluster_queue }} is not reported active by Kueue: it admits nothing.",
        ),
    ]
    return out


def node_alerts(spec: m.Spec) -> list[dict[str, Any]]:
    """MIG Manager's state, XIDs, and pool nodes without DCGM series."""
    xid = q.XID_ERRORS
    application = " or ".join(f"{xid} == {n}" for n in (0, *APPLICATION_XIDS))
    by = "node, gpu, UUID, modelName"

    def changed(values: str, window: str) -> str:
        return f"max by ({by}) ({_with_node(f'({values}) and (changes({xid}[{window}]) > 0)')})"

    app_only = " or ".join(f"{xid} == {n}" for n in APPLICATION_XIDS)
    stuck = mig_stuck_for(spec)
    return [
        _alert(
            "MigConfigFailed",
            _node_state("failed"),
            "5m",
            "critical",
            "MIG Manager failed to apply a MIG layout",
            "{{ $labels.node }} reports nvidia.com/mig.config.state=failed: its GPUs are not in the layout the spec asks for.",
        ),
        _alert(
            "MigConfigStuck",
            in_mig_rollout(),
            stuck,
            "warning",
            "A MIG re-layout does not finish",
            f"{{{{ $labels.node }}}} has been rebooting, or cordoned with nvidia.com/mig.config.state=pending, for {stuck}.",
        ),
        _alert(
            "GpuXidHardwareError",
            changed(f"{xid} unless ({application})", XID_HARDWARE_WINDOW),
            "0m",
            "critical",
            "A GPU reported a hardware XID error",
            f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.UUID }}}}) on {{{{ $labels.node }}}} reported XID {{{{ $value }}}} "
            f"within the last {XID_HARDWARE_WINDOW}.",
        ),
        _alert(
            "GpuXidApplicationError",
            changed(f"{xid} and ({app_only})", XID_APPLICATION_WINDOW),
            "0m",
            "info",
            "A program on a GPU hit an application XID",
            f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.node }}}} reported XID {{{{ $value }}}} within the last "
            f"{XID_APPLICATION_WINDOW}: usually the program's own fault (13, 31, 43, 45).",
        ),
        _alert(
            "GpuExporterMissing",
            f"(max by (node, pool) ({q.NODE_POOL}) unless on(node) max by (node) ({q.dcgm(q.GR_ENGINE_ACTIVE)}))"
            f" unless on(node) {in_mig_rollout()}",
            "15m",
            "warning",
            "A GPU node has no DCGM exporter series",
            "{{ $labels.node }} (pool {{ $labels.pool }}) has no DCGM_FI_PROF_GR_ENGINE_ACTIVE series: its GPUs "
            "read as unused in gpupool usage and the idle and XID alerts cannot see them.",
        ),
    ]


def idle_alert(spec: m.Spec) -> dict[str, Any]:
    a = spec.monitoring.alerts
    return _alert(
        "GpuAllocatedButIdle",
        f"max by (namespace, pod, pool) (avg_over_time({q.ACTIVE}[1h]))"
        f" * on(namespace) group_left(tenant, cost_center) {q.TENANT_INFO} < {_num(a.idle_below)}",
        a.idle_for,
        "warning",
        "A pod holds a GPU it does not use",
        "{{ $labels.namespace }}/{{ $labels.pod }} (pool {{ $labels.pool }}) kept its GPU engine "
        f"below {a.idle_below:.0%} busy for {a.idle_for} (1h average {{{{ $value | humanizePercentage }}}}). "
        "On a time-sliced or MPS GPU the value is the shared device's.",
    )


def alert_rules(spec: m.Spec) -> list[dict[str, Any]]:
    """The alerts group's rules: the static and live series the alerts read, then the alerts."""
    return [
        *static_rules(spec),
        idle_alert(spec),
        *quota_alerts(spec),
        *capacity_alerts(spec),
        *node_alerts(spec),
    ]


def alert_names(spec: m.Spec) -> list[str]:
    return sorted({r["alert"] for r in alert_rules(spec) if "alert" in r})
