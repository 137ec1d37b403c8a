"""The GPU Operator's default MIG configs (its presets), read from the operator's own ConfigMap.

gpupool names its own mig-parted ConfigMap in the ClusterPolicy, and with a custom name the operator mounts
that ConfigMap alone (gpu-operator v26.7.0 controllers/object_controls.go, TransformMigManager, lines
2069-2092): a node outside gpupool labelled with a preset (`nvidia.com/mig.config=all-1g.10gb`) would find its
config missing at mig-manager's next start and turn `failed`. So gpupool's config carries every preset beside
its own configs, exactly as the operator ships them. Facts and source: gpu-operator.yaml (`mig_presets`).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml

from gpupool.gpu.operator_facts import mig_presets_fact


def preset_file_bytes() -> bytes:
    return resources.files("gpupool.gpu").joinpath(str(mig_presets_fact()["file"])).read_bytes()


@functools.lru_cache(maxsize=1)
def presets() -> dict[str, list[dict[str, Any]]]:
    """name -> mig-parted config (a list of device entries), in the operator's order."""
    config_map = yaml.safe_load(preset_file_bytes())
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    return config["mig-configs"]
