"""Config and object changes as lines: device-plugin keys, config entries, rendered objects."""

from __future__ import annotations

import json

from gpupool.analysis.diff import ConfigDiff, SpecDiff
from gpupool.present.markdown import code, inline

MAX_FIELDS = 8  # field-level changes shown per object before "... N more"
RENAMED = "REPLACED (renamed: deleted and created)"


# A tier's PriorityClass on a value change (Desired.replace_on_changes): say what it takes and means.
IMMUTABLE = (
    "REPLACED (the field is immutable: `pulumi up` deletes and creates it (docs/explanation/safety.md); with the render run"
    " `kubectl replace --force -f` on this file first; running pods keep their old priority until they are"
    " re-created, and pods created in between naming it are refused)"
)


def _value(v: object) -> str:
    if v is None:
        return "(none)"
    if isinstance(v, str) and "\n" in v:
        return f"<{len(v.splitlines())} lines>"
    text = json.dumps(v, ensure_ascii=False) if not isinstance(v, (int, float)) or isinstance(v, bool) else str(v)
    return text if len(text) <= 60 else text[:57] + "..."


def plugin_lines(d: SpecDiff) -> list[tuple[str, str]]:
    out = []
    for c in d.plugin:
        if c.kind == "changed":
            if c.sharing_before != c.sharing_after:
                rep = f"{c.sharing_before} ×{c.replicas_before} → {c.sharing_after} ×{c.replicas_after}"
            elif c.replicas_before != c.replicas_after:
                rep = f"{c.sharing_before} replicas {c.replicas_before} → {c.replicas_after}"
            else:
                rep = "settings changed"
            out.append(("~", f"key {c.key}: {rep} (pools: {', '.join(c.pools_after) or '-'})"))
        elif c.kind == "added":
            out.append(
                (
                    "+",
                    f"key {c.key}: {c.sharing_after} replicas {c.replicas_after} "
                    f"(pools: {', '.join(c.pools_after) or '-'})",
                )
            )
        else:
            out.append(
                (
                    "-",
                    f"key {c.key}: was {c.sharing_before} replicas {c.replicas_before} "
                    f"(pools: {', '.join(c.pools_before) or '-'})",
                )
            )
    for pool, kb, ka in d.pool_plugin_keys:
        out.append(("~", f"pool {pool}: nvidia.com/device-plugin.config {kb} → {ka}"))
    if out:
        out.append(
            (
                "!",
                "the device plugin and GFD restart on every GPU node (config hash); running pods keep "
                "their GPUs, advertised capacity changes",
            )
        )
    return out


def config_title(c: ConfigDiff) -> str:
    what = "MIG Manager config" if c.config == "mig" else "device-plugin config"
    return f"pool {c.pool}: {what} {c.name_before or '(none)'} → {c.name_after or '(none)'}"


def object_lines(d: SpecDiff, md: bool = False) -> list[tuple[str, str]]:
    out = []
    code_ = code if md else (lambda s: s)
    for o in d.objects:
        what = f"{o.object_kind} {o.object_name}"
        what = inline(what) if md else what
        if o.kind == "added":
            out.append(("+", f"{code_(o.file)} ({what})"))
        elif o.kind == "removed":
            note = " — retained in the cluster (retainOnDelete), no longer managed" if o.retained else ""
            out.append(("-", f"{code_(o.file)} ({what}){note}"))
        else:
            shown = [
                f"{code_(f.path)}: {code(_value(f.before)) if md else _value(f.before)} → "
                f"{code(_value(f.after)) if md else _value(f.after)}"
                for f in o.fields[:MAX_FIELDS]
            ]
            more = len(o.fields) - MAX_FIELDS
            if more > 0:
                shown.append(f"… {more} more")
            how = (IMMUTABLE if o.object_kind == "PriorityClass" else RENAMED) if o.replaced else ""
            out.append(("~", f"{code_(o.file)} ({what}): " + "; ".join(([how] if how else []) + shown)))
    return out
