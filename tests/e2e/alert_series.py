"""The series a healthy cluster built from a spec exports, for promtool unit tests of gpupool's alerts
(tests/e2e/test_monitoring_rules.py): every node of every pool, what each advertises, a DCGM exporter on each
with a series per GPU or MIG instance, the ResourceQuotas and Kueue ClusterQueues as gpupool renders them, and
one running pod per granted tenant, busy.

Label formats as the exporters write them: kube-state-metrics internal/store/node.go (`kube_node_labels`,
`kube_node_spec_unschedulable{node}`, `kube_node_status_allocatable{node, resource, unit}`), pod.go,
resourcequota.go; dcgm-exporter internal/pkg/rendermetrics/render_metrics.go and transformation/kubernetes.go
(a device no pod holds keeps the scrape target's namespace/pod, which honorLabels leaves); Kueue v0.19.2
pkg/metrics/metrics.go (`kueue_pending_workloads{cluster_queue, status, replica_role}` 411-419,
`kueue_cluster_queue_status{cluster_queue, status, replica_role}` 772-778, one series per status with 1 on the
current one, ReportClusterQueueStatus 1193-1203; a stopped ClusterQueue is `pending`, lines 51-58).

Healthy here includes what a real cluster carries for good and must not alert on: gpupool's own
`mig.config.state=pending` on an uncordoned node (gpupool.k8s.rollout: a chain that did not wait), a GPU whose
DCGM_FI_DEV_XID_ERRORS still holds an XID from before the window (the gauge never resets), an offboarded
tenant's stopped ClusterQueue, and ResourceQuotas sized to Kueue's admission ceiling (above the grants).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupool.k8s import manifests
from gpupool.model import platform as m
from gpupool.monitoring import promql as q

# Every 2 minutes for 3h20m: promtool evaluates every rule at every step, so a coarser step than the usual 1m
# keeps the whole prod cluster's tests fast. Not 5m: a series recorded by another group one step earlier would
# fall outside Prometheus' 5m lookback (left-open), which no real 30s-1m evaluation interval meets.
INTERVAL = "2m"
SAMPLES = 100
EXPORTER_TARGET = {
    "job": "nvidia-dcgm-exporter",
    "service": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
}
BUSY = 0.6  # what a tenant pod's device reports


def labels(d: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def const(value: float, n: int = SAMPLES) -> str:
    return f"{value:g}x{n}"


def node_names(pool: m.NodePool) -> list[str]:
    """Named pools' nodes, and for a selector pool names of its own."""
    return list(pool.nodes) or [f"{pool.name}-{i}" for i in range(1, pool.node_count + 1)]


@dataclass
class Device:
    """One GPU or MIG instance of a node, as the exporter reports it."""

    pool: m.NodePool
    node: str
    gpu: int
    resource: str  # what the device plugin advertises for it
    profile: str = ""  # MIG profile
    instance: int = 0
    holder: tuple[str, str] | None = None  # (namespace, pod)

    @property
    def uuid(self) -> str:
        return f"GPU-{self.node}-{self.gpu}"


@dataclass
class Cluster:
    """The series by name-and-labels; scenarios edit them before they go to promtool."""

    spec: m.Spec
    series: dict[str, str] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)

    def put(self, metric: str, lab: dict[str, str], values: str) -> str:
        key = metric + labels(lab)
        self.series[key] = values
        return key

    def drop(self, predicate) -> int:
        gone = [k for k in self.series if predicate(k)]
        for k in gone:
            del self.series[k]
        return len(gone)

    def input_series(self) -> list[dict[str, str]]:
        return [{"series": k, "values": v} for k, v in self.series.items()]


def _devices(pool: m.NodePool, node: str) -> list[Device]:
    out = []
    for gpu in range(pool.gpus_per_node):
        group = next((g for g in pool.sharing.mig if gpu in g.gpus), None)
        if group is None:
            out.append(Device(pool, node, gpu, pool.advertised_name(m.GPU)))
            continue
        instance = 0
        for profile, n in sorted(group.layout.items()):
            for _ in range(n):
                instance += 1
                out.append(Device(pool, node, gpu, pool.advertised_name(m.mig_resource(profile)), profile, instance))
    return out


def _dcgm_labels(d: Device) -> dict[str, str]:
    lab = {
        "gpu": str(d.gpu),
        "UUID": d.uuid,
        "pci_bus_id": f"00000000:{d.gpu + 16:02X}:00.0",
        "device": f"nvidia{d.gpu}",
        "modelName": d.pool.gpu_model,
    }
    if d.profile:
        lab.update(GPU_I_PROFILE=d.profile, GPU_I_ID=str(d.instance))
    lab["hostname"] = d.node
    lab.update(EXPORTER_TARGET, instance=f"{d.node}:9400")
    if d.holder:
        lab.update(namespace=d.holder[0], pod=d.holder[1], container="main")
    else:
        lab.update(namespace="gpu-operator", pod=f"nvidia-dcgm-exporter-{d.node}")
    return lab


