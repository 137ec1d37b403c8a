"""Old device-plugin config keys stay in the device-plugin ConfigMap while nodes carry them (gpupool.k8s.mig_in_use,
its device-plugin part), outside the config hash: an MPS edit (whose key changes with its config) never leaves a
node whose label names a key the ConfigMap lacks (k8s-device-plugin v0.20.0 cmd/config-manager/main.go 351-357:
config-manager-init exits and the node advertises no GPUs)."""

from __future__ import annotations

from gpupool.k8s import manifests, mig_in_use
from gpupool.model import platform as m
from tests.test_mig_in_use import FakeApi


def _spec(replicas: int) -> m.Spec:
    pool = m.NodePool("mps", "L4", 4, 1, nodes=("n1",), sharing=m.Sharing(mps=m.Mps(replicas)))
    return m.Spec(m.Cluster("c", mig_strategy="none"), (pool,), (m.Tier("batch", 1),), ())


def _node(name: str, key: str | None) -> dict:
    return {"metadata": {"name": name, "labels": {mig_in_use.LABEL_PLUGIN_CONFIG: key} if key else {}}}


def test_an_mps_edit_keeps_the_old_key_a_node_carries_with_its_live_text_and_no_new_hash():
    old_data, old_by_pool = manifests.device_plugin_config(_spec(2))
    new_data, new_by_pool = manifests.device_plugin_config(_spec(4))
    old_key, new_key = old_by_pool["mps"], new_by_pool["mps"]
    assert old_key != new_key and old_key not in new_data  # the premise: the key moves with the config
    live = {"data": {**old_data, "unused.12345678": "version: v1\n"}}
    api = FakeApi(live, [[_node("n1", old_key), _node("n2", manifests.EXCLUSIVE_KEY), _node("n3", None)]])
    kept = mig_in_use.read_kept_plugin(api, "gpu-operator", manifests.PLUGIN_CONFIGMAP, new_data)
    assert kept == {old_key: old_data[old_key]}  # the unused key goes; the exclusive key is the spec's own
    plain, keeping = manifests.build(_spec(4)), manifests.build(_spec(4), None, kept)
    cm = {o.name: o for o in keeping.objects}["device-plugin-config"].manifest
    assert cm["data"][old_key] == old_data[old_key] and cm["data"][new_key] == new_data[new_key]
    assert cm["metadata"]["annotations"] == {manifests.ANNOTATION_KEPT_PLUGIN: old_key}
    # Keeping it restarts nothing (the device plugin's config hash is the same), and so does dropping it later.
    assert keeping.chart.values == plain.chart.values
    plain_cm = {o.name: o for o in plain.objects}["device-plugin-config"].manifest
    assert old_key not in plain_cm["data"] and "annotations" not in plain_cm["metadata"]


def test_once_no_node_carries_it_the_key_goes_except_for_the_convergence_check():
    old_data, old_by_pool = manifests.device_plugin_config(_spec(2))
    new_data, new_by_pool = manifests.device_plugin_config(_spec(4))
    live = {
        "metadata": {"annotations": {manifests.ANNOTATION_KEPT_PLUGIN: old_by_pool["mps"]}},
        "data": {**old_data, **new_data},
    }
    api = FakeApi(live, [[_node("n1", new_by_pool["mps"])]])
    assert mig_in_use.read_kept_plugin(api, "ns", "cm", new_data) == {}
    as_written = mig_in_use.read_kept_plugin(api, "ns", "cm", new_data, as_written=True)
    assert as_written == {old_by_pool["mps"]: old_data[old_by_pool["mps"]]}
    assert mig_in_use.ANNOTATION_KEPT_PLUGIN == manifests.ANNOTATION_KEPT_PLUGIN
    assert mig_in_use.LABEL_PLUGIN_CONFIG == manifests.LABEL_PLUGIN_CONFIG
