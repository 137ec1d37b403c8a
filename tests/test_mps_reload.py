"""An MPS replicas edit reaches the MPS control daemon: the pool's device-plugin key changes with its config.

The daemon reloads only on SIGHUP from its config-manager sidecar, which acts only when the node label's
value changes (k8s-device-plugin v0.20.0 cmd/config-manager/main.go lines 270-279, 296-333;
cmd/mps-control-daemon/main.go lines 108-162); the operator rolls the device plugin and GFD on gpupool's env
hash but not the daemon (gpu-operator v26.7.0 controllers/object_controls.go, TransformMPSControlDaemon, lines
1632-1703). The stand-in (tests/e2e/mps_daemon_sim.py) follows those lines; tests/e2e/test_mps_reload.py runs
it against the API server.
"""

from __future__ import annotations

import time

import yaml

from gpupool.k8s import manifests
from gpupool.rules.engine import validate_file
from tests.e2e.mps_daemon_sim import LABEL, MountedConfigMap, MpsPod, wait_until

SPEC = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster: {{name: dev, migStrategy: none}}
nodePools:
  - {{name: {pool}, gpu: L4, gpusPerNode: 4, nodes: [n1], sharing: {{mps: {{replicas: {replicas}}}}}}}
  - {{name: ts, gpu: L4, gpusPerNode: 4, nodes: [n2], sharing: {{timeSlicing: {{replicas: {replicas}}}}}}}
tiers: [{{name: standard, priority: 100}}]
tenants:
  - {{name: team-a, tier: standard, owners: [a], gpus: {{nvidia.com/gpu.shared: 8}}}}
"""


def _plan(tmp_path, replicas: int, pool: str = "mps"):
    path = tmp_path / f"spec-{replicas}.yaml"
    path.write_text(SPEC.format(pool=pool, replicas=replicas))
    result = validate_file(path)
    assert result.ok, [d.render() for d in result.report.diagnostics]
    return manifests.build(result.spec)


def _plugin_data(plan) -> dict[str, str]:
    return next(o for o in plan.objects if o.name == "device-plugin-config").manifest["data"]


def _node_label(plan, node: str) -> str:
    """The device-plugin config label the node's patches give it (the re-key chain's cordon patches carry none)."""
    (label,) = {
        o.manifest["metadata"]["labels"][LABEL]
        for o in plan.objects
        if o.kind == "Node"
        and o.manifest["metadata"]["name"] == node
        and LABEL in o.manifest["metadata"].get("labels", {})
    }
    return label


def test_a_replicas_edit_gives_the_mps_pool_a_new_key_and_its_node_a_new_label(tmp_path):
    before, after = _plan(tmp_path, 2), _plan(tmp_path, 4)
    key_b, key_a = before.pool_configs["mps"].device_plugin, after.pool_configs["mps"].device_plugin
    assert key_b != key_a and key_b.startswith("mps.") and key_a.startswith("mps.")
    assert _node_label(before, "n1") == key_b and _node_label(after, "n1") == key_a
    assert yaml.safe_load(_plugin_data(after)[key_a])["sharing"]["mps"]["resources"][0]["replicas"] == 4
    assert key_b not in _plugin_data(after)
    # Deterministic: the same spec, the same key.
    assert _plan(tmp_path, 4).pool_configs["mps"].device_plugin == key_a
    # Time-slicing keeps its key: its readers (device plugin, GFD) are rolled by the operator on the env hash.
    assert before.pool_configs["ts"].device_plugin == after.pool_configs["ts"].device_plugin == "ts"


def test_a_63_character_pool_name_still_gives_a_label_value(tmp_path):
    pool = "m" * 63
    key = _plan(tmp_path, 2, pool=pool).pool_configs[pool].device_plugin
    assert len(key) == 63 and key.startswith("m" * 54 + ".")


class _Source:
    """A node label and a ConfigMap as plain values, changed by the test."""

    def __init__(self, label: str, data: dict[str, str]) -> None:
        self.label, self.data = label, data


def _run_edit(before, after, node: str = "n1", lag: float = 0.5) -> MpsPod:
    src = _Source(_node_label(before, node), _plugin_data(before))
    pod = MpsPod(lambda: src.label, MountedConfigMap(lambda: src.data, lag=lag), backoff=0.2).start()
    try:
        wait_until(lambda: pod.daemon.replicas == 2, 30, "the daemon at 2 replicas")
        # gpupool's order: the ConfigMap first, then the node's label (depends_on device-plugin-config).
        src.data = _plugin_data(after)
        src.label = _node_label(after, node)
        wait_until(lambda: pod.daemon.replicas == 4, 30, "the daemon at 4 replicas")
        return pod
    finally:
        pod.stop()


def test_gpupools_key_change_reaches_the_daemon_through_config_manager(tmp_path):
    pod = _run_edit(_plan(tmp_path, 2), _plan(tmp_path, 4))
    assert pod.daemon.replicas == 4 and pod.signals == 1
    # The label arrived before the mount showed the new key: config-manager exited and came back (its source).
    assert pod.crashes >= 1 and any("does not exist" in line for line in pod.log)


def test_the_same_key_with_new_content_never_reaches_the_daemon(tmp_path):
    """What main did (the pool's name as key): the mount changes, the label does not, nothing signals."""
    before, after = _plan(tmp_path, 2), _plan(tmp_path, 4)

    def same_key(plan):
        key = plan.pool_configs["mps"].device_plugin
        data = dict(_plugin_data(plan))
        data["mps"] = data.pop(key)
        return data

    src = _Source("mps", same_key(before))
    pod = MpsPod(lambda: src.label, MountedConfigMap(lambda: src.data, lag=0.3), backoff=0.2).start()
    try:
        wait_until(lambda: pod.daemon.replicas == 2, 30, "the daemon at 2 replicas")
        src.data = same_key(after)
        wait_until(lambda: pod.mounted.synced() >= 1, 30, "the mount to show the new ConfigMap")
        time.sleep(1.0)  # the sidecar polls every 0.1 s: ten of its rounds after the mount changed
        assert pod.daemon.replicas == 2 and pod.signals == 0 and pod.daemon.starts == 1
    finally:
        pod.stop()
