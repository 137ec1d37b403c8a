"""What the provider keeps as a node patch's outputs, by the provider's own await code (tools/await-eval, built
from the toolchain's pulumi-kubernetes module): the API server's answer to the patch's own apply, even when the
informer first delivers a Node from before it. Outputs older than the apply make the next preview plan the patch
again: `gpupool stacks up`'s convergence check failed that way after `destroy` and `up` (rollout.NODE_PATCH_AWAIT).

`make test` builds the tool and sets GPUPOOL_AWAIT_EVAL and GPUPOOL_REQUIRE_TOOLS=1, so there a missing binary
fails; elsewhere these tests are skipped without it."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest

# Needs a binary make test builds: run after the build, with the e2e tests (ci/test.sh).
pytestmark = pytest.mark.needs_tools

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def outputs():
    path = (
        os.environ.get("GPUPOOL_AWAIT_EVAL")
        or subprocess.run(
            ["bash", str(ROOT / "tools" / "build.sh"), "--print-await"], capture_output=True, text=True
        ).stdout.strip()
    )
    if not (path and Path(path).is_file()):
        if os.environ.get("GPUPOOL_REQUIRE_TOOLS"):
            pytest.fail(f"GPUPOOL_REQUIRE_TOOLS is set but await-eval is missing ({path}; make tools)")
        pytest.skip("await-eval not built (make tools)")

    def run(inputs: dict, applied: dict, informer: list[dict]) -> dict:
        done = subprocess.run(
            [path],
            input=json.dumps({"inputs": inputs, "applied": applied, "informer": informer}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert not result.get("error"), result
        return result["outputs"]

    return run


def _node_patches():
    from components.k8s_objects import pulumi_inputs
    from gpupool.k8s import manifests
    from gpupool.rules.engine import load_valid_spec

    plan = manifests.build(load_valid_spec(str(ROOT / "stacks" / "prod" / "spec.yaml")))
    patches = [(o.name, pulumi_inputs(o)) for o in plan.objects if o.patch and o.kind == "Node"]
    assert {"cordon", "uncordon", "labels"} <= {n.rpartition("_")[2] if "_" in n else "labels" for n, _ in patches}
    return patches


def _live(inputs: dict, version: str, waited_for: str) -> dict:
    """The Node as the API server has it once INPUTS are applied (at resourceVersion VERSION), with a
    `pulumi.com/waitFor` another patch of the node left there (annotations are shared by every patch of a node)."""
    node = copy.deepcopy(inputs)
    meta = node["metadata"]
    meta["resourceVersion"] = version
    meta.setdefault("annotations", {})["pulumi.com/waitFor"] = waited_for
    meta.setdefault("labels", {})["kubernetes.io/hostname"] = meta["name"]
    return node


def test_every_node_patch_keeps_its_own_apply_s_answer_even_after_an_older_informer_event(outputs):
    """The destroy-then-up case: patches are retained on destroy, so before the new apply the node already carries
    everything the patch writes; an informer event from before the apply looks the same but for its version."""
    patches = _node_patches()
    for name, inputs in patches:
        older = _live(inputs, "41", "jsonpath={.metadata.annotations['left.by/another-patch']}=x")
        applied = _live(inputs, "42", "jsonpath={.metadata.annotations['left.by/another-patch']}=x")
        got = outputs(inputs, applied, [older, applied])
        assert got["metadata"]["resourceVersion"] == "42", name


def test_the_previous_release_s_marker_wait_took_the_older_node(outputs):
    """The mechanism, by the same code (so the test above can fail): the releases before this one had each node
    patch wait for its own marker annotation; a retained marker let an older Node pass that wait, and the provider
    kept it as the outputs."""
    name, inputs = _node_patches()[0]
    marker = f"{name}.0123456789ab"
    old_style = copy.deepcopy(inputs)
    annotations = old_style["metadata"]["annotations"]
    del annotations["pulumi.com/skipAwait"]
    wait = json.dumps([f"jsonpath={{.metadata.annotations['gpupool.dev/last-patch-labels']}}={marker}"])
    annotations["gpupool.dev/last-patch-labels"] = marker
    annotations["pulumi.com/waitFor"] = wait
    older = _live(old_style, "41", wait)
    applied = _live(old_style, "42", wait)
    assert outputs(old_style, applied, [older, applied])["metadata"]["resourceVersion"] == "41"
    # Without the older event the wait takes the apply's answer: it is the informer's order that decides.
    assert outputs(old_style, applied, [applied])["metadata"]["resourceVersion"] == "42"
