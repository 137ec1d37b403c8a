"""gpupool diff puts risk first: a three-class verdict (✗ cannot apply, ⚠ applies but destroys, evicts,
escalates or moves stacks, ✓ routine) and an always-visible alert box, and it says nothing false about
removals, MIG node additions or an invalid HEAD. One test per defect of the review."""

from __future__ import annotations

import json

from tests.test_diff import POOLS, TENANTS, base, run, stack, with_tenants  # noqa: F401 (base: fixture)


def _md(capsys, *argv):
    code, md, err = run(capsys, *argv, "-o", "markdown")
    verdict = md.split("\n\n")[2]  # after the title and the labels
    alerts = md.split("> [!WARNING]\n")[1].split("\n\n")[0] if "> [!WARNING]" in md else ""
    return code, md, verdict, alerts


def test_owner_role_escalation_is_a_tenant_change_and_an_alert(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], ownerRole="admin")))
    code, md, verdict, alerts = _md(capsys, base, head)
    assert code == 0
    assert verdict.startswith("**⚠ HEAD applies, but it escalates the access of 1 tenant.**")
    assert "Plan: 1 tenant to change · 1 object to change" in verdict
    assert "**owners or ownerRole change:** 1 — notebooks (ownerRole edit → admin)" in alerts
    assert "REPLACED (renamed: deleted and created)" in md  # the RoleBinding's name carries the role
    doc = json.loads(run(capsys, base, head, "-o", "json")[1])
    assert doc["verdict"] == "risky" and doc["summary"]["tenantsChanged"] == 1
    assert [(a["risk"], a["names"]) for a in doc["alerts"]] == [("accessChanged", ["notebooks"])]
    t = doc["tenants"][0]
    assert (t["ownerRoleBefore"], t["ownerRole"]) == ("edit", "admin")


def test_owner_added_is_an_alert_and_removed_one_too(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], owners=["ds", "ml"])))
    _, _, verdict, alerts = _md(capsys, base, head)
    assert "escalates the access of 1 tenant" in verdict and "notebooks (owners +ml)" in alerts
    head = stack(tmp_path / "h2", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], owners=["ml"])))
    _, _, verdict, alerts = _md(capsys, base, head)
    assert "escalates the access of 1 tenant" in verdict and "owners +ml, -ds" in alerts  # ml is new
    head = stack(tmp_path / "h3", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], ownerRole="view")))
    _, _, verdict, alerts = _md(capsys, base, head)
    assert "changes the access of 1 tenant" in verdict and "notebooks (ownerRole edit → view)" in alerts


def test_namespace_deletion_is_not_a_check_mark(base, tmp_path, capsys):
    mid = stack(tmp_path / "mid", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], offboarded=True)))
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    code, md, verdict, alerts = _md(capsys, mid, head)
    assert code == 0 and "✓" not in verdict
    assert "DELETES 1 namespace" in verdict
    assert "**namespace deleted with everything in it:** 1 — notebooks" in alerts


def test_offboarding_says_it_removes_deletion_protection(base, tmp_path, capsys):
    mid = stack(tmp_path / "mid", tenants=with_tenants(notebooks=dict(TENANTS["notebooks"], offboarded=True)))
    code, md, verdict, alerts = _md(capsys, base, mid)
    assert "removes the deletion protection of 1 namespace" in verdict
    assert "deletion protection removed" in alerts and "notebooks" in alerts
    # no object is listed as "changed ... :" with nothing after the colon
    objects = [line for line in md.splitlines() if line.startswith("- **changed** `tenant-notebooks")]
    assert objects and all("(gpupool) retainOnDelete" in line for line in objects)
    assert not [line for line in md.splitlines() if line.rstrip().endswith("):")]


