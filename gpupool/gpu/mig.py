"""MIG geometry: the packaged catalog (gpupool/gpu/mig.yaml) and the single-GPU fit check.

Pure functions, no Pulumi and no I/O beyond reading the packaged catalog once. The fit check follows the
reference (gpu-sharing.md section 3): every GPU instance (GI) is an interval of memory slices that must start
at one of its profile's allowed slots; GIs may not overlap, and counts/compute slices are capped per model.
mig-parted would reject a bad layout only on the node (`nvidia.com/mig.config.state=failed`), so we check
before rollout and say what would be valid instead.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

RESOURCE_PREFIX = "nvidia.com/mig-"

# `<C>c.<G>g.<M>gb`: a compute-instance split. The device plugin only advertises GIs whose single CI spans the
# whole GI, so such profiles can never be requested by a pod (reference 3.2).
_CI_PROFILE = re.compile(r"^\d+c\.")


def mig_resource(profile: str) -> str:
    """Extended resource the device plugin advertises for a MIG profile under the `mixed` strategy: `+` is
    written `.` (reference 4.2)."""
    return RESOURCE_PREFIX + profile.replace("+", ".")


def compute_instance_split(profile: object) -> str | None:
    """For a compute-instance split such as `1c.2g.20gb`, the whole-instance profile (`2g.20gb`); else None."""
    if isinstance(profile, str) and _CI_PROFILE.match(profile):
        return _CI_PROFILE.sub("", profile)
    return None


_PROFILE = re.compile(r"^(?P<g>\d+)g\.(?P<m>\d+)gb(?P<attr>.*)$")


@dataclass(frozen=True)
class MigProfile:
    name: str
    compute: int  # SM slices
    memory: int  # memory slices
    max_count: int  # max instances of this profile on one GPU
    starts: tuple[int, ...]  # allowed start slots on the memory slices
    gi_id: int | None = None  # GPU-instance profile id (nvidia-smi mig -lgip), when the reference gives it

    @property
    def resource_name(self) -> str:
        return mig_resource(self.name)

    @property
    def is_media_extension(self) -> bool:
        return "+me" in self.name


@dataclass(frozen=True)
class GpuModel:
    name: str
    aliases: tuple[str, ...]
    memory_gb: int
    compute_slices: int
    memory_slices: int
    max_instances: int
    profiles: Mapping[str, MigProfile]
    presets: Mapping[str, Mapping[str, int]]
    family: str = ""
    placements: str = ""  # verified | inferred | unverified (how sure the catalog is of the start slots)
    source: str = ""
    device_ids: tuple[str, ...] = ()

    def __hash__(self) -> int:  # profiles/presets are dicts; the name identifies a model (caches key on it)
        return hash(self.name)


def _norm(name: str) -> str:
    """Normalise a model name or GFD product string for lookup.

    GFD writes the NVML product name with spaces replaced by dashes; humans write spaces. Under the `single`
    strategy GFD appends `-MIG-<profile>` and with sharing `-SHARED`, so those suffixes are stripped too.
    """
    key = re.sub(r"[\s_]+", "-", name.strip().lower())
    key = re.sub(r"-shared$", "", key)
    key = re.sub(r"-mig-.*$", "", key)
    if key.startswith("nvidia-"):
        key = key[len("nvidia-") :]
    return key


class Catalog:
    """All known GPU models; `resolve` accepts names, aliases and GFD product strings, case-insensitively."""

    def __init__(self, models: Mapping[str, GpuModel]):
        self.models: dict[str, GpuModel] = dict(models)
        self._index: dict[str, str] = {}
        for model in self.models.values():
            for key in (model.name, *model.aliases):
                k = _norm(key)
                other = self._index.setdefault(k, model.name)
                if other != model.name:
                    raise ValueError(f"MIG catalog: alias {key!r} names both {other} and {model.name}")

    def resolve(self, name: str) -> GpuModel | None:
        model_name = self._index.get(_norm(name)) if isinstance(name, str) else None
        return self.models.get(model_name) if model_name else None

    def names(self) -> list[str]:
        return list(self.models)


def preset_name(profile: str) -> str:
    """Operator naming of a single-profile preset: `all-1g.10gb+me` is shipped as `all-1g.10gb.me` (ref 2.2)."""
    return "all-" + profile.replace("+", ".")


def _build_catalog(data: Mapping) -> Catalog:
    families = data["families"]
    models: dict[str, GpuModel] = {}
    for name, m in data["models"].items():
        fam = families[m["family"]]
        classes = fam["classes"]
        profiles: dict[str, MigProfile] = {}
        class_to_name: dict[str, str] = {}
        for cls, pname in m["profiles"].items():
            c = classes[cls]  # KeyError here means a typo in mig.yaml
            starts = tuple(c["starts"])
            if any(s < 0 or s + c["memory"] > fam["memory_slices"] for s in starts):
                raise ValueError(f"MIG catalog: {name} {pname}: start slot outside {fam['memory_slices']} slices")
            profiles[pname] = MigProfile(pname, c["compute"], c["memory"], c["max"], starts, c.get("gi_id"))
            class_to_name[cls] = pname
        presets: dict[str, dict[str, int]] = {}
        balanced = m.get("balanced") or {class_to_name[c]: n for c, n in fam["balanced"].items()}
        presets["all-balanced"] = dict(balanced)
        for p in profiles.values():
            presets[preset_name(p.name)] = {p.name: p.max_count}
        for pname, layout in (m.get("presets") or {}).items():
            presets[pname] = dict(layout)
        models[name] = GpuModel(
            name=name,
            aliases=tuple(m.get("aliases", ())),
            memory_gb=int(m["memory_gb"]),
            compute_slices=fam["compute_slices"],
            memory_slices=fam["memory_slices"],
            max_instances=fam["max_instances"],
            profiles=profiles,
            presets=presets,
            family=m["family"],
            placements=m.get("placements", ""),
            source=m.get("source", ""),
            device_ids=tuple(m.get("device_ids", ())),
        )
    return Catalog(models)


@functools.lru_cache(maxsize=1)
def catalog() -> Catalog:
    """The packaged catalog, parsed once per process."""
    from importlib import resources

    import yaml

    text = resources.files("gpupool").joinpath("gpu/mig.yaml").read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster
    return _build_catalog(yaml.load(text, Loader=loader))


# ----------------------------------------------------------------------------------------------- fit check


@dataclass(frozen=True)
class Placement:
    profile: str
    start: int
    size: int  # memory slices [start, start + size)

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass
class FitResult:
    ok: bool
    placements: list[Placement] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why it does not fit, and what would
    warnings: list[str] = field(default_factory=list)  # conservative rules that do not block the layout

    def __bool__(self) -> bool:
        return self.ok


def _fmt_layout(layout: Mapping[str, int]) -> str:
    return " + ".join(f"{p}×{n}" if n != 1 else p for p, n in layout.items() if n) or "(nothing)"


def _fmt_starts(starts: Iterable[int]) -> str:
    return "{" + ",".join(map(str, starts)) + "}"


def closest_profile(model: GpuModel, name: str) -> str | None:
    """The profile a user most likely meant: same compute and attributes, nearest memory; else by spelling."""
    m = _PROFILE.match(name.strip().lower())
    if m:
        g, mem, attr = int(m["g"]), int(m["m"]), m["attr"]
        same = []
        for p in model.profiles:
            pm = _PROFILE.match(p)
            if pm and int(pm["g"]) == g and pm["attr"] == attr:
                same.append((abs(int(pm["m"]) - mem), p))
        if same:
            return min(same)[1]
    close = difflib.get_close_matches(name, list(model.profiles), n=1, cutoff=0.5)
    return close[0] if close else None


def _place(model: GpuModel, counts: Mapping[str, int]) -> list[Placement] | None:
    """Backtracking over allowed start slots, largest instances first; None when no placement exists."""
    items: list[MigProfile] = []
    for name, n in counts.items():
        items.extend([model.profiles[name]] * n)
    # Largest (and most constrained) first so dead ends are found near the root.
    items.sort(key=lambda p: (-p.memory, len(p.starts), p.name))
    chosen: list[int] = [0] * len(items)

    def rec(i: int, used: int) -> bool:
        if i == len(items):
            return True
        p = items[i]
        lo = -1
        if i and items[i - 1] is p:  # identical instances: non-decreasing starts, no permutations
            lo = chosen[i - 1]
        for s in p.starts:
            if s <= lo:
                continue
            mask = ((1 << p.memory) - 1) << s
            if used & mask:
                continue
            chosen[i] = s
            if rec(i + 1, used | mask):
                return True
        return False

    if not rec(0, 0):
        return None
    out = [Placement(p.name, s, p.memory) for p, s in zip(items, chosen)]
    out.sort(key=lambda pl: pl.start)
    return out


def _capacity_problems(model: GpuModel, counts: Mapping[str, int]) -> list[str]:
    reasons = []
    for name, n in counts.items():
        p = model.profiles[name]
        if n > p.max_count:
            reasons.append(f"{n} × {name} exceeds the maximum of {p.max_count} per {model.name} GPU")
    total = sum(counts.values())
    if total > model.max_instances:
        reasons.append(f"{total} GPU instances exceed the maximum of {model.max_instances} per {model.name} GPU")
    me = sum(n for name, n in counts.items() if model.profiles[name].is_media_extension)
    if me > 1:
        reasons.append(
            f"{me} media-extension (+me) instances requested; a GPU has only one set of media engines, "
            "so at most one +me instance per GPU"
        )
    compute = sum(model.profiles[name].compute * n for name, n in counts.items())
    if compute > model.compute_slices:
        reasons.append(f"needs {compute} compute slices, {model.name} has {model.compute_slices}")
    memory = sum(model.profiles[name].memory * n for name, n in counts.items())
    if memory > model.memory_slices:
        reasons.append(f"needs {memory} memory slices, {model.name} has {model.memory_slices}")
    return reasons


def fits(model: GpuModel, counts: Mapping[str, int]) -> bool:
    return not _capacity_problems(model, counts) and _place(model, counts) is not None


def _nearest_fitting(model: GpuModel, counts: Mapping[str, int], limit: int = 3) -> list[dict[str, int]]:
    """Sub-layouts that fit after removing the fewest instances: the "what would be valid" hint."""
    names = [p for p, n in counts.items() if n > 0]
    capped = [min(counts[p], model.profiles[p].max_count) for p in names]
    best: list[tuple[int, dict[str, int]]] = []
    for combo in itertools.product(*(range(c, -1, -1) for c in capped)):
        sub = {p: n for p, n in zip(names, combo) if n}
        if not sub or not fits(model, sub):
            continue
        removed = sum(counts.values()) - sum(combo)
        best.append((removed, sub))
    if not best:
        return []
    fewest = min(r for r, _ in best)
    return [sub for r, sub in best if r == fewest][:limit]


def check_layout(model: GpuModel, layout: Mapping[str, int]) -> FitResult:
    """Does `layout` (profile -> count) fit on one GPU of `model`? Returns the placement when it does."""
    reasons: list[str] = []
    counts: dict[str, int] = {}
    valid = ", ".join(model.profiles)
    for name, n in layout.items():
        if not isinstance(name, str) or not name:
            reasons.append(f"profile name must be a non-empty string, got {name!r}")
            continue
        whole = compute_instance_split(name)
        if whole is not None:
            hint = f"; request the whole GI `{whole}` instead" if whole in model.profiles else ""
            reasons.append(
                f"{name} is a compute-instance split: the device plugin only advertises GPU instances "
                f"whose single compute instance spans the whole GI, so pods could never request it{hint}"
            )
            continue
        if name not in model.profiles:
            guess = closest_profile(model, name)
            hint = f"; did you mean {guess}?" if guess else ""
            reasons.append(f"{name} is not a MIG profile of {model.name} (valid: {valid}){hint}")
            continue
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            reasons.append(f"count for {name} must be an integer >= 0, got {n!r}")
            continue
        if n:
            counts[name] = n
    if reasons:
        return FitResult(False, [], reasons)
    if not counts:
        return FitResult(False, [], [f"layout is empty: give at least one profile a count > 0 (valid: {valid})"])

    reasons = _capacity_problems(model, counts)
    placements = None if reasons else _place(model, counts)
    if not reasons and placements is None:
        starts = ", ".join(f"{p}@{_fmt_starts(model.profiles[p].starts)}" for p in counts)
        reasons.append(
            f"{_fmt_layout(counts)} cannot be placed on the {model.memory_slices} memory slices of "
            f"{model.name} without overlap (allowed start slots: {starts})"
        )
    if reasons:
        alternatives = _nearest_fitting(model, counts)
        if alternatives:
            reasons.append("would fit: " + "; or ".join(_fmt_layout(a) for a in alternatives))
        return FitResult(False, [], reasons)

    warnings = []
    me_1g = [p for p in counts if model.profiles[p].is_media_extension and model.profiles[p].compute == 1]
    other_1g = sum(n for p, n in counts.items() if model.profiles[p].compute == 1 and p not in me_1g)
    if me_1g and other_1g:
        warnings.append(
            f"{me_1g[0]} together with another 1g instance: mig-parted's own enumerator treats this "
            "as invalid (reference 3.2); it may fail on some drivers"
        )
    return FitResult(True, placements or [], [], warnings)


def resolve_preset(model: GpuModel, name: str) -> dict[str, int] | None:
    """NVIDIA preset layout by name (`all-balanced`, `all-1g.10gb`, `all-1g.10gb.me`; `+` accepted for `.`)."""
    key = name.strip().lower()
    for pname, layout in model.presets.items():
        if pname.lower() == key or pname.lower() == key.replace("+", "."):
            return dict(layout)
    return None


def gpu_fraction(model: GpuModel, profile: str) -> Fraction:
    """A MIG instance as a fraction of the GPU, by compute slices (e.g. 3g.40gb on H100 = 3/7)."""
    try:
        p = model.profiles[profile]
    except KeyError:
        raise ValueError(
            f"{profile} is not a MIG profile of {model.name} (valid: {', '.join(model.profiles)})"
        ) from None
    return Fraction(p.compute, model.compute_slices)


def layout_weights(model: GpuModel, layout: Mapping[str, int]) -> dict[str, Fraction]:
    """What one instance of each profile of LAYOUT costs, as a fraction of its GPU: the GPU split among the
    instances the layout creates, in proportion to their compute slices. The weights of a GPU's instances
    always add up to exactly one GPU, so a layout that leaves a slice unusable (2 x 3g.40gb uses 6 of 7) is
    paid for by the instances that strand it, and a fully granted pool bills exactly what it costs
    (docs/explanation/chargeback.md). This is the weight of chargeback, `gpupool plan` and `gpupool usage` alike."""
    used = sum(model.profiles[p].compute * n for p, n in layout.items() if n)
    if not used:
        return {}
    return {p: Fraction(model.profiles[p].compute, used) for p, n in layout.items() if n}


def stranded_compute(model: GpuModel, layout: Mapping[str, int]) -> Fraction:
    """The share of a GPU's compute slices that LAYOUT leaves in no instance (2 x 3g.40gb on H100: 1/7)."""
    used = sum(model.profiles[p].compute * n for p, n in layout.items() if n)
    return Fraction(max(model.compute_slices - used, 0), model.compute_slices)
