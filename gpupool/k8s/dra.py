"""What a pool with `allocation: dra` needs from the cluster: its DeviceClasses, its nodes' labels, and the DRA
forms of every tenant's grant in the tenant's quota. Pure data, no Pulumi. Design and sources: docs/explanation/dra.md.

Device classes. One per DRA pool and physical resource (each MIG profile, and whole GPUs), selecting the
devices NVIDIA's DRA driver publishes (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, driver name
`gpu.nvidia.com`, cmd/gpu-kubelet-plugin/main.go 42): attribute `type` is `gpu` for a whole GPU and `mig` for a
static MIG device (types.go 27, 32; deviceinfo.go 153-163, mig.go 139-153), `profile` is the MIG profile
(`1g.10gb`, as in the driver's demo/specs/extended-resources/mig-1g-12gb.yaml 67) and `productName` the NVML
name of the GPU (nvlib.go 490). Each class maps the resource name the device plugin advertises today through
`extendedResourceName`, so a pod asking `nvidia.com/mig-1g.10gb: 1` is served unchanged.

What a class cannot say: which node. A DeviceClass selector sees only the device's driver, attributes,
capacity and allowMultipleAllocations (k8s.io/dynamic-resource-allocation v0.36.3 cel/compile.go 319-323), and
`extendedResourceName` should be unique in the cluster (k8s.io/api v0.36.3 resource/v1/types.go 1978-1992: of two
classes naming it, the later one wins). So the class is the pool's by the GPU product and by being the only
class of its resource name (GP231 refuses two DRA pools serving one name); the devices it can reach are the
ones the driver publishes, on the nodes where its kubelet plugin runs (docs/explanation/dra.md, the driver installation).

Quota keys, as kube-apiserver v1.36.3 spells them (pkg/quota/v1/evaluator/core/resource_claims.go 47-53,
111-136, 138-167; k8s.io/api v0.36.3 core/v1/types.go 7786-7788):
- `<class>.deviceclass.resource.k8s.io/devices`: devices a namespace's ResourceClaims request of a class (an
  `All` request counts as 32, a `firstAvailable` request its largest alternative per class: 236-289);
- `requests.deviceclass.resource.kubernetes.io/<class>`: the implicit extended resource of a class, which a pod
  may request by that name (pods.go 84-97) and which the scheduler's claim for a pod is charged with;
- `requests.<extendedResourceName>`: already in every tenant's GPU quota (gpupool.k8s.manifests);
- `count/resourceclaims.resource.k8s.io`: ResourceClaim objects (resource_claims.go 47).
"""

from __future__ import annotations

import re
from typing import Any

from gpupool.gpu import dra_driver
from gpupool.gpu.mig import RESOURCE_PREFIX as MIG_PREFIX
from gpupool.gpu.models import resolve_gpu
from gpupool.k8s.desired import MANAGED_BY, Desired
from gpupool.k8s.naming import content_hash
from gpupool.model import platform as m

API_VERSION = "resource.k8s.io/v1"
DRIVER = dra_driver.DRIVER
# The classes the driver's chart creates itself (v0.4.1 deployments/helm/dra-driver-nvidia-gpu/templates/
# deviceclass-gpu.yaml, -mig.yaml, -vfio-gpu.yaml): any device of its kind on any node, so no tenant may use them.
DRIVER_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")
GPU_TYPE = "gpu"
MIG_TYPE = "mig"
# The GPU Operator's device plugin DaemonSet runs only where this label is "true" (gpu-operator v26.7.0
# assets/state-device-plugin/0500_daemonset.yaml 19-20), and the operator keeps a value a node already has
# (controllers/state_manager.go 470-476, addGPUStateLabels): "false" keeps the plugin off a DRA pool's nodes,
# so no node has a device plugin and a DRA class serving one resource name.
DEPLOY_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
COMPONENT = "dra"
PER_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"  # core/v1 types.go 7786, ResourceClaimsPerClass
IMPLICIT_PREFIX = (
    "requests.deviceclass.resource.kubernetes.io/"  # types.go 7788, ResourceImplicitExtendedClaimsPerClass
)
CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"  # resource_claims.go 47, ClaimObjectCountName
MAX_CLASS_NAME = 63  # the implicit extended resource name `deviceclass.resource.kubernetes.io/<class>`: a name part
_CEL_SAFE = re.compile(r"^[A-Za-z0-9 ._+-]+$")  # catalog strings written into CEL literals


def class_name(pool: m.NodePool, physical: str) -> str:
    """`gpupool-<pool>-gpu`, `gpupool-<pool>-mig-1g.10gb` (a `+` written as `.`, as the operator names its
    presets). Cut with a hash of the whole when longer than a name part of a resource name may be."""
    what = "gpu" if physical == m.GPU else physical.split("/", 1)[1]
    name = re.sub(r"[^a-z0-9.-]", ".", f"gpupool-{pool.name}-{what}".lower())
    if len(name) <= MAX_CLASS_NAME:
        return name
    digest = content_hash(name)[:8]
    return f"{name[: MAX_CLASS_NAME - 9].rstrip('.-')}-{digest}"


def pool_classes(pool: m.NodePool) -> dict[str, str]:
    """Resource name -> the pool's class serving it (empty for a device-plugin pool)."""
    if not pool.dra:
        return {}
    return {pool.advertised_name(name): class_name(pool, name) for name in pool.physical_resources_per_node()}


