"""GP9xx (model part): names Kubernetes would reject, and node pools that would count the same nodes twice.

Names gpupool derives itself (object, Pulumi resource, file, config-key and MIG-config names) are unique and
valid by construction in gpupool.k8s.manifests; tests/test_derived_names.py proves it over generated specs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpupool.rules.registry import Context, rule

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Labels gpupool itself puts on a pool's nodes: selecting on another pool's value selects that pool's nodes.
POOL_LABEL = "gpupool.dev/pool"


def _pools(ctx: Context) -> Iterator[tuple[tuple, dict]]:
    raw = ctx.data.get("nodePools") if isinstance(ctx.data, dict) else None
    if not isinstance(raw, list):
        return
    for i, p in enumerate(raw):
        if isinstance(p, dict) and isinstance(p.get("name"), str):
            yield ("nodePools", i), p


@rule("GP902", "node names are Kubernetes node names")
def node_names(ctx: Context) -> None:
    """A node's name is a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', each dot-separated part
    starting and ending with a letter or digit, at most 253 characters. A name longer than 63 characters is a
    warning: it cannot be a label value, so the node's `kubernetes.io/hostname` label (and any selector on
    it) cannot hold it.

    Passes:
        nodePools:
          - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [gpu-l4-1.zone-a]}
    Fails:
        nodePools:
          - {name: l4, gpu: L4, gpusPerNode: 4, nodes: [GPU_L4_1]}
    """
    for path, p in _pools(ctx):
        nodes = p.get("nodes")
        if not isinstance(nodes, list) or not ctx.usable(path + ("nodes",)):
            continue
        for j, node in enumerate(nodes):
            if not isinstance(node, str):
                continue
            if len(node) > 253 or not DNS_SUBDOMAIN.match(node):
                hint = " (node names are lowercase)" if DNS_SUBDOMAIN.match(node.lower()) else ""
                ctx.error(
                    path + ("nodes", j),
                    f"is not a valid Kubernetes node name{hint}: lowercase "
                    "letters, digits, '-' and '.', each dot-separated part starting and ending with a letter "
                    "or digit, at most 253 characters",
                )
            elif len(node) > 63:
                ctx.warn(
                    path + ("nodes", j),
                    f"node name is {len(node)} characters long; a label value holds at "
                    f"most 63, so the node's {HOSTNAME_LABEL} label cannot carry it",
                )


@rule("GP901", "node pools may not select the same nodes")
def overlapping_pools(ctx: Context) -> None:
    """A node carries one MIG config and one device-plugin config, and every pool's nodes are counted in the
    capacity. Two pools whose selectors can pick the same node would fight over its labels and count its GPUs
    twice. gpupool flags what the spec itself proves: one pool's `nodeSelector` is a subset of another's (every
    node the narrower pool selects, the wider one selects too), a selector on `kubernetes.io/hostname` naming a
    node another pool lists, and a selector on `gpupool.dev/pool` naming another pool.

    Passes:
        nodePools:
          - {name: a, gpu: L4, gpusPerNode: 4, nodeCount: 2, nodeSelector: {group: a}}
          - {name: b, gpu: L4, gpusPerNode: 4, nodeCount: 2, nodeSelector: {group: b}}
    Fails:
        nodePools:
          - {name: a, gpu: L4, gpusPerNode: 4, nodeCount: 2, nodeSelector: {gpu: l4}}
          - {name: b, gpu: L4, gpusPerNode: 4, nodeCount: 2, nodeSelector: {gpu: l4, zone: a}}
    """
    pools = []
    for path, p in _pools(ctx):
        if not ctx.usable(path + ("nodeSelector",)) or not ctx.usable(path + ("nodes",)):
            continue
        raw_selector = p.get("nodeSelector")
        selector: dict = raw_selector if isinstance(raw_selector, dict) else {}
        nodes = [n for n in p.get("nodes", []) if isinstance(n, str)] if isinstance(p.get("nodes"), list) else []
        pools.append((path, p["name"], selector, nodes))
    for k, (path, name, selector, _nodes) in enumerate(pools):
        for _, other, other_sel, _ in pools[:k]:
            if other == name:
                continue  # a duplicate pool name is reported on its own
            if selector and other_sel and (_subset(selector, other_sel) or _subset(other_sel, selector)):
                wider, narrower = (other, name) if _subset(other_sel, selector) else (name, other)
                ctx.error(
                    path + ("nodeSelector",),
                    f'selects the same nodes as pool "{other}": every node pool '
                    f'"{narrower}" selects, pool "{wider}" selects too, so those GPUs would be counted twice '
                    "and the nodes get two configs; give the pools disjoint labels",
                )
        for label, pools_of in ((HOSTNAME_LABEL, "node"), (POOL_LABEL, "pool")):
            value = selector.get(label)
            if value is None:
                continue
            for _, other, _, other_nodes in pools:
                if other == name:
                    continue
                if (pools_of == "node" and value in other_nodes) or (pools_of == "pool" and value == other):
                    what = (
                        f'node "{value}", which pool "{other}" lists'
                        if pools_of == "node"
                        else f'the nodes of pool "{other}"'
                    )
                    ctx.error(path + ("nodeSelector", label), f"selects {what}; a node belongs to one pool", key=True)


def _subset(small: dict, big: dict) -> bool:
    """Every label `small` requires, `big` requires too (so whatever big selects, small selects)."""
    return all(big.get(k) == v for k, v in small.items())
