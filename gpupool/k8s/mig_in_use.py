"""MIG configs still in use: the old names a re-layout keeps in the MIG ConfigMap until no node carries them.

A re-layout changes the MIG ConfigMap at once, but relabels the pool's nodes wave by wave. Until its turn, a
node of a later wave still carries its old `nvidia.com/mig.config`, and the config-hash roll restarts its MIG
Manager meanwhile: the new pod mounts the new file and runs once for the label it starts with (mig-parted
v0.15.0 `cmd/nvidia-mig-manager/main.go` 431-446, 569-571). Had the old name left the file, that run writes
`failed` ("selected mig-config not present", `pkg/mig/reconfigure/reconfigure.go` 137-140); with it there,
it finds the GPUs already so configured and writes `success` (142-146), touching nothing. So before
registering, gpupool reads which config names the cluster's nodes carry and keeps, from the live ConfigMap,
every such name the new spec dropped. A mig-parted config name stands for one content only (a preset, a
layout, or a content hash: manifests.mig_config_name), so the kept entries are exactly what that node has.

Kept entries are not part of the config hash (manifests.build): keeping them rolls nothing, and dropping them
on the first run after no node uses them is an in-place ConfigMap update that restarts no MIG Manager.

The run that completes a re-layout therefore leaves the old names in the ConfigMap, and its own convergence
check (`gpupool stacks up` previews with `--expect-no-changes` right after) would see them go: the run would
fail although it did everything it should. So that preview runs with CONVERGENCE_ENV set, and then the names
the live ConfigMap keeps (its ANNOTATION_KEPT) count as kept too: the check compares the stack with what this
very run registered; the next run drops them.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from gpupool.k8s.rollout import LABEL_MIG_CONFIG
from gpupool.model import platform as m

CONFIG_KEY = "config.yaml"
LABEL_PLUGIN_CONFIG = "nvidia.com/device-plugin.config"  # manifests.LABEL_PLUGIN_CONFIG
ANNOTATION_KEPT_PLUGIN = "gpupool.dev/kept-device-plugin-configs"  # manifests.ANNOTATION_KEPT_PLUGIN
CONVERGENCE_ENV = "GPUPOOL_CONVERGENCE_CHECK"  # set by gpupool.deploy.stacks for its convergence preview
ANNOTATION_KEPT = "gpupool.dev/kept-mig-configs"  # manifests.ANNOTATION_KEPT (manifests imports this module's callers)
PAGE = 500  # nodes per list call

Api = Callable[..., tuple[int, Any]]  # kubeclient.Client: (method, path, body=None) -> (status, JSON)


class LiveReadError(RuntimeError):
    """The cluster answered, but not with what gpupool can read (a denied list, a malformed ConfigMap)."""


def names_in_use(nodes: Iterable[Mapping[str, Any]]) -> set[str]:
    """The `nvidia.com/mig.config` values NODES carry (Node objects as the API returns them)."""
    out = set()
    for node in nodes:
        value = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_MIG_CONFIG)
        if isinstance(value, str) and value:
            out.add(value)
    return out


def live_configs(config_map: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `mig-configs` of a live MIG ConfigMap object (None: there is none yet)."""
    if not config_map:
        return {}
    text = (config_map.get("data") or {}).get(CONFIG_KEY) or ""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise LiveReadError(f"the live MIG ConfigMap's {CONFIG_KEY} is not YAML") from None
    configs = doc.get("mig-configs") if isinstance(doc, dict) else None
    if configs is None:
        return {}
    if not isinstance(configs, dict):
        raise LiveReadError(f"the live MIG ConfigMap's {CONFIG_KEY} has no mig-configs map")
    return configs


