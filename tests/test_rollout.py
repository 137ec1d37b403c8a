"""Rolling MIG re-layout: the per-node chains the program registers, their order, and what plan/diff say."""

from __future__ import annotations

import dataclasses

from gpupool.analysis import diff as diffmod
from gpupool.analysis import plan as planmod
from gpupool.k8s import manifests, rollout
from gpupool.model import platform as m
from gpupool.present import plan_json
from gpupool.present.diff.nodes import mig_lines as _mig_lines
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


def _steps(spec) -> dict[str, rollout.Reconfigure]:
    return {d.node: d for d in manifests.build(spec).mig_steps["a100"]}


def test_each_node_is_cordoned_reconfigured_and_uncordoned_in_order():
    spec = _spec(max_unavailable=2, node_timeout_seconds=600)
    objs = _pool_objects(spec)
    base = "pool-a100.n3"
    cordon, uncordon, labels = (objs[f"{base}{s}"] for s in ("_cordon", "_uncordon", ""))
    assert cordon.manifest["spec"] == {"unschedulable": True} and "spec" not in uncordon.manifest
    assert cordon.field_manager == uncordon.field_manager == rollout.CORDON_MANAGER
    # One field manager: what the cordon writes besides spec.unschedulable, the uncordon writes too, or its
    # apply would release it and a refresh would plan the cordon again (a re-cordon of a finished node).
    assert cordon.manifest["metadata"]["annotations"].items() <= uncordon.manifest["metadata"]["annotations"].items()
    # Wave 2 starts after every node of wave 1 finished (uncordoned).
    assert cordon.depends_on == ("pool-a100.n1_uncordon", "pool-a100.n2_uncordon")
    # Between them the node's mig step (not a node object: it is in plan.mig_steps).
    mig = _steps(spec)["n3"]
    assert mig == rollout.Reconfigure(
        f"{base}_mig", "n3", "a100-80gb-all-balanced", "gpu-operator", (cordon.name,), 600, True, 300
    )
    assert uncordon.depends_on == (mig.name,)
    assert objs["pool-a100.n1_cordon"].depends_on == ("mig-config",)
    # No node patch writes the state label or waits: `pending` is the mig step's, written where it waits.
    for o in objs.values():
        assert rollout.LABEL_STATE not in o.manifest["metadata"].get("labels", {}) and o.wait_for is None
    # The pool patch comes after the chain and carries the final labels, mig.config too (for a plain apply).
    assert uncordon.name in labels.depends_on
    assert labels.manifest["metadata"]["labels"]["nvidia.com/mig.config"] == "a100-80gb-all-balanced"
    assert all(o.patch and o.retain_on_delete for o in objs.values())


def test_no_node_is_armed_and_a_named_pools_relayout_does_not_roll_mig_manager():
    """The MIG ConfigMap comes first and writes nothing on nodes; its config hash (the operator's DaemonSet roll)
    does not move with a named pool's layout, only with a selector-based pool's."""
    a, b = manifests.build(_spec()), manifests.build(_spec(preset="all-1g.10gb"))
    assert not [o for o in a.objects if o.component == "mig-config" and o.kind == "Node"]
    config_map = next(o for o in a.objects if o.name == "mig-config")
    assert config_map.depends_on == ("gpu-operator-ns",)
    env = lambda plan: plan.chart.values["migManager"]["env"]  # noqa: E731
    assert env(a) == env(b)
    spec = _spec()
    selected = dataclasses.replace(spec.pools[0], nodes=(), node_selector={"pool": "a100"}, node_count=3)
    c = manifests.build(dataclasses.replace(spec, pools=(selected,)))
    d_spec = _spec(preset="all-1g.10gb")
    d = manifests.build(
        dataclasses.replace(
            d_spec,
            pools=(dataclasses.replace(d_spec.pools[0], nodes=(), node_selector={"pool": "a100"}, node_count=3),),
        )
    )
    assert env(c) != env(d)


def test_every_step_changes_exactly_when_the_config_changes():
    before, after = _pool_objects(_spec()), _pool_objects(_spec(preset="all-1g.10gb"))
    for name, obj in before.items():
        assert obj.manifest != after[name].manifest, name
    assert all(_steps(_spec())[n].config != _steps(_spec(preset="all-1g.10gb"))[n].config for n in NODES)
    # ... and a rollout-policy-only change touches no object at all (order is dependsOn, timeout an option).
    other = _pool_objects(_spec(max_unavailable=3, node_timeout_seconds=99))
    assert {n: o.manifest for n, o in before.items()} == {n: o.manifest for n, o in other.items()}


def test_without_cordon_the_chain_is_the_mig_step_alone_and_drains_nothing():
    spec = _spec(cordon=False)
    objs = _pool_objects(spec)
    assert not [n for n in objs if n.endswith("cordon")]
    steps = _steps(spec)
    assert steps["n2"].depends_on == ("pool-a100.n1_mig",) and not steps["n2"].drain
    assert objs["pool-a100.n2"].depends_on[-1] == "pool-a100.n2_mig"


