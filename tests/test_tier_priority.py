"""The tier priority record (gpupool/deploy/tier_priority_provider.py, components/tiers.py): each PriorityClass takes
its `gpupool.dev/tier-priority` annotation from the record's output, so a preview that changes a tier's value has an
unknown input and pulumi-kubernetes previews the replacement without the dry run that the API server refuses. The
engine side is proven in tests/e2e/test_gpupool_up.py; here: the record, the render's equal text, the wiring."""

from __future__ import annotations

from gpupool.deploy.tier_priority_provider import TierPriorityProvider
from gpupool.k8s import manifests
from gpupool.k8s.manifests import ANNOTATION_TIER_PRIORITY, priority_revision
from gpupool.rules.engine import load_valid_spec
from tests.pulumi_mocks import run_program

RECORD = "pulumi-python:dynamic/gpupool:TierPriority"


def test_the_record_changes_only_with_the_value_or_the_preemption_policy():
    old = {"tier": "standard", "value": 10000, "preemptionPolicy": "PreemptLowerPriority", "revision": None}
    p = TierPriorityProvider()
    assert p.diff("standard", old, dict(old)).changes is False
    assert p.diff("standard", old, {**old, "value": 20000}).changes is True
    assert p.diff("standard", old, {**old, "preemptionPolicy": "Never"}).changes is True
    created = p.create(dict(old))
    assert created.id == "standard" and created.outs["revision"] == "10000 PreemptLowerPriority"
    assert p.update("standard", old, {**old, "value": 20000}).outs["revision"] == "20000 PreemptLowerPriority"


def test_every_rendered_class_carries_its_tiers_revision():
    spec = load_valid_spec("stacks/prod/spec.yaml")
    classes = {
        o.manifest["metadata"]["name"]: o.manifest for o in manifests.build(spec).objects if o.kind == "PriorityClass"
    }
    assert classes and set(classes) == {t.name for t in spec.tiers}
    for tier in spec.tiers:
        annotations = classes[tier.name]["metadata"]["annotations"]
        assert annotations[ANNOTATION_TIER_PRIORITY] == priority_revision(tier.priority, tier.preemption_policy)


def test_each_class_is_registered_after_its_record_and_with_its_output():
    mocks, monitor, error = run_program({"spec": "stacks/dev/spec.yaml"}, stack="dev")
    assert error is None, error
    records = {r["urn"]: r for r in monitor.requests.values() if r["type"] == RECORD}
    classes = [r for r in monitor.requests.values() if r["type"] == "kubernetes:scheduling.k8s.io/v1:PriorityClass"]
    assert classes and len(records) == len(classes)
    for c in classes:
        tier = c["urn"].rsplit("::", 1)[1].removeprefix("gpupool-tier-")
        mine = [u for u in c["dependencies"] if u in records]
        assert [u.rsplit("::", 1)[1] for u in mine] == [f"gpupool-tier-{tier}_priority"], c["dependencies"]
        assert records[mine[0]]["parent"] == c["parent"]  # beside the class, under PriorityTiers
    inputs = {a.name: a.inputs for a in mocks.created if a.typ == "kubernetes:scheduling.k8s.io/v1:PriorityClass"}
    assert inputs["gpupool-tier-standard"]["metadata"]["annotations"] == {
        ANNOTATION_TIER_PRIORITY: "10000 PreemptLowerPriority"
    }
