"""MigConfig and DevicePluginConfig: the ConfigMaps the GPU Operator's MIG Manager and device plugin read.

Both update in place (the provider sets enableConfigMapMutable), so an edit previews as a readable
diff of the embedded YAML instead of a delete-and-recreate that briefly removes the config. The
operator restarts the readers because their env carries a hash of this content (see manifests.py).
"""

from __future__ import annotations

import pulumi

from gpupool.k8s.manifests import Desired

from .k8s_objects import Registry


class MigConfig(pulumi.ComponentResource):
    """The MIG ConfigMap (a re-layout's chains come after it: gpupool.k8s.rollout)."""

    TYPE = "gpupool:gpu:MigConfig"

    def __init__(
        self,
        name: str,
        config_map: Desired,
        pool_configs: dict[str, str],
        registry: Registry,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(self.TYPE, name, None, opts)
        registry.register(config_map, self)
        self.config_name = config_map.manifest["metadata"]["name"]
        self.pool_configs = pool_configs
        self.register_outputs({"configMap": self.config_name, "poolConfigs": pool_configs})


class DevicePluginConfig(pulumi.ComponentResource):
    TYPE = "gpupool:gpu:DevicePluginConfig"

    def __init__(
        self,
        name: str,
        config_map: Desired,
        pool_configs: dict[str, str],
        registry: Registry,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__(self.TYPE, name, None, opts)
        registry.register(config_map, self)
        self.config_name = config_map.manifest["metadata"]["name"]
        self.pool_configs = pool_configs
        self.register_outputs(
            {"configMap": self.config_name, "keys": sorted(config_map.manifest["data"]), "poolConfigs": pool_configs}
        )
