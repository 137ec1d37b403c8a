"""An MPS pool's re-key (gpupool.k8s.rollout.rekey_chain): each named node is cordoned and its GPU pods drained
before its pool patch relabels it to the new device-plugin config key, then uncordoned, in waves; the drain
runs only when the node carries another key (gpupool.deploy.rekey_drain_provider)."""

from __future__ import annotations

import pytest

from gpupool.deploy.rekey_drain_provider import RekeyDrainProvider
from gpupool.k8s import drain, kubeclient, manifests
from gpupool.model import platform as m

NODES = ("n1", "n2", "n3")


def _spec(replicas=2, **ro) -> m.Spec:
    pool = m.NodePool(
        "mps", "L4", 4, len(NODES), nodes=NODES, sharing=m.Sharing(mps=m.Mps(replicas)), rollout=m.Rollout(**ro)
    )
    return m.Spec(m.Cluster("c", mig_strategy="none"), (pool,), (m.Tier("batch", 1),), ())


def test_each_node_is_cordoned_drained_relabelled_and_uncordoned_in_waves():
    plan = manifests.build(_spec(max_unavailable=2))
    objs = {o.name: o for o in plan.objects if o.component == "pool:mps"}
    key = plan.pool_configs["mps"].device_plugin
    drains = {d.node: d for d in plan.rekey_drains["mps"]}
    assert list(drains) == list(NODES) and all(d.key == key for d in drains.values())
    for n in NODES:
        cordon, patch, uncordon = (objs[f"pool-mps.{n}{s}"] for s in ("_rekey-cordon", "", "_rekey-uncordon"))
        assert cordon.manifest["spec"] == {"unschedulable": True}
        assert drains[n].depends_on == (cordon.name,)
        assert patch.depends_on[-1] == drains[n].name  # the relabel waits for the drain
        assert patch.manifest["metadata"]["labels"]["nvidia.com/device-plugin.config"] == key
        assert uncordon.depends_on == (patch.name,) and "spec" not in uncordon.manifest
    assert objs["pool-mps.n1_rekey-cordon"].depends_on == ("device-plugin-config",)
    assert objs["pool-mps.n3_rekey-cordon"].depends_on == ("pool-mps.n1_rekey-uncordon", "pool-mps.n2_rekey-uncordon")
    # A new key (another config) changes every step; without the cordon or the drain there is no chain.
    other = {o.name: o for o in manifests.build(_spec(replicas=4)).objects if o.component == "pool:mps"}
    assert all(objs[n].manifest != other[n].manifest for n in objs)
    for off in ({"cordon": False}, {"drain": False}):
        plan = manifests.build(_spec(**off))
        assert not plan.rekey_drains and not [o for o in plan.objects if "rekey" in o.name], off


class _Api:
    def __init__(self, label):
        self.label = label

    def __call__(self, method, path, body=None, content_type="application/json"):
        if path == "/api/v1/nodes/n1":
            return 200, {"metadata": {"labels": {"nvidia.com/device-plugin.config": self.label} if self.label else {}}}
        raise AssertionError(path)


@pytest.mark.parametrize(("label", "drains"), [("mps.00000000", True), ("mps.11111111", False), (None, False)])
def test_the_drain_runs_only_when_the_node_carries_another_key(monkeypatch, label, drains):
    monkeypatch.setattr(kubeclient, "Client", lambda *a, **k: _Api(label))
    called = []
    monkeypatch.setattr(drain, "drain", lambda api, node, **kw: called.append((node, kw["care"])) or ["ns/p"])
    props = {"node": "n1", "key": "mps.11111111", "timeoutSeconds": 30, "force": True, "deleteEmptyDirData": False}
    out = RekeyDrainProvider().create(props).outs
    assert bool(called) is drains and out["evicted"] == (["ns/p"] if drains else [])
    if drains:
        assert called == [("n1", drain.Care(True, False))]
    assert not RekeyDrainProvider().diff("n1", props, {**props, "timeoutSeconds": 99}).changes
    assert RekeyDrainProvider().diff("n1", props, {**props, "key": "mps.2"}).changes
