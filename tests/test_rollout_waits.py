"""The node patches' `pulumi.com/waitFor` expressions, evaluated by the provider's own code (tools/waitfor-eval,
built from the toolchain's pulumi-kubernetes module). (The waits for MIG Manager are the mig step's own,
gpupool.k8s.mig_step, tested in tests/test_mig_step.py.)

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
        key = rollout.last_patch_key(obj.name)
        mine = {"metadata": {"name": "n", "annotations": {key: annotations[key]}}}
        before = {"metadata": {"name": "n", "annotations": {key: "pool-x.n_uncordon.0123456789ab"}}}
        assert [r["matched"] for r in evaluate(conditions[0], [mine, before])] == [True, False], obj.name
