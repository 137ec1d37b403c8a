"""Facts about NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1, its kubelet plugin with
default feature gates) that gpupool's classes and chargeback read: its name, how it names the devices it publishes,
and that each node's devices form one pool named after the node (docs/explanation/dra.md)."""

from __future__ import annotations

import re

DRIVER = "gpu.nvidia.com"  # cmd/gpu-kubelet-plugin/main.go 42
# A static MIG device: gpu-<parent minor>-mig-<profile key>-<GI profile id>-<placement start> (mig.go 111-114,
# MigSpecTuple.ToCanonicalName); a whole GPU: gpu-<minor> (deviceinfo.go 106-108).
MIG_DEVICE_NAME = r"gpu-[0-9]+-mig-(.+)-[0-9]+-[0-9]+"


def device_profile_key(profile: str) -> str:
    """The MIG profile as it appears in the driver's device names: its dots removed, then toRFC1123Compliant
    (lower case, anything but [a-z0-9-.] as `-`, `-` trimmed, a trailing `.` dropped; mig.go ToCanonicalName):
    `1g.10gb` -> `1g10gb`, `1g.10gb+me` -> `1g10gb-me`."""
    name = re.sub(r"[^a-z0-9-.]", "-", profile.replace(".", "").lower()).strip("-")
    return name.removesuffix(".")
