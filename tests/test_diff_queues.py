"""`gpupool diff` shows Kueue queue changes (issue 24): computed from the queue model of both sides
(gpupool.model.queues, the functions the ClusterQueues are rendered from), one test per kind of change, the
risk class of each (⚠ in the alert box with the reason, or ✓ routine), and the rendered Queues section.

Preemption semantics the risk classes rest on: kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go,
ResourceQuota.lendingLimit ("ClusterQueue reserves for its exclusive use a quantity of quota equals to
nominalQuota - lendingLimit"; null lends all of it) and ClusterQueuePreemption (reclaimWithinCohort: a
workload within its nominal quota preempts borrowers; withinClusterQueue; borrowWithinCohort)."""

from __future__ import annotations

import json

import pytest

from gpupool.analysis import diff as dm
from gpupool.analysis.diff import queues as qd
from gpupool.k8s import manifests
from tests.test_diff import run
from tests.test_queueing import SMALL

NO_QUEUEING = SMALL.split("queueing:")[0]


def _write(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def _diff(tmp_path, capsys, head_text: str, base_text: str = SMALL, *args: str):
    base = _write(tmp_path, "base", base_text)
    head = _write(tmp_path, "head", head_text)
    return run(capsys, base, head, *args)


def _json(tmp_path, capsys, head_text: str, base_text: str = SMALL) -> dict:
    code, out, err = _diff(tmp_path, capsys, head_text, base_text, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def _risks(doc: dict) -> dict[str, list[str]]:
    return {a["risk"]: a["names"] for a in doc["alerts"]}


def test_queueing_turned_on_is_an_alert_with_what_it_makes(tmp_path, capsys):
    code, out, err = _diff(tmp_path, capsys, SMALL, NO_QUEUEING)
    assert code == 0, err
    assert "⚠ HEAD applies, but it turns Kueue queueing on for 3 tenants." in out
    assert "queueing turned on (Kueue): 2 ResourceFlavors, 1 Cohorts, 3 ClusterQueues" in out
    assert "+ serve: new ClusterQueue and LocalQueue (cohort test): whole nvidia.com/gpu nominal 2" in out
    assert "gone: new ClusterQueue and LocalQueue (cohort test): no nominal quota (borrows only); holds" in out
    doc = _json(tmp_path, capsys, SMALL, NO_QUEUEING)
    assert doc["queues"]["enabledBefore"] is False and doc["queues"]["enabledAfter"] is True
    assert _risks(doc)["queueingOn"] == ["gone", "serve", "train"]


def test_queueing_turned_off_is_one_alert_row_not_a_row_per_queue(tmp_path, capsys):
    code, out, err = _diff(tmp_path, capsys, NO_QUEUEING)
    assert code == 0, err
    assert "turns Kueue queueing off (3 queues deleted)" in out
    section = out.split("Queues (Kueue)")[1].split("\n\n")[0]
    assert section.count("\n  ") == 1 and "queueing turned off: every Kueue object gpupool made is deleted" in section
    assert "GPU ResourceQuotas shrink back to the grants" in section


def test_nominal_reduction_is_an_alert_naming_flavor_and_resource(tmp_path, capsys):
    head = SMALL.replace("nvidia.com/gpu: 2, nvidia.com/mig-1g.5gb: 3}", "nvidia.com/gpu: 1, nvidia.com/mig-1g.5gb: 3}")
    doc = _json(tmp_path, capsys, head)
    assert _risks(doc) == {"nominalReduced": ["serve"]}
    assert doc["verdict"] == "risky"
    serve = next(q for q in doc["queues"]["tenants"] if q["tenant"] == "serve")
    assert serve["quotas"] == [
        {
            "flavor": "whole",
            "resource": "nvidia.com/gpu",
            "nominalBefore": 2,
            "nominalAfter": 1,
            "borrowingBefore": None,
            "borrowingAfter": None,
            "lendableBefore": 0,
            "lendableAfter": 0,
        }
    ]
    code, out, _ = _diff(tmp_path, capsys, head)
    assert "serve (whole nvidia.com/gpu 2 → 1)" in out  # the alert line says which entry
    assert "⚠ serve: whole nvidia.com/gpu nominal 2 → 1 (-1)" in out


def test_nominal_increase_and_borrowing_limit_are_routine(tmp_path, capsys):
    head = SMALL.replace("gpus: {nvidia.com/gpu: 2}}", "gpus: {nvidia.com/gpu: 2, nvidia.com/mig-1g.5gb: 2}}").replace(
        "batch: {reclaim: Never}", "batch: {reclaim: Never, borrowingLimit: 2}"
    )
    doc = _json(tmp_path, capsys, head)
    assert doc["verdict"] == "routine" and doc["alerts"] == []
    train = {
        (x["flavor"], x["resource"]): x for q in doc["queues"]["tenants"] if q["tenant"] == "train" for x in q["quotas"]
    }
    assert train[("mig", "nvidia.com/mig-1g.5gb")]["nominalAfter"] == 2
    assert train[("whole", "nvidia.com/gpu")]["borrowingBefore"] is None
    assert train[("whole", "nvidia.com/gpu")]["borrowingAfter"] == 2
    code, out, _ = _diff(tmp_path, capsys, head)
    assert out.splitlines()[1].startswith("✓ HEAD is valid")
    assert "~ train: whole nvidia.com/gpu borrowing limit none → 2; mig nvidia.com/mig-1g.5gb nominal 0 → 2 (+2)" in out


def test_lending_protection_lost_is_an_alert_and_more_protection_is_routine(tmp_path, capsys):
    head = SMALL.replace("inference: {lendingLimit: 0}", "inference: {lendingLimit: 1}")
    doc = _json(tmp_path, capsys, head)
    assert _risks(doc) == {"preemptionExposed": ["inference"]}
    tier = doc["queues"]["tiers"][0]
    assert (tier["field"], tier["before"], tier["after"]) == ("lendingLimit", 0, 1)
    assert "it lent nothing before" in tier["exposes"]
    # the other way round: the tier keeps more of its quota to itself
    doc = _json(tmp_path, capsys, SMALL, head)
    assert doc["alerts"] == [] and doc["queues"]["tiers"][0]["exposes"] == ""


@pytest.mark.parametrize(
    "before, after, exposed",
    [
        ("batch: {reclaim: Never}", "batch: {reclaim: Never, withinQueue: LowerOrNewerEqualPriority}", True),
        ("batch: {reclaim: Never}", "batch: {reclaim: Never, withinQueue: Never}", False),
        ("batch: {reclaim: Never}", "batch: {reclaim: LowerPriority, borrowWithinCohort: LowerPriority}", True),
        ("batch: {reclaim: Never}", "batch: {reclaim: Any}", False),  # batch reclaims more: its own gain
        ("inference: {lendingLimit: 0}", "inference: {lendingLimit: 0, reclaim: Never}", True),
        ("batch: {reclaim: Never}", "batch: {reclaim: Never, weight: 3}", False),
    ],
)
def test_preemption_policy_changes_by_risk(tmp_path, capsys, before, after, exposed):
    doc = _json(tmp_path, capsys, SMALL.replace(before, after))
    assert doc["queues"]["tiers"], doc["queues"]
    assert (_risks(doc).get("preemptionExposed") is not None) == exposed, doc["queues"]["tiers"]
    assert doc["verdict"] == ("risky" if exposed else "routine")


def test_cohort_membership_change_and_new_cohort(tmp_path, capsys):
    head = SMALL.replace("queueing:\n", "queueing:\n  cohorts:\n    - {name: research, tenants: [train]}\n")
    code, out, err = _diff(tmp_path, capsys, head)
    assert code == 0, err
    assert "+ cohort research added (parent test)" in out
    assert "~ train: cohort test → cohort research" in out
    doc = _json(tmp_path, capsys, head)
    assert doc["verdict"] == "routine"
    train = next(q for q in doc["queues"]["tenants"] if q["tenant"] == "train")
    assert (train["cohortBefore"], train["cohortAfter"]) == ("test", "research")


def test_new_and_removed_queues_follow_the_tenants(tmp_path, capsys):
    head = SMALL.replace(
        "  - {name: gone, tier: batch, owners: [c], offboarded: true}\n",
        "  - {name: fresh, tier: batch, owners: [d], gpus: {nvidia.com/mig-1g.5gb: 2}}\n",
    )
    doc = _json(tmp_path, capsys, head)
    kinds = {q["tenant"]: q["kind"] for q in doc["queues"]["tenants"]}
    assert kinds["fresh"] == "added" and kinds["gone"] == "removed"
    code, out, _ = _diff(tmp_path, capsys, head)
    assert "+ fresh: new ClusterQueue and LocalQueue (cohort test): mig nvidia.com/mig-1g.5gb nominal 2" in out
    assert "- gone: ClusterQueue and LocalQueue deleted with the tenant" in out


def test_flavor_totals_are_the_plans(tmp_path, capsys):
    """Per flavor, the figures `gpupool plan` shows before and after (queues.flavor_lines, one function)."""
    from gpupool.analysis import plan as planmod
    from gpupool.rules.engine import load_valid_spec

    head_text = SMALL.replace("inference: {lendingLimit: 0}", "inference: {}")
    doc = _json(tmp_path, capsys, head_text)
    flavors = {(f["flavor"], f["resource"]): f for f in doc["queues"]["flavors"]}
    for text, side in ((SMALL, "Before"), (head_text, "After")):
        plan = planmod.compute(load_valid_spec(_write(tmp_path, "p", text)))
        for line in plan.queues:
            f = flavors.get((line.flavor, line.resource))
            if f is not None:
                assert (f["nominal" + side], f["lendable" + side], f["borrowable" + side]) == (
                    line.nominal,
                    line.lendable,
                    line.borrowable,
                )
    assert flavors[("whole", "nvidia.com/gpu")]["lendableBefore"] == 2  # train's 2; serve lent nothing
    assert flavors[("whole", "nvidia.com/gpu")]["lendableAfter"] == 4


def test_the_figures_are_the_ones_the_cluster_queues_are_rendered_with(tmp_path):
    """One function computes each figure: every after-value of the diff is what HEAD's ClusterQueue says."""
    from gpupool.rules.engine import load_valid_spec

    base = load_valid_spec(_write(tmp_path, "b", SMALL))
    head = load_valid_spec(
        _write(tmp_path, "h", SMALL.replace("nvidia.com/mig-1g.5gb: 3}", "nvidia.com/mig-1g.5gb: 5}"))
    )
    d = qd.compute(base, head)
    rendered = {
        (o.manifest["metadata"]["name"], f["name"], r["name"]): r
        for o in manifests.build(head).objects
        if o.kind == "ClusterQueue"
        for g in o.manifest["spec"]["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }
    lines = [(q.tenant, x) for q in d.tenants for x in q.quotas]
    assert lines, d
    for tenant, x in lines:
        assert rendered[(tenant, x.flavor, x.resource)]["nominalQuota"] == x.nominal_after


def test_an_invalid_queueing_block_is_not_queueing_turned_off(tmp_path, capsys):
    head = SMALL.replace("batch: {reclaim: Never}", "batch: {reclaim: Sometimes}")
    code, out, err = _diff(tmp_path, capsys, head)
    assert code == 1
    assert "queueing turned off" not in out and "turns Kueue queueing off" not in out
    assert "the queueing block is invalid in HEAD: compared as BASE has it" in out


def test_queues_section_in_the_comment(tmp_path, capsys):
    head = SMALL.replace("inference: {lendingLimit: 0}", "inference: {}").replace(
        "nvidia.com/gpu: 2, nvidia.com/mig-1g.5gb: 3}", "nvidia.com/gpu: 1, nvidia.com/mig-1g.5gb: 3}"
    )
    code, md, err = _diff(tmp_path, capsys, head, SMALL, "-o", "markdown")
    assert code == 0, err
    assert md.split("\n")[4].startswith(
        "**⚠ HEAD applies, but it reduces the guaranteed Kueue quota of 1 tenant; exposes the workloads of 1 tier "
        "to more preemption.**"
    )
    box = md.split("> [!WARNING]\n")[1].split("\n\n")[0]
    assert "guaranteed (nominal) Kueue quota shrinks" in box and "serve (whole nvidia.com/gpu 2 → 1)" in box
    assert "inference (lendingLimit 0 → none)" in box
    section = md.split("<summary>Queues (Kueue): ")[1].split("</details>")[0]
    assert section == (
        "2 changed, 1 tier or cohort policy change</summary>\n\n"
        "|  | QUEUE CHANGE |\n|---|---|\n"
        "| ⚠ | tier inference: lendingLimit 0 → none — its tenants now lend more of their idle nominal quota: when "
        "they need it back, the borrowers must be preempted first, so their workloads wait for that (it lent "
        "nothing before: its guaranteed capacity was always free) |\n"
        "| ⚠ | serve: whole nvidia.com/gpu nominal 2 → 1 (-1), lendable 0 → 1; mig nvidia.com/mig-1g.5gb lendable "
        "0 → 3; most admitted (its ResourceQuota) nvidia.com/gpu 4 → 3; ⚠ guaranteed quota shrinks: what it "
        "runs above it counts as borrowed, preemptible on reclaim |\n"
        "| ~ | flavor whole nvidia.com/gpu: nominal 4 → 3, lendable 2 → 3, borrowable 2 → 3 |\n"
        "| ~ | flavor mig nvidia.com/mig-1g.5gb: lendable 0 → 3, borrowable 0 → 3 |\n"
        "| ~ | train: most admitted (its ResourceQuota) nvidia.com/gpu 2 → 3, nvidia.com/mig-1g.5gb 0 → 3 |\n"
        # issue 35: the PR comment states each tenant's ceiling outside Kueue (0: the queue policy)
        "| ~ | ceiling outside Kueue: 0 GPUs for every tenant (2): the queue policy refuses GPU pods Kueue does "
        "not hold |\n\n"
    )
    # risky rows first (kept longest when cut); after the headroom, before the rendered objects
    assert md.index("<summary>Headroom") < md.index("<summary>Queues") < md.index("<summary>Rendered objects")


def test_no_queueing_on_either_side_is_no_queue_change():
    d = dm.SpecDiff()
    assert d.queues.empty and d.empty and d.alerts() == []
