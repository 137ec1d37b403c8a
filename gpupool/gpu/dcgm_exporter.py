"""Facts about NVIDIA's dcgm-exporter, the GPU Operator operand whose series gpupool's monitoring reads
(docs/monitoring.md): the variables that make it attribute every GPU resource to the pods holding it."""

from __future__ import annotations

from collections.abc import Iterable

VIRTUAL_GPUS_ENV = "KUBERNETES_VIRTUAL_GPUS"  # dcgm-exporter pkg/cmd/app.go CLIKubernetesVirtualGPUs
RESOURCE_NAMES_ENV = "NVIDIA_RESOURCE_NAMES"  # ... CLINvidiaResourceNames


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