def kept(in_use: set[str], live: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The live configs to keep beside WANTED (the spec's, presets included): those a node still carries that
    WANTED no longer has, sorted by name. A name in use that the live ConfigMap lacks was not gpupool's to
    keep (the node fails today already); it is left out."""
    return {name: live[name] for name in sorted(in_use) if name not in wanted and isinstance(live.get(name), list)}


def _nodes(api: Api) -> list[dict[str, Any]]:
    return list_nodes(api, LABEL_MIG_CONFIG)


def list_nodes(api: Api, label_selector: str | None = None) -> list[dict[str, Any]]:
    """Every Node (with LABEL_SELECTOR, those it selects), read in pages of PAGE; LiveReadError on a refusal."""
    selector = f"labelSelector={urllib.parse.quote(label_selector, safe='')}&" if label_selector else ""
    items: list[dict[str, Any]] = []
    cont = ""
    while True:
        path = f"/api/v1/nodes?{selector}limit={PAGE}"
        if cont:
            path += f"&continue={urllib.parse.quote(cont, safe='')}"
        status, body = api("GET", path)
        if status != 200:
            raise LiveReadError(f"listing nodes answered HTTP {status}")
        items.extend(body.get("items") or [])
        cont = (body.get("metadata") or {}).get("continue") or ""
        if not cont:
            return items


def listed_as_kept(config_map: Mapping[str, Any] | None) -> set[str]:
    """The names a live MIG ConfigMap's ANNOTATION_KEPT lists (the configs the run that wrote it kept)."""
    annotations = ((config_map or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ANNOTATION_KEPT)
    return {n for n in value.split(",") if n} if isinstance(value, str) else set()


def read_kept(
    api: Api, namespace: str, config_map: str, wanted: Mapping[str, Any], *, as_written: bool = False
) -> dict[str, Any]:
    """What kept() returns for the cluster API answers: its nodes' labels and the live MIG ConfigMap. AS_WRITTEN
    (the convergence check): the names the live ConfigMap says it keeps count as in use too."""
    status, obj = api("GET", f"/api/v1/namespaces/{namespace}/configmaps/{config_map}")
    if status == 404:
        return {}  # no ConfigMap yet: nothing to keep
    if status != 200:
        raise LiveReadError(f"reading ConfigMap {namespace}/{config_map} answered HTTP {status}")
    live = live_configs(obj)
    if not live:
        return {}
    in_use = names_in_use(_nodes(api))
    if as_written:
        in_use |= listed_as_kept(obj)
    return kept(in_use, live, wanted)


def read_kept_for(
    spec: m.Spec, kubeconfig: str | None, context: str | None, *, as_written: bool = False
) -> dict[str, Any]:
    """read_kept() for SPEC's cluster through a kubeconfig (a path or its contents; None: the ambient one): what
    the program reads before registering and `gpupool render --kubeconfig` reads. Every failure is a
    LiveReadError that says what could not be read."""
    from gpupool.k8s import kubeclient, manifests

    wanted, _ = manifests.mig_configs(spec)
    try:
        api = kubeclient.Client(kubeconfig, context, timeout=15)
        return read_kept(api, spec.cluster.operator.namespace, manifests.MIG_CONFIGMAP, wanted, as_written=as_written)
    except (kubeclient.KubeAPIError, kubeclient.KubeconfigError, LiveReadError) as exc:
        raise LiveReadError(f"cannot read which MIG configs the cluster's nodes carry: {exc}") from None


# -- Device-plugin config keys -------------------------------------------------------------------
#
# The same, for the device-plugin ConfigMap. An MPS pool's key changes with its config (manifests.mps_config_key)
# and a time-slicing pool's key is its name; a node carries one as `nvidia.com/device-plugin.config` until
# gpupool relabels it (its pool patch, applied after the ConfigMap). The sharing edit's config hash restarts
# the device plugin on every node meanwhile, and on a node whose label names a key the new ConfigMap lacks,
# the plugin pod's config-manager-init exits ("specified config ... does not exist", k8s-device-plugin v0.20.0
# cmd/config-manager/main.go 351-357): the node advertises no GPUs until it is relabelled, which for a
# selector-based pool is the team's own tooling. So keys nodes carry stay, with their live content, until no
# node carries them; outside the config hash too, so dropping them restarts nothing.


def keys_in_use(nodes: Iterable[Mapping[str, Any]]) -> set[str]:
    """The `nvidia.com/device-plugin.config` values NODES carry."""
    out = set()
    for node in nodes:
        value = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_PLUGIN_CONFIG)
        if isinstance(value, str) and value:
            out.add(value)
    return out


def read_kept_plugin(
    api: Api, namespace: str, config_map: str, wanted: Mapping[str, Any], *, as_written: bool = False
) -> dict[str, str]:
    """The live device-plugin ConfigMap's keys (key -> its text) that nodes carry and WANTED (the spec's keys)
    lacks; AS_WRITTEN: also those its ANNOTATION_KEPT_PLUGIN lists (the convergence check, see above)."""
    status, obj = api("GET", f"/api/v1/namespaces/{namespace}/configmaps/{config_map}")
    if status == 404:
        return {}
    if status != 200:
        raise LiveReadError(f"reading ConfigMap {namespace}/{config_map} answered HTTP {status}")
    data = (obj or {}).get("data") or {}
    if not isinstance(data, dict):
        raise LiveReadError(f"the live ConfigMap {namespace}/{config_map} has no data map")
    in_use = keys_in_use(list_nodes(api, LABEL_PLUGIN_CONFIG))
    if as_written:
        value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_KEPT_PLUGIN)
        in_use |= {k for k in value.split(",") if k} if isinstance(value, str) else set()
    return {k: data[k] for k in sorted(in_use) if k not in wanted and isinstance(data.get(k), str)}


def read_kept_plugin_for(
    spec: m.Spec, kubeconfig: str | None, context: str | None, *, as_written: bool = False
) -> dict[str, str]:
    """read_kept_plugin() for SPEC's cluster (what read_kept_for() is for the MIG ConfigMap)."""
    from gpupool.k8s import kubeclient, manifests

    wanted, _ = manifests.device_plugin_config(spec)
    try:
        api = kubeclient.Client(kubeconfig, context, timeout=15)
        return read_kept_plugin(
            api, spec.cluster.operator.namespace, manifests.PLUGIN_CONFIGMAP, wanted, as_written=as_written
        )
    except (kubeclient.KubeAPIError, kubeclient.KubeconfigError, LiveReadError) as exc:
        raise LiveReadError(f"cannot read which device-plugin configs the cluster's nodes carry: {exc}") from None
