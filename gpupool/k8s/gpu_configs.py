"""The two configs the GPU Operator's operands read from gpupool's ConfigMaps: MIG Manager's (mig-parted v1, one
named config per pool layout) and the device plugin's (one key per sharing config). Pure data; the ConfigMaps and
the node labels naming a config are gpupool.k8s.manifests'."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

from gpupool.gpu import operator_presets
from gpupool.k8s.naming import content_hash
from gpupool.k8s.yaml_dump import dump_yaml
from gpupool.model import platform as m

# The device-plugin config key of whole (unshared) GPUs. Shared pools use their pool name as key; pool names
# are DNS labels, which never contain a ".", so no pool can ever take this key over.
EXCLUSIVE_KEY = "exclusive.default"
MIG_DISABLED = "all-disabled"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")  # a Kubernetes label value


# -- MIG Manager config (mig-parted v1) ----------------------------------------------------------


def _layout_text(layout: dict[str, int]) -> str:
    return "-".join(f"{p}x{c}" for p, c in sorted(layout.items()))


def mig_config_name(pool: m.NodePool) -> str:
    """A readable, stable mig-parted config name for the pool's layout, unique per layout by construction.

    It is a node label value (at most 63 characters, [A-Za-z0-9._-]). One layout on every GPU reads as
    `<model>-<preset or layout>`, which no other layout can spell. Anything else (per-GPU layouts, profiles
    with characters a label cannot hold, long names) gets an 8-hex content hash of the config as suffix, so
    two layouts can never share a name (and one of them silently configure the other's nodes)."""
    model = pool.gpu_model.lower()
    groups = pool.sharing.mig
    if len(groups) == 1 and len(groups[0].gpus) == pool.gpus_per_node:
        body = groups[0].preset or _layout_text(dict(groups[0].layout))
        plain = f"{model}-{body}"
        if _LABEL_VALUE.match(plain) and len(plain) <= 63:
            return plain
    else:
        body = ".".join(f"{gpu_ranges(g.gpus)}_{g.preset or _layout_text(dict(g.layout))}" for g in groups)
    digest = content_hash(dump_yaml(_mig_entries(pool)))[:8]
    readable = re.sub(r"[^A-Za-z0-9._-]", "-", f"{model}-{body}")[: 63 - len(digest) - 1].rstrip("-._")
    return f"{readable}-{digest}"


def gpu_ranges(indices: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> "0-2+5": compact, and valid inside a label value."""
    items = sorted(indices)
    out: list[str] = []
    start: int | None = None
    prev = 0  # read only once start is set
    for i in items:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    return "+".join(out)


def _mig_entries(pool: m.NodePool) -> list[dict[str, Any]]:
    entries = []
    for group in pool.sharing.mig:
        devices: Any = "all" if len(group.gpus) == pool.gpus_per_node else list(group.gpus)
        entries.append({"devices": devices, "mig-enabled": True, "mig-devices": dict(sorted(group.layout.items()))})
    rest = m.whole_gpu_indices(pool.gpus_per_node, pool.sharing.mig)
    if rest:
        entries.append({"devices": rest, "mig-enabled": False})
    return entries


def mig_config(spec: m.Spec) -> tuple[str, dict[str, str]]:
    """(config.yaml text, pool -> config name). Always has all-disabled; one config per distinct layout; then
    the GPU Operator's presets, so a node labelled with one outside gpupool keeps working (operator_presets)."""
    configs, by_pool = mig_configs(spec)
    return dump_yaml({"version": "v1", "mig-configs": configs}), by_pool


def mig_configs(spec: m.Spec) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """(config name -> its mig-parted entries, pool -> config name): what config.yaml holds, as data."""
    configs: dict[str, Any] = {MIG_DISABLED: [{"devices": "all", "mig-enabled": False}]}
    by_pool: dict[str, str] = {}
    for pool in spec.pools:
        if pool.sharing.mig:
            name = mig_config_name(pool)
            configs.setdefault(name, _mig_entries(pool))
            by_pool[pool.name] = name
        elif pool.mig_capable:
            by_pool[pool.name] = MIG_DISABLED
    return with_operator_presets(configs), by_pool


def with_operator_presets(configs: dict[str, Any]) -> dict[str, Any]:
    """CONFIGS followed by every operator preset. gpupool's names start with the GPU model (mig_config_name),
    and no model is named `all`, so only all-disabled is shared, with the preset's content; a name that ever
    meant something else would configure a preset's nodes wrongly, so that is a build error."""
    out = dict(configs)
    for name, entries in operator_presets.presets().items():
        if name in out and out[name] != entries:
            raise ValueError(f"mig-parted config {name!r} differs from the GPU Operator preset of that name")
        out.setdefault(name, copy.deepcopy(entries))  # the cached presets stay untouched
    return out


# -- Device plugin config -----------------------------------------------------------------------


def _plugin_config(spec: m.Spec, pool: m.NodePool | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": spec.cluster.mig_strategy}}
    if pool is None:
        return doc
    sharing = pool.sharing
    resources = [{"name": name, "replicas": sharing.replicas} for name in pool.physical_resources_per_node()]
    if sharing.time_slicing:
        ts = sharing.time_slicing
        doc["sharing"] = {
            "timeSlicing": {
                "renameByDefault": ts.rename,
                "failRequestsGreaterThanOne": ts.fail_requests_greater_than_one,
                "resources": resources,
            }
        }
    elif sharing.mps:
        doc["sharing"] = {"mps": {"renameByDefault": sharing.mps.rename, "resources": resources}}
    return doc


def device_plugin_config(spec: m.Spec) -> tuple[dict[str, str], dict[str, str]]:
    """(ConfigMap data, pool -> key). One key per shared pool, plus the default key for exclusive GPUs."""
    docs, by_pool = device_plugin_configs(spec)
    return {key: dump_yaml(doc) for key, doc in docs.items()}, by_pool


def device_plugin_configs(spec: m.Spec) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(ConfigMap key -> its device-plugin config, pool -> key), the configs as data, keys sorted."""
    docs = {EXCLUSIVE_KEY: _plugin_config(spec, None)}
    by_pool: dict[str, str] = {}
    for pool in spec.pools:
        if pool.sharing.software_shared:
            doc = _plugin_config(spec, pool)
            key = mps_config_key(pool, dump_yaml(doc)) if pool.sharing.mps else pool.name
            docs[key] = doc
            by_pool[pool.name] = key
        else:
            by_pool[pool.name] = EXCLUSIVE_KEY
    return dict(sorted(docs.items())), by_pool


def mps_config_key(pool: m.NodePool, text: str) -> str:
    """`<pool>.<hash>`: an MPS pool's key changes with its config, so an edit relabels its nodes.

    The MPS control daemon reads its config once per start and restarts only on SIGHUP
    (k8s-device-plugin v0.20.0 cmd/mps-control-daemon/main.go, lines 108-162), and the operator neither gives
    it the device plugin's env, where gpupool's config hash goes, nor watches the ConfigMap (gpu-operator
    v26.7.0 controllers/object_controls.go, TransformMPSControlDaemon, lines 1632-1703). What does reach it is
    its config-manager sidecar, which acts on a *change of the node label's value* only (cmd/config-manager/
    main.go, lines 270-279), then points the config at the new key and sends the daemon SIGHUP (lines 296-333;
    SIGNAL=1 and PROCESS_TO_SIGNAL=/usr/bin/mps-control-daemon in assets/state-mps-control-daemon/
    0400_daemonset.yaml). Pool names are DNS labels (no "."), so the "." separates the two and no other pool's
    key can be spelled; the hash covers the pool's name too, and a long name is cut to keep a label value."""
    digest = content_hash(f"{pool.name}\n{text}")[:8]
    return f"{pool.name[: 63 - len(digest) - 1].rstrip('-')}.{digest}"
