"""Every GPU model gpupool knows, MIG-capable or not, and the one function that resolves a model name.

`resolve_gpu` is what every command and rule uses: it accepts short names, aliases and GFD product strings
(case-insensitive), and tells "known, has no MIG" apart from "unknown, did you mean ...". MIG geometry stays in
gpupool.gpu.mig (mig.yaml); models without MIG are listed in gpus.yaml.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass

from gpupool.gpu.mig import GpuModel, _norm, catalog


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_gb: int
    aliases: tuple[str, ...] = ()
    mig: GpuModel | None = None  # the MIG geometry, for MIG-capable models
    compute_capability: str | None = None  # "8.9"; None where gpus.yaml does not say

    @property
    def mps_max_replicas(self) -> int | None:
        """The most MPS clients (replicas) the MPS control daemon accepts per GPU of this model: 16 below
        compute capability 7.5, else 48 (k8s-device-plugin v0.20.0 cmd/mps-control-daemon/mps/device.go,
        maxClients and isAtLeastVolta). None when the compute capability is unknown."""
        if self.compute_capability is None:
            return None
        major, minor = (int(x) for x in self.compute_capability.split("."))
        return 48 if (major, minor) >= (7, 5) else 16


@dataclass(frozen=True)
class Lookup:
    query: str
    gpu: Gpu | None  # None: not a model gpupool knows
    suggestion: str | None  # for an unknown name: the closest known model name

    @property
    def mig(self) -> GpuModel | None:
        return self.gpu.mig if self.gpu else None


class UnknownGpu(ValueError):
    """Not a model gpupool knows, or (for MIG questions) a model without MIG: a usage error."""


@functools.lru_cache(maxsize=1)
def known_gpus() -> dict[str, Gpu]:
    """name -> Gpu: the MIG catalog's models, then the models without MIG (gpus.yaml)."""
    from importlib import resources

    import yaml

    out = {name: Gpu(name, model.memory_gb, model.aliases, model) for name, model in catalog().models.items()}
    data = yaml.safe_load(resources.files("gpupool").joinpath("gpu/gpus.yaml").read_text(encoding="utf-8"))
    for name, entry in data["models"].items():
        if name in out:
            raise ValueError(f"gpus.yaml: {name} is also in the MIG catalog")
        cc = entry.get("compute_capability")
        out[name] = Gpu(name, int(entry["memory_gb"]), tuple(entry.get("aliases", ())), None, str(cc) if cc else None)
    return out


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    index: dict[str, str] = {}
    for gpu in known_gpus().values():
        for key in (gpu.name, *gpu.aliases):
            other = index.setdefault(_norm(key), gpu.name)
            if other != gpu.name:
                raise ValueError(f"GPU catalog: {key!r} names both {other} and {gpu.name}")
    return index


def resolve_gpu(name: str) -> Lookup:
    """The model NAME denotes (short name, alias or GFD product string), or the closest known name."""
    if not isinstance(name, str):
        return Lookup(str(name), None, None)
    found = _index().get(_norm(name))
    if found:
        return Lookup(name, known_gpus()[found], None)
    keys = list(_index())
    close = difflib.get_close_matches(_norm(name), keys, n=1, cutoff=0.6)
    return Lookup(name, None, _index()[close[0]] if close else None)


def mig_names() -> list[str]:
    return list(catalog().models)


def require_mig(name: str) -> GpuModel:
    """The MIG geometry of NAME; UnknownGpu says 'L4 has no MIG' for a known model without it."""
    found = resolve_gpu(name)
    if found.mig is not None:
        return found.mig
    raise UnknownGpu(mig_problem(found))


def mig_problem(found: Lookup) -> str:
    """Why NAME cannot be used for MIG, in one sentence (no quoting beyond the name itself)."""
    if found.gpu is not None:
        return (
            f"{found.gpu.name} has no MIG: it is a whole-GPU model (share it with timeSlicing or mps); "
            f"MIG models: {', '.join(mig_names())} (`gpupool mig models` lists them)"
        )
    guess = f" (did you mean {found.suggestion}?)" if found.suggestion else ""
    return (
        f"unknown GPU model {found.query!r}{guess}; `gpupool mig models` lists the known models "
        "(GFD product names such as NVIDIA-H100-80GB-HBM3 are accepted too)"
    )
