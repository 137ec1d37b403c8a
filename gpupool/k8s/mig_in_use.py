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
on the first run after no node uses them is an in-place ConfigMap update that neither re-arms a node nor
restarts a MIG Manager.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml

from gpupool.k8s.rollout import LABEL_MIG_CONFIG
from gpupool.model import platform as m

CONFIG_KEY = "config.yaml"
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


def read_kept(api: Api, namespace: str, config_map: str, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """What kept() returns for the cluster API answers: its nodes' labels and the live MIG ConfigMap."""
    status, obj = api("GET", f"/api/v1/namespaces/{namespace}/configmaps/{config_map}")
    if status == 404:
        return {}  # no ConfigMap yet: nothing to keep
    if status != 200:
        raise LiveReadError(f"reading ConfigMap {namespace}/{config_map} answered HTTP {status}")
    live = live_configs(obj)
    if not live:
        return {}
    return kept(names_in_use(_nodes(api)), live, wanted)


def read_kept_for(spec: m.Spec, kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    """read_kept() for SPEC's cluster through a kubeconfig (a path or its contents; None: the ambient one): what
    the program reads before registering and `gpupool render --kubeconfig` reads. Every failure is a
    LiveReadError that says what could not be read."""
    from gpupool.k8s import kubeclient, manifests

    wanted, _ = manifests.mig_configs(spec)
    try:
        api = kubeclient.Client(kubeconfig, context, timeout=15)
        return read_kept(api, spec.cluster.operator.namespace, manifests.MIG_CONFIGMAP, wanted)
    except (kubeclient.KubeAPIError, kubeclient.KubeconfigError, LiveReadError) as exc:
        raise LiveReadError(f"cannot read which MIG configs the cluster's nodes carry: {exc}") from None
