"""The ResourceSlice NVIDIA's DRA driver publishes for a node whose GPUs MIG Manager has partitioned: what the
scheduler sees of a DRA pool's node in tests/e2e/test_dra_scheduler.py.

Shaped after kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1 (tag commit 764900e7), its kubelet plugin with default
feature gates:
- driver `gpu.nvidia.com` (cmd/gpu-kubelet-plugin/main.go 42); one slice per node holding every device, its pool
  named after the node (driver.go 474-486), owned by the Node (vendored k8s.io/dynamic-resource-allocation
  kubeletplugin/draplugin.go 908-913) and named `<5-digit hex index>-gpu.nvidia.com-<node>-<random>`
  (resourceslice/resourceslicecontroller.go 864-875);
- a GPU in MIG mode publishes its existing MIG devices only, not itself (nvlib.go 302-319);
- static MIG devices carry no `consumesCounters` and the slice no `sharedCounters`: counters come only with the
  alpha `DynamicMIG` gate (pkg/featuregates/featuregates.go 64, 116-121), which destroys the partitions MIG Manager
  made (driver.go 110, nvlib.go 420-455), so it is not how a gpupool pool runs;
- a MIG device is named `gpu-<parent minor>-mig-<profile without dots>-<GI profile id>-<placement start>` (mig.go
  111-114); its attributes are bare names in the driver's domain, so CEL reads
  `device.attributes['gpu.nvidia.com'].profile` (mig.go 139-185, deviceinfo.go 209-232): `type` "mig", `uuid`,
  `parentUUID`, `profile`, `productName` (NVML's name, with spaces), `brand`, `architecture`,
  `cudaComputeCapability`, `driverVersion`, `cudaDriverVersion` and the parent's PCI attributes; its capacity
  holds the engines, `memory` and one `memorySlice<i>` per memory slice of its placement (mig.go 118-135,
  deviceinfo.go 224-229).

The hardware figures (SMs, memory per profile, GI profile ids, placements) are an A100-SXM4-80GB's as NVIDIA's MIG
user guide lists them; the UUIDs and versions are placeholders. Nothing here reads gpupool's code.
"""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.nvidia.com"
A100_80GB = "NVIDIA A100-SXM4-80GB"  # NVML's name: spaces, not GFD's dashes

# profile -> (GI profile id, SMs, memory) on an A100-SXM4-80GB (MIG user guide, "A100 MIG profiles").
A100_80GB_PROFILES = {
    "1g.10gb": (19, 14, "9728Mi"),
    "2g.20gb": (14, 28, "19968Mi"),
    "3g.40gb": (9, 42, "40192Mi"),
}
# NVIDIA's all-balanced layout of one A100-80GB (mig-parted's default config, the operator's preset) with a valid
# placement each: (profile, placement start, memory slices).
ALL_BALANCED = (("2g.20gb", 0, 2), ("1g.10gb", 2, 1), ("1g.10gb", 3, 1), ("3g.40gb", 4, 4))


def _string(value: str) -> dict[str, str]:
    return {"string": value}


def _gpu_attributes(minor: int, product: str, architecture: str, compute_capability: str) -> dict[str, Any]:
    """What a GPU publishes about itself (deviceinfo.go 153-195); a MIG device carries its parent's copy of the same
    (mig.go 139-185, CommonAttributesMig)."""
    return {
        "productName": _string(product),
        "brand": _string("Nvidia"),
        "architecture": _string(architecture),
        "cudaComputeCapability": {"version": compute_capability},
        "driverVersion": {"version": "580.95.5"},
        "cudaDriverVersion": {"version": "13.0.0"},
        "resource.kubernetes.io/pciBusID": _string(f"0000:{7 + minor:02x}:00.0"),
        "resource.kubernetes.io/pcieRoot": _string("pci0000:00"),
    }


def mig_device(minor: int, profile: str, start: int, slices: int, node: str) -> dict[str, Any]:
    gi_id, sms, memory = A100_80GB_PROFILES[profile]
    capacity = {
        "multiprocessors": {"value": str(sms)},
        "copyEngines": {"value": str(max(1, sms // 14))},
        "decoders": {"value": "0"},
        "encoders": {"value": "0"},
        "jpegEngines": {"value": "0"},
        "ofaEngines": {"value": "0"},
        "memory": {"value": memory},
    }
    capacity.update({f"memorySlice{i}": {"value": "1"} for i in range(start, start + slices)})
    return {
        "name": f"gpu-{minor}-mig-{profile.replace('.', '')}-{gi_id}-{start}",
        "attributes": {
            "type": _string("mig"),
            "uuid": _string(f"MIG-{node}-{minor}-{profile}-{start}"),
            "parentUUID": _string(f"GPU-{node}-{minor}"),
            "profile": _string(profile),
            **_gpu_attributes(minor, A100_80GB, "Ampere", "8.0.0"),
        },
        "capacity": capacity,
    }


def gpu_device(minor: int, node: str, product: str, memory: str = "80Gi") -> dict[str, Any]:
    """A whole GPU (MIG mode off): `gpu-<minor>`, the attributes of deviceinfo.go 153-195, capacity `memory` only
    (partitions.go 655-664)."""
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": _string("gpu"),
            "uuid": _string(f"GPU-{node}-{minor}"),
            **_gpu_attributes(minor, product, "Hopper", "9.0.0"),
        },
        "capacity": {"memory": {"value": memory}},
    }


def node_slice(node: str, node_uid: str, gpus: int, layout=ALL_BALANCED, devices=None) -> dict[str, Any]:
    """The one ResourceSlice of a node: `gpus` A100-80GBs, each partitioned as `layout`, or the DEVICES given."""
    if devices is None:
        devices = [
            mig_device(minor, profile, start, slices, node)
            for minor in range(gpus)
            for profile, start, slices in layout
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"00000-{DRIVER}-{node}-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
            ],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def publish(cp, node: dict[str, Any], gpus: int = 0, devices=None) -> None:
    """Publish NODE's slice (node_slice) through CP's API, as the driver's kubelet plugin would; NODE as stored."""
    name, uid = node["metadata"]["name"], node["metadata"]["uid"]
    status, obj = cp.api(
        "POST", "/apis/resource.k8s.io/v1/resourceslices", node_slice(name, uid, gpus, devices=devices)
    )
    assert status == 201, obj


def driver_classes() -> list[dict[str, Any]]:
    """The classes the driver's chart creates (v0.4.1 deployments/helm/dra-driver-nvidia-gpu/templates/
    deviceclass-gpu.yaml, deviceclass-mig.yaml), without the chart's `nvidia.com/gpu` mapping, which docs/explanation/dra.md
    says to turn off beside gpupool's classes: any GPU or MIG device on any node, so no tenant may name them."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{DRIVER}' && "
                            f"device.attributes['{DRIVER}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))
    ]