def classes_by_resource(spec: m.Spec) -> dict[str, str]:
    """Resource name -> the DRA class serving it, over all DRA pools (GP231 keeps it one class per name)."""
    out: dict[str, str] = {}
    for pool in spec.dra_pools:
        for name, cls in pool_classes(pool).items():
            out.setdefault(name, cls)
    return dict(sorted(out.items()))


def all_classes(spec: m.Spec) -> list[str]:
    return sorted({cls for pool in spec.dra_pools for cls in pool_classes(pool).values()})


def _attr(name: str) -> str:
    return f"device.attributes['{DRIVER}'].{name}"


def _literal(text: str) -> str:
    if not _CEL_SAFE.match(text):
        raise ValueError(f"not a catalog string gpupool writes into CEL: {text!r}")
    return f"'{text}'"


def product_names(gpu_model: str) -> list[str]:
    """The GFD product strings of a model (NVML's name with spaces as dashes, gpupool/gpu/gpus.yaml), each also
    with the `NVIDIA-` prefix GFD's lookup ignores. Empty for a model gpupool does not know (GP250 warns)."""
    gpu = resolve_gpu(gpu_model).gpu
    if gpu is None:
        return []
    names = set(gpu.aliases)
    names |= {f"NVIDIA-{a}" for a in gpu.aliases if not a.startswith(("NVIDIA-", "Tesla-"))}
    return sorted(names)


def mig_profile(pool: m.NodePool, physical: str) -> str:
    """The profile behind a MIG resource name, as the driver publishes it (`1g.10gb+me`: the resource name writes
    `+` as `.`, gpupool.gpu.mig.mig_resource)."""
    return pool.mig_profile(physical)


def selector(pool: m.NodePool, physical: str) -> str:
    """The class's CEL: the driver, the device type, the MIG profile, and the pool's GPU product."""
    parts = [f"device.driver == '{DRIVER}'"]
    if physical.startswith(MIG_PREFIX):
        parts += [f"{_attr('type')} == '{MIG_TYPE}'", f"{_attr('profile')} == {_literal(mig_profile(pool, physical))}"]
    else:
        parts.append(f"{_attr('type')} == '{GPU_TYPE}'")
    products = product_names(pool.gpu_model)
    if products:
        # productName is NVML's (`NVIDIA A100-SXM4-80GB`); the catalog lists GFD's spelling (spaces as dashes).
        listed = ", ".join(_literal(p) for p in products)
        parts.append(f"{_attr('productName')}.replace(' ', '-') in [{listed}]")
    return " && ".join(parts)


def device_class(pool: m.NodePool, physical: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {
            "name": class_name(pool, physical),
            "labels": {**MANAGED_BY, "gpupool.dev/pool": pool.name},
        },
        "spec": {
            "selectors": [{"cel": {"expression": selector(pool, physical)}}],
            "extendedResourceName": pool.advertised_name(physical),
        },
    }


def objects(spec: m.Spec) -> list[Desired]:
    """Every DRA pool's DeviceClasses (nothing for a spec without DRA pools)."""
    return [
        Desired(COMPONENT, f"deviceclass-{class_name(pool, name)}", device_class(pool, name))
        for pool in spec.dra_pools
        for name in pool.physical_resources_per_node()
    ]


def node_labels(pool: m.NodePool) -> dict[str, str]:
    """What a DRA pool's nodes carry beside gpupool's other labels: the device plugin off (see DEPLOY_DEVICE_PLUGIN)."""
    return {DEPLOY_DEVICE_PLUGIN: "false"} if pool.dra else {}


def granted_classes(spec: m.Spec, grants: dict[str, int]) -> list[str]:
    """The DRA classes a tenant may name in its claims: those serving a resource it is granted."""
    return sorted({cls for name, cls in classes_by_resource(spec).items() if grants.get(name, 0) > 0})


def quota_hard(spec: m.Spec, grants: dict[str, int]) -> dict[str, str]:
    """The DRA entries of a tenant's GPU quota: per class, its grant under both class keys (zero for classes it
    is not granted, and for the driver's own classes), and a bound on ResourceClaim objects (every claim a pod
    needs holds at least one granted device, so no more claims than granted DRA devices). Empty without DRA pools."""
    if not spec.dra_pools:
        return {}
    per_class = {cls: grants.get(name, 0) for name, cls in classes_by_resource(spec).items()}
    per_class.update({cls: 0 for cls in DRIVER_CLASSES})
    hard: dict[str, str] = {}
    for cls, count in sorted(per_class.items()):
        hard[cls + PER_CLASS_SUFFIX] = str(count)
        hard[IMPLICIT_PREFIX + cls] = str(count)
    hard[CLAIM_COUNT] = str(sum(per_class.values()))
    return hard


def kueue_mappings(spec: m.Spec) -> list[dict[str, Any]]:
    """Kueue's `resources.deviceClassMappings` (kueue v0.19.2 apis/config/v1beta2/configuration_types.go 634-663):
    each DRA class counted under the resource name it serves, the name the tenants' ClusterQueues already give
    quota. Kueue counts a pod's `nvidia.com/...` requests on a DRA-backed name under the mapped name too
    (pkg/dra/extended_resources.go resolveQuotaKey), so both forms draw on one quota. Claims from
    ResourceClaimTemplates are counted only through a mapping (an unmapped class makes the workload
    inadmissible: pkg/dra/claims.go GetResourceRequestsForResourceClaimTemplates). Kueue accepts at most 16
    mappings (pkg/config/validation.go 484)."""
    return [{"name": name, "deviceClassNames": [cls]} for name, cls in classes_by_resource(spec).items()]