def test_removal_without_offboarding_keeps_its_quota_in_headroom(tmp_path, capsys):
    """The retained quota still admits pods: HEAD's headroom must not count it as free (it said 2 → 10)."""
    tenants = with_tenants(notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8}))
    tenants["vision"] = {"name": "vision", "tier": "standard", "owners": ["cv"], "gpus": {"nvidia.com/gpu.shared": 6}}
    b = stack(tmp_path / "b", tenants=tenants)
    h = stack(tmp_path / "h", tenants={k: v for k, v in tenants.items() if k != "notebooks"})
    doc = json.loads(run(capsys, b, h, "-o", "json")[1])
    shared = next(x for x in doc["headroom"] if x["resource"] == "nvidia.com/gpu.shared")
    assert (shared["headroomBefore"], shared["headroomAfter"], shared["retainedAfter"]) == (2, 2, 8)
    code, md, verdict, alerts = _md(capsys, b, h)
    assert "nothing limits" not in md
    assert "Its quotas stay in force" in md and "its owners lose their access" in md
    assert "leaves 1 namespace unmanaged" in verdict and "namespace retained, unmanaged:** 1 — notebooks" in alerts


def test_removal_over_a_retained_quota_is_negative_headroom(tmp_path, capsys):
    """Removing a tenant and granting its share to another: the retained quota makes the total too much."""
    tenants = with_tenants(notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8}))
    b = stack(tmp_path / "b", tenants=tenants)
    head_tenants = with_tenants(notebooks=None)
    head_tenants["vision"] = {
        "name": "vision",
        "tier": "standard",
        "owners": ["cv"],
        "gpus": {"nvidia.com/gpu.shared": 16},
    }
    h = stack(tmp_path / "h", tenants=head_tenants)
    code, md, verdict, _ = _md(capsys, b, h)
    assert code == 1 and verdict.startswith("**✗ HEAD leaves negative headroom (nvidia.com/gpu.shared)")
    assert "8 → 24 (incl. 8 retained)" in md and "8 → -8 ⚠ OVER" in md


def test_node_joining_a_mig_pool_evicts_nothing(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], nodes=["gpu-a100-1", "gpu-a100-2", "gpu-a100-3"])
    head = stack(tmp_path / "head", pools=pools)
    code, md, verdict, alerts = _md(capsys, base, head)
    assert code == 0
    assert "EVICTS" not in md and "REBOOT" not in md and "re-laid out" not in verdict
    assert "· 1 node joining ·" in verdict and verdict.startswith("**✓")
    assert "**added** pool a100-mig: gpu-a100-3 join (no workloads yet) (MIG layout all-balanced" in md
    doc = json.loads(run(capsys, base, head, "-o", "json")[1])
    assert doc["summary"]["poolsRelaidOut"] == 0 and doc["summary"]["nodesJoining"] == 1


def test_node_removal_is_in_pools_and_alerts(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], nodes=["gpu-a100-1"])
    tenants = with_tenants(inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 2}))
    b = stack(tmp_path / "b", tenants=tenants)
    head = stack(tmp_path / "head", pools=pools, tenants=tenants)
    code, md, verdict, alerts = _md(capsys, b, head)
    assert code == 0, md
    assert "removes 1 node" in verdict and "**nodes leave the platform:** 1 — gpu-a100-2" in alerts
    assert "**removed** pool a100-mig: gpu-a100-2 leave the platform" in md


def test_mig_relayout_names_tenants_tiers_and_worst_case(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"3g.40gb": 2}}})
    tenants = with_tenants(
        notebooks=dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 8}),
        inference=dict(TENANTS["inference"], gpus={"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-1g.10gb": 20}),
    )
    head = stack(tmp_path / "head", pools=pools, tenants=tenants)
    code, md, verdict, alerts = _md(capsys, base, head)
    assert "evicts GPU workloads on 2 nodes" in verdict
    assert "affected: 2 tenants (inference, notebooks), tiers production, standard" in alerts
    assert "worst case 2 × (2 × 1,800 s + 300 s) = 2.2 h" in md, md
    assert "**  rollout" not in md and "- **  " not in md  # no literal ** around the detail lines