def test_the_drain_settings_reach_the_mig_step_which_is_never_rendered():
    """The drain runs inside the mig step (gpupool.k8s.mig_step), with the pool's kubectl-like switches; no
    object of the plan, so nothing of the render, is the step."""
    plan = manifests.build(_spec(max_unavailable=2, drain_timeout_seconds=45, force=True))
    d3 = {d.node: d for d in plan.mig_steps["a100"]}["n3"]
    assert (d3.drain, d3.drain_timeout_seconds, d3.force, d3.delete_empty_dir_data) == (True, 45, True, False)
    assert not [o for o in plan.objects if o.name.endswith("_mig")]
    for off in ({"cordon": False}, {"drain": False}):
        assert not any(d.drain for d in manifests.build(_spec(**off)).mig_steps["a100"]), off


def test_a_node_the_operator_may_reboot_is_drained_whole_where_the_pool_drains():
    """migRebootOnReconfigure (MIG Manager's WITH_REBOOT) can reboot a node for a MIG mode change: the mig step then
    drains every pod of the node (gpupool.k8s.drain, Care.whole_node), only in pools that drain at all."""
    spec = _spec(max_unavailable=2)
    assert not any(d.whole_node for d in manifests.build(spec).mig_steps["a100"])
    operator = dataclasses.replace(spec.cluster.operator, mig_reboot=True)
    rebooting = dataclasses.replace(spec, cluster=dataclasses.replace(spec.cluster, operator=operator))
    assert all(d.whole_node for d in manifests.build(rebooting).mig_steps["a100"])
    no_drain = dataclasses.replace(
        rebooting, pools=(dataclasses.replace(spec.pools[0], rollout=m.Rollout(drain=False)),)
    )
    assert not any(d.whole_node for d in manifests.build(no_drain).mig_steps["a100"])


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
    assert plan_json.to_json(plan)["migRollouts"][0]["unavailableAtOnce"] == 2


def test_diff_shows_the_rollout_of_the_nodes_that_change_and_new_nodes_apart():
    base = _spec(nodes=NODES[:4], max_unavailable=2)
    head = _spec(preset="all-1g.10gb", nodes=NODES, max_unavailable=2)
    (change,) = diffmod.compute(base, head).mig
    assert change.waves == (("n1", "n2"), ("n3", "n4")) and change.new_nodes == ("n5",)
    assert change.at_once == 2
    text = "\n".join(x for sentence, detail in _mig_lines(diffmod.compute(base, head)) for x in [sentence, *detail])
    assert "rollout: 2 waves of at most 2 nodes unavailable at once" in text and "n1, n2 → n3, n4" in text
    assert "new node n5: labelled at once, not in a wave" in text


def test_no_node_patch_waits_and_patches_of_a_node_agree_on_every_annotation_they_share():
    """A node patch's outputs must be its own apply's answer (skipAwait; rollout.NODE_PATCH_AWAIT says why a
    waitFor is not). And a refresh (gpupool stacks up runs one) reads each patch's fields back from the node:
    an annotation two patches of one node both wrote with different values would differ for all but the last
    writer, which would be planned again (a re-cordon)."""
    from components.k8s_objects import pulumi_only_annotations

    for spec in (_spec(max_unavailable=2), _spec(cordon=False)):
        by_node: dict[str, list[manifests.Desired]] = {}
        for o in manifests.build(spec).objects:
            if o.patch and o.kind == "Node":
                by_node.setdefault(o.manifest["metadata"]["name"], []).append(o)
        assert by_node
        for node, patches in by_node.items():
            written: dict[str, set[str]] = {}
            for p in patches:
                extra = pulumi_only_annotations(p)
                assert extra.get("pulumi.com/skipAwait") == "true" and "pulumi.com/waitFor" not in extra, p.name
                for key, value in {**extra, **p.manifest["metadata"].get("annotations", {})}.items():
                    written.setdefault(key, set()).add(value)
            assert all(len(values) == 1 for values in written.values()), (node, written)


def test_the_refresh_exclusion_matches_exactly_the_cordon_and_uncordon_patches():
    """REFRESH_EXCLUDE, matched as pulumi matches an --exclude glob (pkg/resource/deploy/deployment.go,
    getMatcher: `**` any characters, `*` any but ':'), against the URNs of a pool's steps: the cordon,
    uncordon and MPS re-key cordon patches only, never the pool patch, the mig step or another object."""
    import re

    from gpupool.k8s import rollout as r

    def matcher(glob: str) -> re.Pattern:
        parts = ["[^:]*".join(re.escape(p) for p in seg.split("*")) for seg in glob.split("**")]
        return re.compile("^" + ".*".join(parts) + "$")

    (glob,) = r.REFRESH_EXCLUDE
    m = matcher(glob)
    head = "urn:pulumi:dev::gpupool::gpupool:index:GpuPlatform$gpupool:gpu:NodePool$"
    patch = head + "kubernetes:core/v1:NodePatch::gpupool-pool-a100.gpu-1"
    excluded = [patch + s for s in ("_cordon", "_uncordon", "_rekey-cordon", "_rekey-uncordon")]
    kept = [
        patch,
        head + "pulumi-python:dynamic/gpupool:NodeMigStep::gpupool-pool-a100.gpu-1_mig",
        head + "kubernetes:core/v1:ConfigMap::gpupool-cordon",
        "urn:pulumi:dev::gpupool::gpupool:index:GpuPlatform$kubernetes:core/v1:Namespace::gpupool-tenant-cordon",
    ]
    assert all(m.match(u) for u in excluded)
    assert not any(m.match(u) for u in kept)
