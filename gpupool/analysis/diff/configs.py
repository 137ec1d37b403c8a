"""Device-plugin ConfigMap keys added, removed or changed, and per pool unified diffs of its MIG Manager and
device-plugin config entries; all read from manifests.build, as the ConfigMaps are dumped."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpupool.analysis.diff.kind import Kind
from gpupool.k8s import manifests


@dataclass(frozen=True)
class PluginChange:
    key: str
    kind: Kind
    sharing_before: str | None
    sharing_after: str | None
    replicas_before: int | None
    replicas_after: int | None
    pools_before: tuple[str, ...]
    pools_after: tuple[str, ...]


@dataclass(frozen=True)
class ConfigDiff:
    """A unified diff of one pool's entry in the MIG Manager or device-plugin ConfigMap."""

    pool: str
    config: str  # "mig" (MIG Manager, mig-parted) | "device-plugin"
    name_before: str | None  # the entry's key in its ConfigMap
    name_after: str | None
    unified: str  # difflib.unified_diff text


def mig_config_by_pool(built: manifests.DesiredObjects | None) -> dict[str, str]:
    """pool -> mig-parted config name (MIG-capable pools only), as manifests.build derived it."""
    if built is None:
        return {}
    return {pool: c.mig for pool, c in built.pool_configs.items() if c.mig}


def _plugin_by_pool(built: manifests.DesiredObjects | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(device-plugin config per ConfigMap key, as data; pool -> key), as manifests.build derived them."""
    if built is None:
        return {}, {}
    return built.plugin_configs, {pool: c.device_plugin for pool, c in built.pool_configs.items()}


def _plugin_summary(doc: Mapping[str, Any] | None) -> tuple[str | None, int | None]:
    """(sharing, replicas) of one device-plugin config (gpupool.k8s.gpu_configs._plugin_config builds it)."""
    if doc is None:
        return None, None
    sharing = doc.get("sharing") or {}
    for kind, label in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        if kind in sharing:
            res = sharing[kind].get("resources") or []
            return label, (res[0].get("replicas") if res else None)
    return "exclusive", 1


def plugin_changes(
    built_b: manifests.DesiredObjects | None, built_a: manifests.DesiredObjects | None
) -> tuple[list[PluginChange], list[tuple]]:
    data_b, by_pool_b = _plugin_by_pool(built_b)
    data_a, by_pool_a = _plugin_by_pool(built_a)
    out = []
    for key in sorted(set(data_b) | set(data_a)):
        tb, ta = data_b.get(key), data_a.get(key)
        if tb == ta:
            continue
        kind = Kind.ADDED if tb is None else Kind.REMOVED if ta is None else Kind.CHANGED
        sb, rb = _plugin_summary(tb)
        sa, ra = _plugin_summary(ta)
        out.append(
            PluginChange(
                key,
                kind,
                sb,
                sa,
                rb,
                ra,
                tuple(sorted(p for p, k in by_pool_b.items() if k == key)),
                tuple(sorted(p for p, k in by_pool_a.items() if k == key)),
            )
        )
    moved = [
        (p, by_pool_b.get(p), by_pool_a.get(p))
        for p in sorted(set(by_pool_b) & set(by_pool_a))
        if by_pool_b.get(p) != by_pool_a.get(p)
    ]
    return out, moved


# -- config entries, as unified diffs -----------------------------------------------------------


def _mig_entries_text(built: manifests.DesiredObjects | None) -> dict[str, str]:
    """mig-parted config name -> that entry as YAML, dumped from the entries the MIG Manager ConfigMap's
    config.yaml is dumped from (the build holds them as data)."""
    if built is None:
        return {}
    return {name: manifests.dump_yaml({name: entries}) for name, entries in built.mig_configs.items()}


def _plugin_entries_text(built: manifests.DesiredObjects | None) -> dict[str, str]:
    """device-plugin ConfigMap key -> its config as the ConfigMap holds it (the same dump of the same data)."""
    if built is None:
        return {}
    return {key: manifests.dump_yaml(doc) for key, doc in built.plugin_configs.items()}


def _unified(before: str | None, after: str | None, label_b: str, label_a: str) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        (after or "").splitlines(keepends=True),
        label_b if before is not None else "/dev/null",
        label_a if after is not None else "/dev/null",
        n=3,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def config_diffs(
    built_b: manifests.DesiredObjects | None, built_a: manifests.DesiredObjects | None
) -> list[ConfigDiff]:
    """Per pool present on both sides or new, the MIG Manager and device-plugin entries it uses that change."""
    if built_a is None:
        return []
    mig_b, mig_a = _mig_entries_text(built_b), _mig_entries_text(built_a)
    cfg_b, cfg_a = mig_config_by_pool(built_b), mig_config_by_pool(built_a)
    data_b, data_a = _plugin_entries_text(built_b), _plugin_entries_text(built_a)
    key_b, key_a = _plugin_by_pool(built_b)[1], _plugin_by_pool(built_a)[1]
    out = []
    for pool in sorted(built_a.pool_configs):
        nb, na = cfg_b.get(pool), cfg_a.get(pool)
        tb, ta = mig_b.get(nb) if nb else None, mig_a.get(na) if na else None
        if (tb or ta) and tb != ta:
            out.append(
                ConfigDiff(
                    pool,
                    "mig",
                    nb,
                    na,
                    _unified(tb, ta, f"BASE {manifests.MIG_CONFIGMAP}: {nb}", f"HEAD {manifests.MIG_CONFIGMAP}: {na}"),
                )
            )
        kb, ka = key_b.get(pool), key_a.get(pool)
        tb, ta = data_b.get(kb) if kb else None, data_a.get(ka) if ka else None
        if tb != ta:
            out.append(
                ConfigDiff(
                    pool,
                    "device-plugin",
                    kb,
                    ka,
                    _unified(
                        tb, ta, f"BASE {manifests.PLUGIN_CONFIGMAP}: {kb}", f"HEAD {manifests.PLUGIN_CONFIGMAP}: {ka}"
                    ),
                )
            )
    return out
