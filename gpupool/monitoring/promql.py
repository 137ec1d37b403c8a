"""The series gpupool reads and the PromQL it builds from them: one place for every label name and join.

Label formats, from the exporters' source:
- dcgm-exporter (4.x, internal/pkg/rendermetrics/render_metrics.go): every GPU series has `gpu`, `UUID`,
  `pci_bus_id`, `device`, `modelName`, MIG series also `GPU_I_PROFILE` and `GPU_I_ID`, and the host as
  `hostname` (`Hostname` before dcgm-exporter #655, 2026-05). In Kubernetes the host is the NODE_NAME the
  operator's DaemonSet sets (internal/pkg/hostname/hostname.go), i.e. the node name. Pod attribution adds
  `pod`, `namespace`, `container` and, in virtual-GPU mode, `vgpu` (internal/pkg/transformation/const.go);
  in that mode every pod sharing a device gets its own copy of the device's value (kubernetes.go
  `Process`), and a device no pod holds keeps one series without pod labels.
- kube-state-metrics (internal/store/pod.go, utils.go): `kube_pod_container_resource_requests{namespace,
  pod, uid, container, node, resource, unit}` with the resource name sanitised (`[^a-zA-Z0-9_]` -> `_`),
  `kube_pod_status_phase{namespace, pod, uid, phase}`, `kube_resourcequota{namespace, resourcequota,
  resource, type}` with the quota key as written (`requests.nvidia.com/gpu`), and `kube_node_labels{node,
  label_<sanitised key>}` for the keys in `--metric-labels-allowlist=nodes=[...]`; with its resourceclaims
  resource enabled (`--resources=...,resourceclaims`, experimental; internal/store/resourceclaim.go),
  `kube_resourceclaim_allocation_device_info{namespace, resourceclaim, request, driver, pool, device}` per
  allocated device and `kube_resourceclaim_status_reserved_for{namespace, resourceclaim, consumer_resource,
  consumer_name, consumer_uid}` per consumer.
"""

from __future__ import annotations

import re

from gpupool.gpu import dra_driver

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # 0-1; reported per MIG instance (DCGM_FI_DEV_GPU_UTIL is not)
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
REQUESTS = "kube_pod_container_resource_requests"
PHASE = "kube_pod_status_phase"
NODE_LABELS = "kube_node_labels"
QUOTA = "kube_resourcequota"
ALLOCATABLE = "kube_node_status_allocatable"
CLAIM_DEVICES = "kube_resourceclaim_allocation_device_info"
CLAIM_CONSUMERS = "kube_resourceclaim_status_reserved_for"

NODE_POOL_LABEL = "label_gpupool_dev_pool"  # kube_node_labels of the node label gpupool.dev/pool
MIG_STATE_LABEL = "label_nvidia_com_mig_config_state"  # ... of nvidia.com/mig.config.state
# What kube-state-metrics must be told to export (its --metric-labels-allowlist), see docs/explanation/monitoring.md.
KSM_NODE_LABELS = ("gpupool.dev/pool", "nvidia.com/mig.config.state")
GPU_RESOURCES = "nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.+"
GPU_REQUESTS = f'{REQUESTS}{{resource=~"{GPU_RESOURCES}"}}'  # containers' GPU requests, any pod

# Recorded series (gpupool.monitoring.rules); names follow level:metric:operations. The older `gpupool:` names
# are kept: `gpupool usage` reads the static ones as the history of past prices and weights, which a rename
# would hide (the series recorded before it keep the old name).
NODE_POOL = "gpupool:node_pool:info"
TENANT_INFO = "gpupool:tenant:info"
RESOURCE_WEIGHT = "gpupool:resource_gpu_weight"
MIG_DEVICE_WEIGHT = "gpupool:mig_device_gpu_weight"
POOL_GPUS = "gpupool:pool_gpus:count"
POOL_PRICE = "pool:gpupool_price_per_gpu_hour:max"  # the spec's price, recorded so `gpupool usage` prices history
MIG_PROFILE_SLICES = "profile:gpupool_mig_compute_slices:max"  # a MIG profile's compute slices (the catalog)
TENANT_GRANTED = "gpupool:namespace_gpu_granted:gpu_equivalents"
ACTIVE = "gpupool:dcgm_gr_engine_active:pool"
DEVICE_BUSY = "gpupool:device_gpu_busy:gpu_equivalents"
POD_ALLOC = "gpupool:pod_gpu_alloc:gpu_equivalents"
NAMESPACE_ALLOC = "gpupool:namespace_gpu_alloc:gpu_equivalents"
POD_USED = "gpupool:pod_gpu_used:gpu_equivalents"
NAMESPACE_USED = "gpupool:namespace_gpu_used:gpu_equivalents"
POOL_ALLOC = "gpupool:pool_gpu_alloc:gpu_equivalents"
POOL_USED = "gpupool:pool_gpu_used:gpu_equivalents"
# A DRA pool's devices: the profile key of the driver's device names (`1g10gb`; "" for a whole GPU) -> the resource
# name it serves (gpupool.monitoring.rules, static), so a claimed device is weighed like a request of that name.
DRA_DEVICE_RESOURCE = "gpupool:dra_device_resource:info"

DEVICE = ("node", "UUID", "GPU_I_ID")  # one physical device: a whole GPU or a MIG instance


