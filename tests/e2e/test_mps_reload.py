"""An MPS replicas edit reaches the MPS control daemon, through the real API server.

gpupool's rendered device-plugin ConfigMap and node document are applied with `kubectl apply --server-side`
to the shared control plane (a node object with no kubelet). The node's MPS pod is the stand-in of
tests/e2e/mps_daemon_sim.py (config-manager and mps-control-daemon as k8s-device-plugin v0.20.0's source
behave), reading the node's label and the ConfigMap from the API server, the ConfigMap through a lagging
mount as kubelet shows it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

from gpupool.k8s import manifests, mig_in_use
from gpupool.k8s.render import render_documents
from gpupool.rules.engine import validate_file

from .mps_daemon_sim import LABEL, MountedConfigMap, MpsPod, wait_until

pytestmark = pytest.mark.e2e

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {{name: dev, migStrategy: none, gpuOperator: {{namespace: {ns}}}}}
nodePools:
  - {{name: mps, gpu: L4, gpusPerNode: 4, nodes: [{node}], sharing: {{mps: {{replicas: {replicas}}}}}}}
tiers: [{{name: standard, priority: 100}}]
tenants:
  - {{name: team-a, tier: standard, owners: [a], gpus: {{nvidia.com/gpu.shared: 8}}}}
"""


def _documents(tmp_path: Path, ns: str, node: str, replicas: int, kubeconfig: Path | None = None) -> list[dict]:
    """The rendered operator namespace, device-plugin ConfigMap and node document, as `gpupool render` writes
    (with KUBECONFIG, as `gpupool render --kubeconfig` does: keys nodes still carry are kept)."""
    path = tmp_path / f"spec-{replicas}.yaml"
    path.write_text(SPEC.format(ns=ns, node=node, replicas=replicas))
    result = validate_file(path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    kept = mig_in_use.read_kept_plugin_for(result.spec, str(kubeconfig), None) if kubeconfig else None
    plan = manifests.build(result.spec, None, kept)
    docs = [yaml.safe_load(t) for n, t in render_documents(plan).items() if n.endswith(".yaml")]
    wanted = [
        d
        for d in docs
        if d and (d.get("kind") == "Node" or d.get("metadata", {}).get("name") in (ns, manifests.PLUGIN_CONFIGMAP))
    ]
    assert {d["kind"] for d in wanted} == {"Namespace", "ConfigMap", "Node"}, wanted
    return wanted


def _apply(control_plane, docs: list[dict]) -> None:
    # The order gpupool registers them in (the node's labels depend on the ConfigMap).
    for doc in docs:
        control_plane.kubectl(
            "apply", "--server-side", "--field-manager=gpupool", "--force-conflicts", "-f", "-", input=json.dumps(doc)
        )


def test_an_mps_replicas_edit_relabels_the_node_and_the_daemon_restarts_with_it(control_plane, unique, tmp_path):
    """Proves: after `replicas: 2 -> 4` and a plain apply of the render (`--kubeconfig`: keys nodes carry are
    kept), the node's device-plugin.config label names a new key that holds replicas 4, and config-manager
    (which acts on a changed label value only) signals the daemon, which then runs with 4; with the mount
    lagging, config-manager first exits on the missing key and recovers, as its source does. Throughout the
    re-key the key the node's label names is in the ConfigMap (sampled every 20 ms), so a device plugin
    restarted meanwhile finds its config; the next render, with no node on the old key, drops it."""
    ns, node = f"{unique}-op", f"{unique}-n1"
    control_plane.create_gpu_node(node, {"nvidia.com/gpu": "4"})
    try:
        _apply(control_plane, _documents(tmp_path, ns, node, 2))

        def label() -> str | None:
            return control_plane.get_json("node", node)["metadata"]["labels"].get(LABEL)

        def data() -> dict[str, str]:
            return control_plane.get_json("configmap", "-n", ns, manifests.PLUGIN_CONFIGMAP).get("data") or {}

        first = label()
        assert first and first.startswith("mps.") and first in data()
        pod = MpsPod(label, MountedConfigMap(data, lag=3.0), backoff=0.5).start()
        try:
            wait_until(lambda: pod.daemon.replicas == 2, 120, "the daemon at 2 replicas")
            missing: list[tuple[str | None, list[str]]] = []
            stop = threading.Event()

            def sample() -> None:  # the key the node names, missing from the ConfigMap at any moment?
                while not stop.wait(0.02):
                    _, n = control_plane.api("GET", f"/api/v1/nodes/{node}")
                    _, cm = control_plane.api("GET", f"/api/v1/namespaces/{ns}/configmaps/{manifests.PLUGIN_CONFIGMAP}")
                    key, keys = n["metadata"]["labels"].get(LABEL), sorted(cm.get("data") or {})
                    if key not in keys:
                        missing.append((key, keys))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                _apply(control_plane, _documents(tmp_path, ns, node, 4, control_plane.kubeconfig))
                second = label()
                assert second != first and second in data() and first in data()
                wait_until(lambda: pod.daemon.replicas == 4, 300, "the daemon at 4 replicas")
            finally:
                stop.set()
                sampler.join(timeout=10)
            assert not missing, missing[:3]
            assert pod.signals == 1 and pod.crashes >= 1, pod.log
            # No node carries the old key now: the next render drops it.
            _apply(control_plane, _documents(tmp_path, ns, node, 4, control_plane.kubeconfig))
            assert first not in data() and second in data()
        finally:
            pod.stop()
    finally:
        control_plane.kubectl("delete", "node", node, "--wait=false", check=False)
        control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)