def dcgm_key(metric: str, d: Device) -> str:
    return metric + labels(_dcgm_labels(d))


def xid_key(node: str, gpu: int, model: str) -> str:
    d = Device(m.NodePool("x", model, 1, 1), node, gpu, m.GPU)
    lab = _dcgm_labels(d)
    return q.XID_ERRORS + labels(lab)


def _nodes(c: Cluster) -> None:
    for pool in c.spec.pools:
        for i, node in enumerate(node_names(pool)):
            lab = {"node": node, q.NODE_POOL_LABEL: pool.name}
            if pool.sharing.mig:
                # the first node carries the `pending` gpupool wrote where it did not wait (never answered)
                lab[q.MIG_STATE_LABEL] = "pending" if i == 0 else "success"
            c.put(q.NODE_LABELS, lab, const(1))
            c.put("kube_node_spec_unschedulable", {"node": node}, const(0))
            for resource, n in pool.resources_per_node().items():
                c.put(q.ALLOCATABLE, {"node": node, "resource": q.ksm_resource(resource), "unit": "integer"}, const(n))
            c.devices += _devices(pool, node)


def _pods(c: Cluster) -> None:
    """One running pod per tenant with a grant, on a free device of what it was granted first."""
    for t in c.spec.active_tenants:
        granted = [r for r, n in sorted(t.gpus.items()) if n > 0]
        if not granted:
            continue
        d = next(d for d in c.devices if d.holder is None and d.resource == granted[0])
        pod = f"{t.name}-0"
        d.holder = (t.namespace, pod)
        req = {"namespace": t.namespace, "pod": pod, "uid": f"uid-{pod}", "container": "main", "node": d.node}
        req.update(resource=q.ksm_resource(d.resource), unit="integer")
        c.put(q.REQUESTS, req, const(1))
        for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            lab = {"namespace": t.namespace, "pod": pod, "uid": f"uid-{pod}", "phase": phase}
            c.put(q.PHASE, lab, const(int(phase == "Running")))


def _exporters(c: Cluster) -> None:
    for d in c.devices:
        c.put(q.GR_ENGINE_ACTIVE, _dcgm_labels(d), const(BUSY if d.holder else 0.05))
    for pool in c.spec.pools:
        for node in node_names(pool):
            for gpu in range(pool.gpus_per_node):
                c.series[xid_key(node, gpu, pool.gpu_model)] = const(0)
    # XIDs from before the window, still held by the gauge: a hardware one and an application one
    first = c.spec.pools[0]
    c.series[xid_key(node_names(first)[0], 3, first.gpu_model)] = const(79)
    last = c.spec.pools[-1]
    c.series[xid_key(node_names(last)[0], 0, last.gpu_model)] = const(13)


def _rendered(c: Cluster) -> None:
    """ResourceQuotas and Kueue as gpupool renders them; each tenant uses half of each grant."""
    objects = [d.manifest for d in manifests.build(c.spec).objects]
    grants = {t.namespace: t.gpus for t in c.spec.active_tenants}
    for o in objects:
        if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "gpu-quota":
            ns = o["metadata"]["namespace"]
            for key, hard in o["spec"]["hard"].items():
                used = grants.get(ns, {}).get(key.removeprefix("requests."), 0) // 2
                base = {"namespace": ns, "resourcequota": "gpu-quota", "resource": key}
                c.put(q.QUOTA, {**base, "type": "hard"}, const(int(hard)))
                c.put(q.QUOTA, {**base, "type": "used"}, const(used))
        if o["kind"] == "ClusterQueue":
            name = o["metadata"]["name"]
            status = "pending" if o["spec"].get("stopPolicy") in ("Hold", "HoldAndDrain") else "active"
            for s in ("active", "inadmissible"):
                c.put(
                    "kueue_pending_workloads",
                    {"cluster_queue": name, "status": s, "replica_role": "standalone"},
                    const(0),
                )
            for s in ("pending", "active", "terminating"):
                lab = {"cluster_queue": name, "status": s, "replica_role": "standalone"}
                c.put("kueue_cluster_queue_status", lab, const(int(s == status)))


def healthy(spec: m.Spec) -> Cluster:
    c = Cluster(spec)
    _nodes(c)
    _pods(c)
    _exporters(c)
    _rendered(c)
    return c


def rendered_nominal(spec: m.Spec) -> dict[tuple[str, str], int]:
    """(flavor, resource) -> the nominal quotas of the rendered ClusterQueues and Cohorts together."""
    out: dict[tuple[str, str], int] = {}
    for o in (d.manifest for d in manifests.build(spec).objects):
        if o["kind"] not in ("ClusterQueue", "Cohort"):
            continue
        for group in o["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    key = (flavor["name"], r["name"])
                    out[key] = out.get(key, 0) + int(r["nominalQuota"])
    return out
