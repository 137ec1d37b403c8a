"""An MPS re-key through gpupool's program and the real engine (issue 37, item 2): no node is ever without its
device-plugin config, and the MPS clients of a node are drained before its daemon is re-keyed.

A 2-node MPS pool (`rollout: {maxUnavailable: 1}`), one MPS client pod on each node. `replicas: 2 -> 4` changes
the pool's sharing config key (`mps.<hash>`): the up adds the new key to the device-plugin ConfigMap, and per node,
wave by wave, cordons, evicts the node's GPU pods, relabels `nvidia.com/device-plugin.config` and uncordons
(gpupool.k8s.rollout.rekey_chain). Sampled every 50 ms through the API server during that up:
- every node's label names a key the ConfigMap holds (config-manager, restarted by the config-hash roll, exits
  with "specified config ... does not exist" otherwise: k8s-device-plugin v0.20.0 cmd/config-manager/main.go
  351-357), so the old key stays while a node carries it;
- a node whose label already names the new key has no MPS client left (the relabel makes config-manager signal
  the daemon, which quits with its clients attached: cmd/mps-control-daemon/mps/daemon.go 161-185).
The next up, with no node on the old key, drops it and touches no node.

No kubelet or controllers run: the client pods are bound to their node and reported Running (kubelet_sim), and
`kubelet_sim.Kubelet` finishes an evicted pod's deletion as kubelet would. They are bare pods, so the pool sets
`force: true` (kubectl drain's --force; without it the drain refuses them, tests/e2e/test_drain_cases.py).
"""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pytest

from gpupool.k8s import manifests

from .kubelet_sim import Kubelet, running_pod
from .stack import E2EStack

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
NODES = ("mps-1", "mps-2")
LABEL = "nvidia.com/device-plugin.config"
WORK_NS, GPU = "mps-work", "nvidia.com/gpu.shared"
SPEC = textwrap.dedent(f"""\
    apiVersion: gpupool.dev/v1alpha1
    kind: GpuPlatform
    cluster: {{name: mps, migStrategy: none, gpuOperator: {{namespace: gpu-operator}}}}
    nodePools:
      - name: mps
        gpu: L4
        gpusPerNode: 4
        nodes: [{", ".join(NODES)}]
        rollout: {{maxUnavailable: 1, drainTimeoutSeconds: 30, force: true}}
        sharing: {{mps: {{replicas: 2}}}}
    tiers: [{{name: standard, priority: 100}}]
    tenants:
      - {{name: team-m, tier: standard, owners: [team-m], gpus: {{{GPU}: 8}}}}
    """)


@pytest.fixture(scope="module")
def cp(private_control_plane):
    """Its own API server: the stack's operator namespace and PriorityClasses have fixed names."""
    return private_control_plane


@pytest.fixture(scope="module")
def stack(cp, toolchain_bin, tmp_path_factory):
    for node in NODES:
        cp.create_gpu_node(node, {"nvidia.com/gpu": "4"})
    work = tmp_path_factory.mktemp("gpupool-mps")
    (work / "spec.yaml").write_text(SPEC)
    s = E2EStack(toolchain_bin, cp.kubeconfig, work, spec=work / "spec.yaml", chart=STUB_CHART, stack_name="mps")
    yield s
    s.close()


def _keys(cp) -> set[str]:
    obj = cp.api("GET", f"/api/v1/namespaces/gpu-operator/configmaps/{manifests.PLUGIN_CONFIGMAP}")[1]
    return set(obj.get("data") or {})


def _node_keys(cp) -> dict[str, str | None]:
    items = cp.api("GET", "/api/v1/nodes")[1]["items"]
    return {
        n["metadata"]["name"]: n["metadata"].get("labels", {}).get(LABEL)
        for n in items
        if n["metadata"]["name"] in NODES
    }


def _clients(cp) -> dict[str, set[str]]:
    """node -> the MPS client pods bound to it."""
    out: dict[str, set[str]] = {n: set() for n in NODES}
    for pod in cp.api("GET", f"/api/v1/namespaces/{WORK_NS}/pods")[1].get("items", []):
        out.setdefault(pod["spec"].get("nodeName"), set()).add(pod["metadata"]["name"])
    return out


class _Sampler:
    """Every 50 ms: the nodes' keys, then the ConfigMap's keys, then the nodes' keys and clients again."""

    def __init__(self, cp) -> None:
        self.cp = cp
        self.samples: list[tuple[dict, set[str], dict, dict]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            before = _node_keys(self.cp)
            keys = _keys(self.cp)
            self.samples.append((before, keys, _node_keys(self.cp), _clients(self.cp)))

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_first_up_labels_both_nodes_with_the_pools_key(stack, cp):
    assert stack.up().summary.result == "succeeded"
    labels = _node_keys(cp)
    (key,) = set(labels.values())
    assert key and key.startswith("mps.") and key in _keys(cp)


def test_a_rekey_never_leaves_a_node_without_its_config_and_drains_its_clients_first(stack, cp):
    old = next(iter(_node_keys(cp).values()))
    assert cp.api("POST", "/api/v1/namespaces", {"metadata": {"name": WORK_NS}})[0] == 201
    for i, node in enumerate(NODES):
        running_pod(cp, WORK_NS, f"client-{i}", node, app="client", gpu=GPU)
    stack.edit("spec.yaml", "replicas: 2", "replicas: 4")
    with Kubelet(cp, NODES) as kubelet, _Sampler(cp) as sampler:
        assert stack.up().summary.result == "succeeded"
    new = next(iter(_node_keys(cp).values()))
    assert new != old and set(_node_keys(cp).values()) == {new}
    assert {old, new} <= _keys(cp)  # the old key is kept: the program read it on the nodes
    samples = sampler.samples
    assert len(samples) > 20, len(samples)
    # Throughout: the ConfigMap holds every key a node names. A node's label only goes old -> new, so a key
    # named both before and after the ConfigMap read was named at the read.
    for before, keys, after, _ in samples:
        for node in NODES:
            if before[node] == after[node]:
                assert before[node] in keys, (node, before[node], sorted(keys))
    # Both nodes were seen mixed with the other (waves of 1), and on the old key with its client still there.
    assert any(len(set(a.values())) == 2 for _, _, a, _ in samples), "never saw the nodes on different keys"
    assert any(a[NODES[1]] == old and c[NODES[1]] for _, _, a, c in samples), "node 2's client never seen"
    # A node on the new key has no client left (clients read after the label).
    for _, _, after, clients in samples:
        for node in NODES:
            if after[node] == new:
                assert not clients[node], (node, clients)
    assert set(kubelet.gone) == {f"{WORK_NS}/client-0", f"{WORK_NS}/client-1"}


def _mps_keys(cp) -> set[str]:
    return {k for k in _keys(cp) if k.startswith("mps.")}


def test_the_next_up_drops_the_old_key_and_touches_no_node(stack, cp):
    (current,) = set(_node_keys(cp).values())
    assert len(_mps_keys(cp)) == 2 and current in _mps_keys(cp)
    ops = stack.preview_ops()
    changed = {urn.split("::")[-1]: op for urn, op in ops.items() if op != "same"}
    assert changed and all(name.endswith("device-plugin-config") for name in changed), changed
    assert stack.up().summary.result == "succeeded"
    assert _mps_keys(cp) == {current} and set(_node_keys(cp).values()) == {current}
