"""The nodes a spec names must exist: gpupool labels nodes, it never creates one.

A pool's `nodes` become NodePatch resources (server-side apply of gpupool's labels), and a server-side apply
creates the object it names when there is none: a typo (`dev-gpu1` for `dev-gpu-1`) would register a Node
that no kubelet backs, carrying the pool's labels, reported as converged and retained when the spec is
corrected (the patches are retain-on-delete). So before registering, the program reads which named nodes
the cluster has (components/live_nodes.py) and refuses an update that names one it lacks. Pools chosen by
`nodeSelector` are not read: gpupool labels nothing there.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping

from gpupool.k8s.mig_in_use import Api, LiveReadError, list_nodes
from gpupool.model import platform as m

ONE_BY_ONE = (
    50  # up to this many named nodes, GET each; more, list the cluster's nodes (mig_in_use.list_nodes, in pages)
)
SHOWN = 20  # nodes named in one message, at most


def named(spec: m.Spec) -> dict[str, list[str]]:
    """Node name -> the pools that name it, in spec order (a node in two pools is refused by validation)."""
    out: dict[str, list[str]] = {}
    for pool in spec.pools:
        for node in pool.nodes:
            out.setdefault(node, []).append(pool.name)
    return out


def _node_path(name: str) -> str:
    return f"/api/v1/nodes/{urllib.parse.quote(name, safe='')}"


def _listed(api: Api) -> set[str]:
    present: set[str] = set()
    for item in list_nodes(api):
        name = (item.get("metadata") or {}).get("name") if isinstance(item, dict) else None
        if isinstance(name, str):
            present.add(name)
    return present


def missing(api: Api, names: Iterable[str]) -> list[str]:
    """The NAMES the cluster has no Node of, sorted. A 404 is a missing node; any other answer but 200 is a
    LiveReadError (a denied read proves nothing either way)."""
    wanted = sorted(set(names))
    if len(wanted) > ONE_BY_ONE:
        present = _listed(api)
        return [n for n in wanted if n not in present]
    out = []
    for name in wanted:
        status, _ = api("GET", _node_path(name))
        if status == 404:
            out.append(name)
        elif status != 200:
            raise LiveReadError(f"reading node {name} answered HTTP {status}")
    return out


def refusal(absent: list[str], pools: Mapping[str, list[str]]) -> str:
    """One message naming the missing nodes and their pools (POOLS: named()), for a warning or an error."""
    shown = [f"{n} (pool {', '.join(pools.get(n) or ['?'])})" for n in absent[:SHOWN]]
    more = f" and {len(absent) - SHOWN} more" if len(absent) > SHOWN else ""
    what = "node" if len(absent) == 1 else f"{len(absent)} nodes"
    verb = "does" if len(absent) == 1 else "do"
    return (
        f"{what} named in nodePools[].nodes {verb} not exist in the cluster: {', '.join(shown)}{more}; gpupool "
        "labels existing nodes and never creates one: correct the name (`kubectl get nodes` lists them), or "
        "leave the node out until it has joined"
    )


def read_missing_for(spec: m.Spec, kubeconfig: str | None, context: str | None) -> list[str]:
    """missing() for SPEC's named nodes through a kubeconfig (a path or its contents; None: the ambient one).
    Every failure is a LiveReadError that says what could not be read."""
    from gpupool.k8s import kubeclient

    names = named(spec)
    if not names:
        return []
    try:
        api = kubeclient.Client(kubeconfig, context, timeout=15)
        return missing(api, names)
    except (kubeclient.KubeAPIError, kubeclient.KubeconfigError, LiveReadError) as exc:
        raise LiveReadError(f"cannot read whether the spec's named nodes exist: {exc}") from None


__all__ = ["LiveReadError", "missing", "named", "read_missing_for", "refusal"]