def ksm_resource(name: str) -> str:
    """A Kubernetes resource name as kube-state-metrics writes it in `resource` (utils.go SanitizeLabelName)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def quoted(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dcgm(metric: str, matchers: str = "") -> str:
    """A dcgm-exporter series with its host as `node`, from either spelling of the host label."""
    sel = f"{metric}{{{matchers}}}" if matchers else metric
    return f'label_replace(label_replace({sel}, "node", "$1", "Hostname", "(.+)"), "node", "$1", "hostname", "(.+)")'


def share_of_device(active: str) -> str:
    """Each series' value divided by the number of series of its device at that instant.

    On a time-sliced or MPS GPU every sharing pod reports the device's value (the exporter copies it), so a
    sum would count the device once per pod. Dividing by the pods on the device splits the measured activity
    equally among them: what is attributed per pod is a share, not a per-pod measurement (docs/explanation/monitoring.md).
    On an exclusive GPU or MIG instance the count is 1."""
    by = ", ".join(DEVICE)
    return f"({active}) / on({by}) group_left() count by ({by}) ({active})"


def _running(expr: str) -> str:
    return f'{expr} * on(namespace, pod) group_left() (max by (namespace, pod) ({PHASE}{{phase="Running"}}) == 1)'


def running_gpu_requests(node_pool: str = NODE_POOL, device_resource: str = DRA_DEVICE_RESOURCE) -> str:
    """What running pods hold: their GPU requests per container, and the devices NVIDIA's DRA driver allocated to
    claims of pods that request no GPU name, each as a request of the name it serves ({namespace, pod, node,
    resource}, in kube-state-metrics' labels). A pod asking a name on a DRA pool also has the claim kube-scheduler
    made for it; `unless` keeps it counted once, by its requests. NODE_POOL and DEVICE_RESOURCE: the node -> pool
    and device-profile -> resource series (the recorded ones, or `gpupool usage`'s with the spec's fallback)."""
    return f"({_running(GPU_REQUESTS)}) or ({claimed_devices(node_pool, device_resource)})"


def claimed_devices(node_pool: str = NODE_POOL, device_resource: str = DRA_DEVICE_RESOURCE) -> str:
    """Devices the DRA driver allocated to claims of running pods without GPU requests, one series per pod and
    resource. The driver's `pool` is the node (one pool per node, named after it); the device name gives the MIG
    profile key (gpupool.gpu.dra_driver). A claim is charged to one pod it is reserved for (a tenant's claim serves
    one pod: the DRA guard's dra-shared-claim)."""
    devices = (
        f'label_replace(label_replace(label_replace({CLAIM_DEVICES}{{driver="{dra_driver.DRIVER}"}}, '
        f'"node", "$1", "pool", "(.+)"), "pool", "", "", ""), '
        f'"device_profile", "$1", "device", "{dra_driver.MIG_DEVICE_NAME}")'
    )
    consumer = (
        f'topk by (namespace, resourceclaim) (1, label_replace({CLAIM_CONSUMERS}{{consumer_resource="pods"}}, '
        f'"pod", "$1", "consumer_name", "(.+)"))'
    )
    per_pod = (
        f"count by (namespace, pod, node, device_profile) "
        f"({devices} * on(namespace, resourceclaim) group_left(pod) {consumer})"
    )
    named = (
        f"sum by (namespace, pod, node, resource) ({per_pod} * on(node) group_left(pool) {node_pool}"
        f" * on(pool, device_profile) group_left(resource) {device_resource})"
    )
    return _running(f"({named} unless on(namespace, pod) {GPU_REQUESTS})")


def node_pool_from_labels() -> str:
    """node -> pool from the gpupool.dev/pool node label (kube-state-metrics with the label allowlisted)."""
    return (
        f'max by (node, pool) (label_replace({NODE_LABELS}{{{NODE_POOL_LABEL}!=""}}, "pool", "$1", '
        f'"{NODE_POOL_LABEL}", "(.+)"))'
    )


def weighted_active(mig: str, whole: str, slices: str = MIG_PROFILE_SLICES) -> str:
    """Device activity in GPU-equivalents. MIG (the series MIG, with node and UUID): each instance x its
    compute slices / the slices of the instances present on its own GPU at that moment (dcgm-exporter gives
    MIG series the parent GPU's UUID; gpupool.gpu.mig.layout_weights: a GPU's instances add up to one GPU,
    a stranded slice paid by the instances that strand it); whole GPUs (the series WHOLE) as they are.
    SLICES: a vector of compute slices by GPU_I_PROFILE; a profile it lacks is not weighed.

    The exporter reports every instance of a GPU, held or not: dcgm-exporter internal/pkg/deviceinfo/
    device_info.go initializeGPUInfo adds each GPU instance of DCGM's GetGPUInstanceHierarchy to its parent GPU
    (FE_GPU_I entities), so the slices present on a GPU are its layout's. It reads the hierarchy when it starts;
    MIG Manager restarts the operator's pods around a re-layout (inferred), so a new layout's instances appear
    with it."""
    dev = ", ".join(DEVICE)
    per_device = f"max by ({dev}, GPU_I_PROFILE) ({mig}) * 0 + on(GPU_I_PROFILE) group_left() ({slices})"
    # the weight first (slices / the GPU's slices), then activity x weight: 0.8 x 1/2 is 0.4 exactly
    weight = f"({per_device}) / on(node, UUID) group_left() sum by (node, UUID) ({per_device})"
    return f"(({mig}) * on({dev}) group_left() ({weight})) or ({whole})"
