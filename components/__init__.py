"""gpupool's Pulumi components (installed as `gpupool.pulumi`): `GpuPlatform` composes a whole platform."""

from .platform import GpuPlatform, GpuPlatformArgs
from .provider import kubernetes_provider

__all__ = ["GpuPlatform", "GpuPlatformArgs", "kubernetes_provider"]
