"""Rolling MIG re-layout: the per-node chains the program registers, their order, and what plan/diff say."""

from __future__ import annotations

import dataclasses

from gpupool.analysis import diff as diffmod
from gpupool.analysis import plan as planmod
from gpupool.k8s import manifests, rollout
from gpupool.model import platform as m
from gpupool.present.diff import _mig_lines
from gpupool.present.plan import format_table

NODES = ("n1", "n2", "n3", "n4", "n5")


def _spec(preset="all-balanced", nodes=NODES, **ro) -> m.Spec:
    layout = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1} if preset == "all-balanced" else {"1g.10gb": 7}
    pool = m.NodePool(
        "a100",
        "A100-80GB",
        2,
        len(nodes),
        nodes=nodes,
        sharing=m.Sharing(mig=(m.MigGroup((0, 1), layout, preset),)),
        rollout=m.Rollout(**ro),
    )
    return m.Spec(m.Cluster("c"), (pool,), (m.Tier("batch", 1),), ())


def _pool_objects(spec) -> dict[str, manifests.Desired]:
    return {o.name: o for o in manifests.build(spec).objects if o.component == "pool:a100"}


def test_waves_follow_spec_order_in_groups_of_max_unavailable():
    pool = _spec(max_unavailable=2).pools[0]
    assert rollout.waves(pool) == [("n1", "n2"), ("n3", "n4"), ("n5",)]


def test_each_node_is_cordoned_relabelled_checked_and_uncordoned_in_order():
    objs = _pool_objects(_spec(max_unavailable=2, node_timeout_seconds=600))
    base = "pool-a100.n3"
    cordon, mig, check, uncordon, labels = (
        objs[f"{base}{s}"] for s in ("_cordon", "_mig", "_mig-check", "_uncordon", "")
    )
    assert cordon.manifest["spec"] == {"unschedulable": True} and "spec" not in uncordon.manifest
    assert cordon.field_manager == uncordon.field_manager == rollout.CORDON_MANAGER
    # Wave 2 starts after every node of wave 1 finished (uncordoned).
    assert cordon.depends_on == ("pool-a100.n1_uncordon", "pool-a100.n2_uncordon")
    ready = objs[f"{base}_mig-ready"]
    # Between the ready wait and the relabel, the drain step (not a node object: it is in plan.drains).
    assert (
        ready.depends_on == (cordon.name,) and mig.depends_on == (f"{base}_drain",) and check.depends_on == (mig.name,)
    )
    assert ready.wait_for == rollout.ready("a100-80gb-all-balanced") and ready.timeout_seconds == 600
    assert uncordon.depends_on == (check.name,)
    assert objs["pool-a100.n1_cordon"].depends_on == ("mig-config",)
    # The stale-success race: the new config and `pending` are written in the same apply.
    assert mig.manifest["metadata"]["labels"] == {
        "nvidia.com/mig.config": "a100-80gb-all-balanced",
        "nvidia.com/mig.config.state": "pending",
    }
    assert mig.wait_for == rollout.done("a100-80gb-all-balanced")
    assert mig.timeout_seconds == 600 and check.timeout_seconds == rollout.CHECK_TIMEOUT_SECONDS
    assert check.wait_for.endswith("=a100-80gb-all-balanced")
    # The timeout is a resource option, never an input: changing it must not re-apply `pending`.
    for o in objs.values():
        assert "pulumi.com/timeoutSeconds" not in o.manifest["metadata"].get("annotations", {})
    # The pool patch (its gpupool.dev/pool label marks the node as no longer new) comes after the chain and
    # no longer carries mig.config.
    assert uncordon.name in labels.depends_on
    assert "nvidia.com/mig.config" not in labels.manifest["metadata"]["labels"]
    assert all(o.patch and o.retain_on_delete for o in objs.values())


def _mig_config_objects(spec) -> dict[str, manifests.Desired]:
    return {o.name: o for o in manifests.build(spec).objects if o.component == "mig-config"}


def test_every_node_is_armed_before_the_mig_configmap_changes():
    """Step 0: `pending` and the config text's hash on every rolled node, applied before the ConfigMap (which
    depends on each arm) and exactly when the ConfigMap's text changes; the MIG Manager registers them first."""
    objs = _mig_config_objects(_spec())
    arms = [f"pool-a100.{n}_mig-arm" for n in NODES]
    config_map = objs["mig-config"]
    assert set(arms) <= set(config_map.depends_on)
    text = config_map.manifest["data"]["config.yaml"]
    for name in arms:
        arm = objs[name]
        assert arm.patch and arm.retain_on_delete and arm.depends_on == ()
        assert arm.manifest["metadata"]["labels"] == {rollout.LABEL_STATE: "pending"}
        assert arm.manifest["metadata"]["annotations"] == {rollout.ANNOTATION_ARMED: manifests.content_hash(text)}
        assert arm.ignore_changes == (rollout.IGNORE_STATE,)
    changed = _mig_config_objects(_spec(preset="all-1g.10gb"))
    assert all(objs[n].manifest != changed[n].manifest for n in arms)
    assert _mig_config_objects(_spec(max_unavailable=3)) == objs  # a policy-only edit arms nothing


