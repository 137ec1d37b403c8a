"""DeviceClasses: the classes of the pools with `allocation: dra` (gpupool.k8s.dra), one component for all, and
NVIDIA's DRA driver release beside them (gpupool.k8s.dra_install)."""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Chart, Desired

from . import helm_release
from .k8s_objects import Registry


class DeviceClasses(pulumi.ComponentResource):
    TYPE = "gpupool:gpu:DeviceClasses"

    def __init__(
        self,
        name: str,
        objects: list[Desired],
        registry: Registry,
        opts: pulumi.ResourceOptions | None = None,
        driver: Chart | None = None,
        skip_await: bool = False,
    ):
        super().__init__(self.TYPE, name, None, opts)
        for obj in objects:
            registry.register(obj, self)
        outputs: dict[str, object] = {"deviceClasses": [o.manifest["metadata"]["name"] for o in objects]}
        if driver is not None:
            helm_release.install(driver, registry, self, skip_await)
            outputs.update({"driverChart": driver.chart, "driverChartVersion": driver.version or ""})
        self.register_outputs(outputs)
