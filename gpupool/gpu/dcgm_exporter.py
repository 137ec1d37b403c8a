"""Facts about NVIDIA's dcgm-exporter, the GPU Operator operand whose series gpupool's monitoring reads
(docs/explanation/monitoring.md): the variables that make it attribute every GPU resource to the pods holding it, and what
that mode needs to stay right for the exporter's other readers."""

from __future__ import annotations

from collections.abc import Iterable

VIRTUAL_GPUS_ENV = "KUBERNETES_VIRTUAL_GPUS"  # dcgm-exporter pkg/cmd/app.go CLIKubernetesVirtualGPUs
RESOURCE_NAMES_ENV = "NVIDIA_RESOURCE_NAMES"  # ... CLINvidiaResourceNames
# GPU Operator v26.7.0 chart value (deployments/gpu-operator/values.yaml 308, default false), handed to the
# ClusterPolicy (templates/clusterpolicy.yaml 571-572) and set on the exporter's DaemonSet
# (controllers/object_controls.go 1850-1852, api/nvidia/v1/clusterpolicy_types.go IsHostPIDEnabled 2239-2244).
HOST_PID_VALUE = "hostPID"
# What virtual-GPU mode turns into per-process values (dcgm-exporter transformation/process_metrics.go 30-32).
PER_PROCESS_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED")


def attribution_env(software_shared: bool, extra_resource_names: Iterable[str]) -> dict[str, str]:
    """What the exporter needs to attribute every GPU resource advertised (dcgm-exporter source):

    - it maps devices to pods only for `nvidia.com/gpu`, `nvidia.com/mig-*` and the names listed in
      NVIDIA_RESOURCE_NAMES (transformation/kubernetes.go `iterateGPUDevices`), so a renamed
      `nvidia.com/gpu.shared` must be listed (EXTRA_RESOURCE_NAMES);
    - without virtual-GPU mode a time-sliced device maps to one of its pods only; KUBERNETES_VIRTUAL_GPUS
      gives every pod sharing it a series (`toDeviceToSharingPods`), wanted where SOFTWARE_SHARED."""
    env: dict[str, str] = {}
    if software_shared:
        env[VIRTUAL_GPUS_ENV] = "true"
    extra = sorted(set(extra_resource_names))
    if extra:
        env[RESOURCE_NAMES_ENV] = ",".join(extra)
    return env


def needs_host_pid(env: dict[str, str]) -> bool:
    """Whether the exporter must share the host's PID namespace for ENV to keep its other series right.

    With KUBERNETES_VIRTUAL_GPUS the exporter rewrites DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED of every pod
    on every GPU (not only shared ones) into per-process values (transformation/kubernetes.go `Process`,
    360-369: `isPerProcessMetric` then `createPerProcessMetrics`): NVML's process list per GPU, each PID mapped
    to its pod by reading /proc/<pid>/cgroup (pidmapper.go 45), and every pod whose PIDs it could not map set
    to "0" (`buildIdlePodValues`). NVML reports host PIDs; in the exporter's own PID namespace (the chart's
    default, hostPID false) no such /proc entry exists, so every pod reads 0 (the Linux PID-namespace part
    is inferred, not read in source)."""
    return env.get(VIRTUAL_GPUS_ENV) == "true"