def test_every_step_changes_exactly_when_the_config_changes():
    before = _pool_objects(_spec())
    after = _pool_objects(_spec(preset="all-1g.10gb"))
    pool_patches = {f"pool-a100.{n}" for n in NODES}
    for name, obj in before.items():
        changed = obj.manifest != after[name].manifest
        assert changed is (name not in pool_patches), name
    # ... and a rollout-policy-only change touches no object at all (order is dependsOn, timeout an option).
    other = _pool_objects(_spec(max_unavailable=3, node_timeout_seconds=99))
    assert {n: o.manifest for n, o in before.items()} == {n: o.manifest for n, o in other.items()}


def test_without_cordon_the_chain_is_relabel_and_check():
    objs = _pool_objects(_spec(cordon=False))
    assert not [n for n in objs if n.endswith("cordon")]
    assert objs["pool-a100.n2_mig-ready"].depends_on == ("pool-a100.n1_mig-check",)
    assert objs["pool-a100.n2_mig"].depends_on == ("pool-a100.n2_mig-ready",)


def test_the_jsonpaths_avoid_what_the_provider_cannot_parse():
    for expr in (rollout.done("cfg"), rollout.check("cfg"), rollout.ready("cfg")):
        body = expr.removeprefix("jsonpath=")
        # The provider splits on "=" after protecting "==" and takes the first {...}: no "!=", no nested braces.
        assert "!=" not in body and body.count("{") == 1 and body.count("}") == 1
        assert len(body.replace("==", "\0").split("=")) <= 2


def test_selector_pools_get_no_chain():
    spec = _spec()
    pool = dataclasses.replace(spec.pools[0], nodes=(), node_selector={"pool": "a100"}, node_count=3)
    objs = _pool_objects(dataclasses.replace(spec, pools=(pool,)))
    assert not objs
    (line,) = planmod.compute(dataclasses.replace(spec, pools=(pool,))).rollouts
    assert line.waves == () and "node-group tooling rolls it" in format_table(
        planmod.compute(dataclasses.replace(spec, pools=(pool,)))
    )


def test_plan_shows_order_and_nodes_unavailable_at_once():
    plan = planmod.compute(_spec(max_unavailable=2))
    (line,) = plan.rollouts
    assert (line.at_once, line.cordon, line.waves) == (2, True, (("n1", "n2"), ("n3", "n4"), ("n5",)))
    table = format_table(plan)
    assert "n1, n2" in table and "n3, n4" in table and table.index("n1, n2") < table.index("n3, n4")
    assert planmod.to_json(plan)["migRollouts"][0]["unavailableAtOnce"] == 2


def test_diff_shows_the_rollout_of_the_nodes_that_change_and_new_nodes_apart():
    base = _spec(nodes=NODES[:4], max_unavailable=2)
    head = _spec(preset="all-1g.10gb", nodes=NODES, max_unavailable=2)
    (change,) = diffmod.compute(base, head).mig
    assert change.waves == (("n1", "n2"), ("n3", "n4")) and change.new_nodes == ("n5",)
    assert change.at_once == 2
    text = "\n".join(x for sentence, detail in _mig_lines(diffmod.compute(base, head)) for x in [sentence, *detail])
    assert "rollout: 2 waves of at most 2 nodes unavailable at once" in text and "n1, n2 → n3, n4" in text
    assert "new node n5: labelled at once, no wait" in text


def test_a_drain_sits_between_ready_and_relabel_only_with_cordon_and_drain_and_is_never_rendered():
    """Step 1c: a drain record per node, kept out of plan.objects (so out of the render); without the cordon
    (the evicted pods would come straight back) or with `drain: false` the relabel follows the ready wait."""
    plan = manifests.build(_spec(max_unavailable=2, drain_timeout_seconds=45))
    drains = {d.node: d for d in plan.drains["a100"]}
    assert list(drains) == list(NODES)
    d3 = drains["n3"]
    assert d3 == rollout.Drain("pool-a100.n3_drain", "n3", "a100-80gb-all-balanced", ("pool-a100.n3_mig-ready",), 45)
    assert not [o for o in plan.objects if o.name.endswith("_drain")]
    for off in ({"cordon": False}, {"drain": False}):
        plan = manifests.build(_spec(max_unavailable=2, **off))
        assert not plan.drains, off
        objs = {o.name: o for o in plan.objects}
        assert objs["pool-a100.n3_mig"].depends_on == ("pool-a100.n3_mig-ready",), off