def test_onboarding_shows_owners_role_and_foreign_service_account(base, tmp_path, capsys):
    new = {
        "name": "vision",
        "tier": "standard",
        "owners": ["cv", "serviceaccount:ci:deployer"],
        "ownerRole": "admin",
        "gpus": {"nvidia.com/gpu.shared": 4},
    }
    head = stack(tmp_path / "head", tenants=with_tenants(vision=new))
    code, md, verdict, alerts = _md(capsys, base, head)
    assert code == 0
    assert "owners cv, serviceaccount:ci:deployer (role admin)" in md
    assert "ServiceAccount of another namespace: ci/deployer" in md
    assert "binds ServiceAccounts of other namespaces in 1 tenant" in verdict
    plain = {"name": "vision", "tier": "standard", "owners": ["cv"], "gpus": {"nvidia.com/gpu.shared": 4}}
    head = stack(tmp_path / "h2", tenants=with_tenants(vision=plain))
    _, md, verdict, alerts = _md(capsys, base, head)
    assert verdict.startswith("**✓ HEAD is valid") and alerts == "" and "owners cv (role edit)" in md


def test_shard_move_is_an_alert(base, tmp_path, capsys):
    import yaml

    head = stack(tmp_path / "head")
    spec = yaml.safe_load(head.read_text())
    spec["sharding"] = {"tenantShards": 2}
    head.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, md, verdict, alerts = _md(capsys, base, head)
    assert code == 0, md
    assert "between Pulumi stacks" in verdict and "**tenants move between Pulumi stacks:** 2" in alerts


def test_invalid_head_never_says_no_changes(base, tmp_path, capsys):
    pools = [dict(p) for p in POOLS]
    pools[1] = dict(pools[1], sharing={"mig": {"layout": {"7g.80gb": 2}}})  # does not fit: the pool is invalid
    head = stack(tmp_path / "head", pools=pools)
    code, md, verdict, _ = _md(capsys, base, head)
    assert code == 1
    assert "No changes." not in md and "0 pools re-laid out" not in md
    assert "1 pool not compared" in verdict and "HEAD's errors may hide changes" in md
    assert "until this error is fixed" in md or "errors are fixed" in md


def test_complete_head_is_not_said_to_be_compared_as_base(base, tmp_path, capsys):
    """Over capacity: HEAD is invalid but read completely, so no "compared as BASE has it" sentence."""
    t = dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 20, "nvidia.com/mig-1g.10gb": 8})
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=t))
    code, md, _, _ = _md(capsys, base, head)
    assert code == 1 and "compared as BASE has it" not in md


def test_heading_names_stack_commit_and_artifact(base, tmp_path, capsys):
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=None))
    url = "https://github.com/o/r/actions/runs/42"
    code, md, _ = run(
        capsys, base, head, "-o", "markdown", "--stack", "prod", "--commit", "0123456789abcdef", "--artifact-url", url
    )
    first = md.split("\n\n")[0:2]
    assert first[0] == "## gpupool diff · stack `prod` · commit `0123456789ab`"
    assert f"[full diff: artifact `gpupool-diff-prod` of this run]({url})" in first[1]
    code, md, _ = run(capsys, base, head, "-o", "markdown", "--artifact-url", "javascript:alert(1)")
    assert "javascript" not in md  # only https links
    # A credential in the URL's userinfo is never published in the comment (everyone can read it).
    from gpupool import redact

    redact.forget_all()  # the first line of defence: not linked at all, not merely scrubbed on the way out
    secret = "CANARY-artifact-4d1f9a"
    code, md, _ = run(capsys, base, head, "-o", "markdown", "--artifact-url", f"https://x:{secret}@github.com/o/r/1")
    assert secret not in md and "full diff" not in md


def test_routine_change_is_a_check_mark_with_only_nonzero_counts(base, tmp_path, capsys):
    t = dict(TENANTS["notebooks"], gpus={"nvidia.com/gpu.shared": 12, "nvidia.com/mig-1g.10gb": 8})
    head = stack(tmp_path / "head", tenants=with_tenants(notebooks=t))
    code, md, verdict, alerts = _md(capsys, base, head)
    assert verdict.startswith(
        "**✓ HEAD is valid, every resource keeps non-negative headroom, and the change is routine.**"
    )
    assert "Plan: 1 tenant to change · 1 object to change · headroom changes on 1 resource" in verdict
    assert " 0 " not in verdict and alerts == ""
    assert "| RESOURCE | CAPACITY | ALLOWED | GRANTED | HEADROOM |" in md
