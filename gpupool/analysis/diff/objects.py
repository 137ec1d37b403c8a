"""The rendered Kubernetes objects (gpupool render) added, changed and removed, with a field-level summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpupool.analysis.diff.kind import Kind
from gpupool.k8s import manifests, render


@dataclass(frozen=True)
class FieldChange:
    path: str
    before: Any
    after: Any


@dataclass(frozen=True)
class ObjectChange:
    file: str
    kind: Kind
    object_kind: str
    object_name: str  # namespace/name or name
    fields: tuple[FieldChange, ...] = ()
    retained: bool = False  # removed but retainOnDelete: stays in the cluster, unmanaged
    patch: bool = False
    # its name changes (an ownerRole change renames the RoleBinding), or a field the API server never updates
    # (Desired.replace_on_changes: a tier's PriorityClass value): deleted and created
    replaced: bool = False


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = str(k)
            plain = key.replace("-", "").replace("_", "").isalnum()
            out.update(_flatten(v, f"{prefix}.{key}" if plain and prefix else key if plain else f'{prefix}["{key}"]'))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def field_changes(before: dict, after: dict) -> tuple[FieldChange, ...]:
    fb, fa = _flatten(before), _flatten(after)
    return tuple(FieldChange(p, fb.get(p), fa.get(p)) for p in sorted(set(fb) | set(fa)) if fb.get(p) != fa.get(p))


def _header_changes(ob: manifests.Desired, oa: manifests.Desired) -> tuple[FieldChange, ...]:
    """What changes in how gpupool manages the object, not in the object: offboarding turns retainOnDelete
    off (the namespace loses its deletion protection)."""
    out = []
    if ob.retain_on_delete != oa.retain_on_delete:
        out.append(FieldChange("(gpupool) retainOnDelete", ob.retain_on_delete, oa.retain_on_delete))
    if ob.component != oa.component:
        out.append(FieldChange("(gpupool) component", ob.component, oa.component))
    if ob.patch != oa.patch:
        out.append(FieldChange("(gpupool) patch", ob.patch, oa.patch))
    return tuple(out)


def _object_name(manifest: dict) -> str:
    meta = manifest.get("metadata", {})
    return f"{meta['namespace']}/{meta.get('name', '')}" if meta.get("namespace") else meta.get("name", "")


def object_changes(base_objects: list[manifests.Desired], head_objects: list[manifests.Desired]) -> list[ObjectChange]:
    objs_b = {render.file_name(o): o for o in base_objects}
    objs_a = {render.file_name(o): o for o in head_objects}

    # A rendered file is its header (component, patch, retain flags) plus the dumped manifest, and the dump is
    # deterministic: comparing those inputs says whether the file changes, without dumping 10,000s of YAML docs.
    def same(x, y) -> bool:
        return (x.component, x.patch, x.retain_on_delete, x.manifest) == (
            y.component,
            y.patch,
            y.retain_on_delete,
            y.manifest,
        )

    out = []
    for name in sorted(set(objs_b) | set(objs_a)):
        ob, oa = objs_b.get(name), objs_a.get(name)
        if oa is None:
            assert ob is not None  # every name comes from one side or the other
            out.append(
                ObjectChange(
                    name, Kind.REMOVED, ob.kind, _object_name(ob.manifest), retained=ob.retain_on_delete, patch=ob.patch
                )
            )
        elif ob is None:
            out.append(ObjectChange(name, Kind.ADDED, oa.kind, _object_name(oa.manifest), patch=oa.patch))
        elif not same(ob, oa):
            fields = _header_changes(ob, oa) + field_changes(ob.manifest, oa.manifest)
            out.append(
                ObjectChange(
                    name,
                    Kind.CHANGED,
                    oa.kind,
                    _object_name(oa.manifest),
                    fields,
                    patch=oa.patch,
                    replaced=_object_name(ob.manifest) != _object_name(oa.manifest)
                    or any(f.path in oa.replace_on_changes for f in fields),
                )
            )
    return out
