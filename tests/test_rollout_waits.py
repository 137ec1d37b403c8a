"""The rollout's `pulumi.com/waitFor` expressions, evaluated by the provider's own code (tools/waitfor-eval, built
from the toolchain's pulumi-kubernetes module), over every state a node can be in when a step waits.

`make test` builds the evaluator and sets GPUPOOL_WAITFOR_EVAL and GPUPOOL_REQUIRE_TOOLS=1, so there a missing
binary fails; elsewhere these tests are skipped without it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpupool.k8s import rollout

# Needs a binary make test builds: run after the build, with the e2e tests (ci/test.sh).
pytestmark = pytest.mark.needs_tools

ROOT = Path(__file__).resolve().parent.parent
NEW, OLD = "a100-80gb-all-1g.10gb", "a100-80gb-all-balanced"


@pytest.fixture(scope="module")
def evaluate():
    path = (
        os.environ.get("GPUPOOL_WAITFOR_EVAL")
        or subprocess.run(
            ["bash", str(ROOT / "tools" / "build.sh"), "--print-waitfor"], capture_output=True, text=True
        ).stdout.strip()
    )
    if not (path and Path(path).is_file()):
        if os.environ.get("GPUPOOL_REQUIRE_TOOLS"):
            pytest.fail(f"GPUPOOL_REQUIRE_TOOLS is set but waitfor-eval is missing ({path}; make tools)")
        pytest.skip("waitfor-eval not built (make tools)")

    def run(expr: str, nodes: list[dict]) -> list[dict]:
        done = subprocess.run(
            [path], input=json.dumps({"expr": expr, "objects": nodes}), capture_output=True, text=True
        )
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert done.returncode == 0, lines or done.stderr
        return lines

    return run


def node(config: str, state: str | None, checked: str | None) -> dict:
    labels = {"kubernetes.io/hostname": "gpu-7", rollout.LABEL_MIG_CONFIG: config, "gpupool.dev/pool": "a100"}
    if state:
        labels[rollout.LABEL_STATE] = state
    if checked:
        labels[rollout.LABEL_CHECKED] = checked
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-7", "labels": labels, "annotations": {"pulumi.com/patchForce": "true"}},
    }


# (config, state, checked) -> does step 2 stop waiting? After step 2's own apply the config is NEW and the state
# `pending`; MIG Manager then moves the state. An object with the OLD config is an informer event from before
# the apply (a Node's generation does not move on label changes, so the provider accepts it).
DONE_CASES = {
    (NEW, "pending", OLD): False,  # a real change, MIG Manager not done yet: wait
    (NEW, "success", OLD): True,  # ... done
    (NEW, "failed", OLD): True,  # ... failed: step 3 turns it into an error
    (NEW, "rebooting", OLD): False,  # MIG Manager rebooting the node (WITH_REBOOT): wait
    (NEW, "pending", None): True,  # never checked by gpupool (new node, or an upgrade): nothing to tell by
    (NEW, "pending", NEW): True,  # a created chain for an unchanged config: MIG Manager would never answer
    (OLD, "success", OLD): False,  # the stale object: the previous layout's success must not pass
    (OLD, "success", None): False,
    (OLD, "pending", NEW): False,
}


@pytest.mark.parametrize(("labels", "stops"), DONE_CASES.items(), ids=[",".join(map(str, k)) for k in DONE_CASES])
def test_step_2_waits_exactly_until_mig_manager_answered_a_change(evaluate, labels, stops):
    (result,) = evaluate(rollout.done(NEW), [node(*labels)])
    assert not result.get("error"), result
    assert result["matched"] is stops, result


# (config, state, checked) -> does step 1b (ready) stop waiting? It runs before the relabel, so the config is still
# OLD for a change. The arm (step 0) wrote `pending` before the ConfigMap changed; only a MIG Manager pod started
# after it moves the state on (mig-parted reconfigure.go 137-146: its start-up run writes success or failed).
READY_CASES = {
    (OLD, "pending", OLD): False,  # armed, the node's MIG Manager has not restarted with the new file yet
    (OLD, "rebooting", OLD): False,
    (OLD, "success", OLD): True,  # restarted; its start-up run found the old config applied: idle now
    (OLD, "failed", OLD): True,  # restarted; the old name is not in the new file (assert.go), GPUs untouched
    (OLD, "pending", None): True,  # a node gpupool never rolled (new, or labelled without rollouts)
    (NEW, "pending", NEW): True,  # a created chain for an unchanged config: nothing changes
}


@pytest.mark.parametrize(("labels", "stops"), READY_CASES.items(), ids=[",".join(map(str, k)) for k in READY_CASES])
def test_step_1b_waits_until_the_nodes_mig_manager_restarted_after_the_arm(evaluate, labels, stops):
    (result,) = evaluate(rollout.ready(NEW), [node(*labels)])
    assert not result.get("error"), result
    assert result["matched"] is stops, result


def test_step_3_passes_on_success_and_on_an_unanswered_no_change(evaluate):
    # After step 3's own apply, `checked` is NEW.
    ok = evaluate(rollout.check(NEW), [node(NEW, "success", NEW), node(NEW, "pending", NEW)])
    assert [r["matched"] for r in ok] == [True, True] and not any(r.get("error") for r in ok), ok


def test_step_3_fails_on_failed_naming_the_node_and_its_state(evaluate):
    (result,) = evaluate(rollout.check(NEW), [node(NEW, "failed", NEW)])
    assert not result["matched"]
    # The provider's error quotes the labels map: that is the message `pulumi up` stops with.
    assert "kubernetes.io/hostname:gpu-7" in result["error"], result
    assert f"{rollout.LABEL_STATE}:failed" in result["error"], result


def test_step_3_ignores_objects_from_before_its_apply(evaluate):
    # `checked` still OLD: an older informer event, even one that says failed, neither passes nor errors.
    results = evaluate(
        rollout.check(NEW), [node(NEW, "failed", OLD), node(NEW, "success", OLD), node(NEW, "success", None)]
    )
    assert [(r["matched"], r.get("error")) for r in results] == [(False, None)] * 3, results


def test_every_node_patch_first_waits_for_its_own_apply(evaluate):
    """The outputs of a node patch are the object its wait last observed; an informer event from before the apply
    would otherwise become the outputs, and the next `up` would re-apply an unchanged patch (a re-cordon)."""
    from components.k8s_objects import pulumi_inputs
    from gpupool.k8s import manifests
    from gpupool.rules.engine import load_valid_spec

    plan = manifests.build(load_valid_spec(str(ROOT / "stacks" / "prod" / "spec.yaml")))
    patches = [o for o in plan.objects if o.patch and o.kind == "Node"]
    assert len({rollout.node_patch_marker(o.name, o.manifest) for o in patches}) == len(patches)
    for obj in patches:
        annotations = pulumi_inputs(obj)["metadata"]["annotations"]
        conditions = json.loads(annotations["pulumi.com/waitFor"])
        assert conditions[1:] == ([obj.wait_for] if obj.wait_for else []), obj.name
        mine = {"metadata": {"name": "n", "annotations": {rollout.LAST_PATCH: annotations[rollout.LAST_PATCH]}}}
        before = {"metadata": {"name": "n", "annotations": {rollout.LAST_PATCH: "pool-x.n_uncordon.0123456789ab"}}}
        assert [r["matched"] for r in evaluate(conditions[0], [mine, before])] == [True, False], obj.name
