"""Facts about the pinned GPU Operator chart, kept as data in gpu-operator.yaml (with their sources)."""

from __future__ import annotations

import functools
from importlib import resources

import yaml

# The operands whose env gpupool writes (values.<operand>.env).
OPERANDS = ("devicePlugin", "gfd", "migManager")


@functools.lru_cache(maxsize=1)
def _facts() -> dict:
    return yaml.safe_load(resources.files("gpupool.gpu").joinpath("gpu-operator.yaml").read_text(encoding="utf-8"))


def chart_version() -> str:
    return _facts()["chart_version"]


def operator_managed_env() -> dict[str, tuple[str, ...]]:
    """operand -> the variables the operator itself sets in that operand's DaemonSet."""
    return {k: tuple(v) for k, v in _facts()["operator_managed_env"].items()}


def mig_presets_fact() -> dict[str, object]:
    """Where the operator's default MIG configs come from (file, source, git blob id, count)."""
    return dict(_facts()["mig_presets"])
