"""NVIDIA's DRA driver as gpupool installs it for pools with `allocation: dra`: its Helm release, beside the GPU
Operator's ClusterPolicy, in the operator's namespace. Pure data, no Pulumi. Why this shape: docs/explanation/dra.md.

Facts from the chart (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, deployments/helm/dra-driver-nvidia-gpu):
- `resources.gpus.enabled` (default true) fails the render unless `gpuResourcesEnabledOverride` is true
  (templates/validation.yaml 33-43): the chart's guard against a device plugin on the same node. gpupool keeps the
  GPU Operator's device plugin off DRA pools' nodes (gpupool.k8s.dra.DEPLOY_DEVICE_PLUGIN), so it sets it;
- `resources.computeDomains.enabled` (default true) adds the ComputeDomain controller and CRDs (multi-node
  NVLink), which no gpupool pool uses: off;
- `nvidiaDriverRoot` is `/run/nvidia/driver` where the GPU Operator's driver container installs the driver, `/`
  for a driver on the host (values.yaml 19-23; hack/kubelet-plugin-prestart.sh 134-143);
- `kubeletPlugin.affinity` defaults to NVIDIA PCI labels (values.yaml); gpupool requires its pool label instead,
  so the kubelet plugin runs on DRA pools' nodes only. Helm replaces the chart's list of terms with ours;
- the `gpu.nvidia.com` DeviceClass maps `nvidia.com/gpu` whenever resource.k8s.io/v1 is served
  (templates/deviceclass-gpu.yaml 13; `resourceApiVersion` would drop it only by writing v1beta2, which
  kube-apiserver v1.36 does not serve by default: pkg/controlplane/instance.go 487-492). Of two classes mapping
  a name the later wins, on a tie the one whose name sorts first (k8s.io/api v0.36.3 resource/v1/types.go
  1978-1992), and `gpu.nvidia.com` sorts before `gpupool-...`: beside a pool's whole-GPU class, pods asking
  `nvidia.com/gpu` would be charged to a class every tenant quota holds at 0. So the mapping is removed after
  Helm renders, where a DRA pool serves whole GPUs: a Pulumi transform (components/helm_release.py), a Flux
  post-renderer (gpupool.k8s.delivery); an Argo CD Application or a values file cannot, and is refused.

The kubelet plugin enumerates devices once, when it starts (cmd/gpu-kubelet-plugin/device_state.go 96,
NewDeviceState; driver.go 475-491 publishes that list), so after a MIG re-layout it must start again, and it must
not start before MIG Manager has made the partitions. On MIG-capable pools the affinity therefore also requires
`nvidia.com/mig.config.state=success`: MIG Manager writes `pending` while it re-lays a node out (and gpupool's mig
step writes it first, gpupool.k8s.mig_step), the DaemonSet controller then deletes the plugin's pod there (a node
that no longer fits a daemon pod's required affinity loses it: k8s.io/kubernetes v1.36.3
pkg/controller/daemon/daemon_controller.go NodeShouldRunDaemonPod), and makes a new one at `success`, which
enumerates the new partitions.
"""

from __future__ import annotations

from typing import Any

from gpupool.k8s.desired import LABEL_POOL
from gpupool.k8s.helm_chart import Chart, Patch, deep_merge
from gpupool.k8s.rollout import LABEL_STATE
from gpupool.model import platform as m

RELEASE = "dra-driver-nvidia-gpu"  # the Helm release and Pulumi name (the chart names its objects after it)
CHART = "dra-driver-nvidia-gpu"
COMPONENT = "dra"  # beside the pools' DeviceClasses (gpupool.k8s.dra.COMPONENT)
DRIVER_CLASS_MAPPING_GPU = "gpu.nvidia.com"  # the chart's class that maps nvidia.com/gpu (see the module docstring)
CONTAINER_DRIVER_ROOT = "/run/nvidia/driver"
# What removes the mapping from the rendered class (see the module docstring).
UNMAP_GPU = Patch("DeviceClass", DRIVER_CLASS_MAPPING_GPU, ("/spec/extendedResourceName",))


def kubelet_plugin_affinity(spec: m.Spec) -> dict[str, Any]:
    """Required node affinity: a DRA pool's node, and on MIG-capable pools only once MIG Manager reports success."""
    # MIG Manager configures (and writes the state of) the MIG-capable pools' nodes, as mig_configs gives them a config.
    gated = sorted(p.name for p in spec.dra_pools if p.mig_capable)
    plain = sorted(p.name for p in spec.dra_pools if not p.mig_capable)
    terms = []
    if gated:
        terms.append(
            {
                "matchExpressions": [
                    {"key": LABEL_POOL, "operator": "In", "values": gated},
                    {"key": LABEL_STATE, "operator": "In", "values": ["success"]},
                ]
            }
        )
    if plain:
        terms.append({"matchExpressions": [{"key": LABEL_POOL, "operator": "In", "values": plain}]})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def values(spec: m.Spec) -> dict[str, Any]:
    ours = {
        "nvidiaDriverRoot": CONTAINER_DRIVER_ROOT if spec.cluster.operator.driver else "/",
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {"affinity": kubelet_plugin_affinity(spec)},
    }
    return deep_merge(ours, dict(spec.cluster.dra_driver.values))


def chart(spec: m.Spec, depends_on: tuple[str, ...] = ()) -> Chart | None:
    """The driver's release, or None: no DRA pool, or the spec says the cluster has the driver (`install: false`)."""
    driver = spec.cluster.dra_driver
    if not spec.dra_pools or not driver.install:
        return None
    namespace = spec.cluster.operator.namespace
    vals = values(spec)
    patches = (UNMAP_GPU,) if maps_whole_gpus(spec) else ()
    if driver.chart_path:
        return Chart(RELEASE, driver.chart_path, None, None, namespace, vals, depends_on, COMPONENT, patches)
    version = driver.chart_version.removeprefix("v")  # the chart's semver has no v (Chart.yaml 21-22)
    return Chart(RELEASE, CHART, version, driver.repository, namespace, vals, depends_on, COMPONENT, patches)


def maps_whole_gpus(spec: m.Spec) -> bool:
    """Whether a DRA pool serves whole GPUs: then the chart's own `nvidia.com/gpu` mapping must go (module doc)."""
    return any(m.GPU in pool.physical_resources_per_node() for pool in spec.dra_pools)
