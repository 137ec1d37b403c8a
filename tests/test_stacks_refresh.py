"""Drift is seen and repaired (issue 41 item 4): `gpupool stacks up` refreshes (`pulumi up --refresh`: the
cluster read back into the state first) and its convergence check is a refreshing `preview
--expect-no-changes`, so "converged" means the cluster matches the spec; `--no-refresh` skips both reads and
the summary then says the cluster was not read. A preview refreshes only when asked (`--refresh`, what CI's
pull-request preview passes). The fake stacks of tests/test_stacks_platform.py record the Automation API
calls; tests/e2e/test_team_repository.py deletes a namespace behind gpupool's back on a real cluster."""

from __future__ import annotations

import pytest

pytest.importorskip("pulumi")

from pulumi import automation as auto  # noqa: E402

from gpupool.cli.main import build_parser  # noqa: E402
from gpupool.deploy import pulumi_messages, stacks  # noqa: E402
from tests.test_stacks_platform import FakeStack, World, _failed, _platform, project  # noqa: E402,F401


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, str, dict]]:
    """Every preview/up/destroy with the keyword arguments it was given."""
    seen: list[tuple[str, str, dict]] = []
    for op in ("preview", "up", "destroy"):
        original = getattr(FakeStack, op)

        def record(self, _op=op, _original=original, **kw):
            seen.append((_op, self.name, kw))
            if _op == "preview" and kw.get("expect_no_changes") and self.w.fail.get("converge"):
                raise auto.CommandError(self.w.fail["converge"])
            return _original(self, **kw)

        monkeypatch.setattr(FakeStack, op, record)
    return seen


def test_up_refreshes_and_converged_means_the_cluster_was_read(project, tmp_path, calls):
    world = World({"dev": []})
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    # the cluster is read into the state first (a pulumi refresh, clearing a dead run's pending creates), then
    # the up and its check plan against that state
    ((stack, how, kw),) = world.refreshes
    assert (stack, how) == ("dev", "refresh")
    assert kw["clear_pending_creates"] is True
    # the rollout's cordon and uncordon patches are not read (gpupool.k8s.rollout.REFRESH_EXCLUDE): their
    # refreshed inputs lost `spec.unschedulable`, and the next re-layout never cordoned (e2e test_mig_interrupt)
    assert kw["exclude"] == ["**$kubernetes:core/v1:NodePatch::*_*cordon"]
    assert [op for op, _, _ in calls] == ["up", "preview"]
    assert all("refresh" not in kw for _, _, kw in calls)
    (check,) = [kw for op, _, kw in calls if op == "preview"]
    assert check["expect_no_changes"] is True
    assert stacks.summary(p.outcomes) == "dev: up succeeded (1 update; converged)\n"


def test_no_refresh_reads_nothing_and_does_not_claim_converged(project, tmp_path, calls):
    world = World({"dev": []})
    p, _ = _platform(project, world, tmp_path, refresh=False)
    p.run("up")
    assert world.refreshes == []
    line = stacks.summary(p.outcomes)
    assert "converged" not in line
    assert line == "dev: up succeeded (1 update; matches the state; the cluster was not read (--no-refresh))\n"


@pytest.mark.parametrize("refresh,want", [(None, False), (True, True), (False, False)])
def test_a_preview_refreshes_when_asked(project, tmp_path, calls, refresh, want):
    world = World({"dev": []})
    out = tmp_path / "preview.txt"
    p, _ = _platform(project, world, tmp_path, refresh=refresh, preview_out=out)
    p.run("preview")
    (kw,) = [kw for op, _, kw in calls if op == "preview"]
    assert not kw.get("expect_no_changes")
    # asked: the drift, read without writing the state, then the plan; the --preview-out file has both
    assert [(s, how) for s, how, _ in world.refreshes] == ([("dev", "preview_refresh")] if want else [])
    text = out.read_text()
    assert ("drift of dev" in text) is want and "preview of dev" in text
    if want:
        assert text.index("drift of dev") < text.index("preview of dev")
    drift = "; drift: 1 object differs in the cluster" if want else ""
    assert stacks.summary(p.outcomes) == f"dev: preview succeeded (no changes{drift})\n"


def test_destroy_does_not_refresh_by_default(project, tmp_path, calls):
    world = World({"dev": []})
    p, _ = _platform(project, world, tmp_path)
    p.run("destroy")
    assert [kw["refresh"] for op, _, kw in calls if op == "destroy"] == [False]


def test_an_up_that_does_not_converge_fails_and_says_so(project, tmp_path, calls):
    world = World({"dev": []})
    world.fail["converge"] = _failed("error: no changes were expected but changes were proposed")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError, match="did not converge"):
        p.run("up")
    (o,) = p.outcomes
    assert o.result == "failed" and "converged" not in o.line().replace("did not converge", "")
    assert "gpupool stacks preview dev --refresh" in o.note


@pytest.mark.parametrize("argv,want", [([], None), (["--refresh"], True), (["--no-refresh"], False)])
def test_the_flag(argv, want):
    args = build_parser().parse_args(["stacks", "up", "dev", *argv])
    assert args.refresh is want


@pytest.mark.parametrize("which", ["project", "scaffold"])
def test_the_pull_request_preview_refreshes_and_the_deploy_keeps_the_default(which):
    import yaml

    from gpupool import scaffold
    from tests.test_workflow import WORKFLOW

    text = (
        WORKFLOW.read_text() if which == "project" else scaffold.files("t", "0", "dev")[".github/workflows/gpupool.yml"]
    )
    jobs = yaml.safe_load(text)["jobs"]
    (preview,) = [s["run"] for s in jobs["plan"]["steps"] if "gpupool stacks preview" in s.get("run", "")]
    assert "--refresh" in preview.split("#")[0]
    (up,) = [s["run"] for s in jobs["up"]["steps"] if "gpupool stacks up" in s.get("run", "")]
    assert "--no-refresh" not in up


def test_a_convergence_check_that_cannot_run_is_not_called_drift(project, tmp_path, calls):
    world = World({"dev": []})
    world.fail["converge"] = _failed("error: Program failed with an unhandled exception:\nTraceback ...")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError, match="convergence check .* failed to run"):
        p.run("up")
    (o,) = p.outcomes
    assert o.result == "failed" and "did not converge" not in o.note and "unhandled exception" in o.note


def test_an_up_that_does_not_converge_names_what_the_check_still_plans(project, tmp_path, monkeypatch):
    """The check's preview events name its planned steps (never `same`, a read or the stack): the error lists
    the first five and counts the rest, so a CI log says what did not converge without a second preview."""
    from types import SimpleNamespace

    def event(op: str, typ: str, name: str):
        meta = SimpleNamespace(op=SimpleNamespace(value=op), type=typ, urn=f"urn:pulumi:dev::gpupool::{typ}::{name}")
        return SimpleNamespace(resource_pre_event=SimpleNamespace(metadata=meta))

    def preview(self, **kw):
        if not kw.get("expect_no_changes"):
            return SimpleNamespace(stdout="", change_summary={})
        kw["on_event"](SimpleNamespace(resource_pre_event=None))
        kw["on_event"](event("same", "kubernetes:core/v1:Namespace", "gpupool-tenant-a-ns"))
        kw["on_event"](event("same", "pulumi:pulumi:Stack", "gpupool-dev"))
        kw["on_event"](event("update", "kubernetes:core/v1:ConfigMap", "gpupool-mig-config"))
        for i in range(6):
            kw["on_event"](event("create", "kubernetes:core/v1:NodePatch", f"gpupool-pool-a.n{i}"))
        raise auto.CommandError(_failed("error: no changes were expected but changes were proposed"))

    monkeypatch.setattr(FakeStack, "preview", preview)
    world = World({"dev": []})
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError, match="did not converge"):
        p.run("up")
    (o,) = p.outcomes
    assert (
        "(update kubernetes:core/v1:ConfigMap gpupool-mig-config; create kubernetes:core/v1:NodePatch "
        "gpupool-pool-a.n0; create kubernetes:core/v1:NodePatch gpupool-pool-a.n1; create "
        "kubernetes:core/v1:NodePatch gpupool-pool-a.n2; create kubernetes:core/v1:NodePatch gpupool-pool-a.n3; "
        "and 2 more)" in o.note
    ), o.note
    assert "Namespace" not in o.note and "pulumi:pulumi:Stack" not in o.note


# What pulumi printed for a refreshed preview whose plan updates an object deleted from the cluster
# (bench/first_hour.py, step 22: the tenant's namespace deleted by hand and its quota changed in the same spec).
GONE_STDOUT = (
    "Previewing update (dev):\n"
    '    error: Preview failed: update of resource "urn:pulumi:dev::team-gpu::gpupool:index:GpuPlatform$'
    'gpupool:tenancy:Tenant$kubernetes:core/v1:ResourceQuota::gpu-tenant-team-a-gpu-quota" failed: '
    'resourcequotas "gpu-quota" not found\n'
)
GONE_STDERR = "error: Resource monitor has terminated, shutting down\n"


def test_a_refreshed_preview_whose_plan_meets_an_object_gone_names_it_and_says_what_to_do(
    project, tmp_path, monkeypatch
):
    """The plan runs against the state, which still holds what the drift read found gone; previewing an update of
    such an object fails (not found). The failure names the object (pulumi's error from stdout, not the resource
    monitor's shutdown line) and says that the drift explains it and the next up recreates it; the drift still
    reaches --preview-out."""
    world = World({"dev": []})
    out = tmp_path / "preview.txt"
    p, _ = _platform(project, world, tmp_path, refresh=True, preview_out=out)

    def failing(self, **kw):
        raise auto.CommandError(_failed(GONE_STDERR, stdout=GONE_STDOUT))

    monkeypatch.setattr(FakeStack, "preview", failing)
    with pytest.raises(stacks.StackError) as err:
        p.run("preview")
    message = str(err.value)
    assert 'resourcequotas "gpu-quota" not found' in message and "Resource monitor" not in message, message
    assert "found 1 object gone from the cluster" in message and "`gpupool stacks up dev`" in message, message
    text = out.read_text()
    assert "drift of dev" in text and "The plan could not be computed" in text, text


def test_the_reason_skips_the_resource_monitors_shutdown_line():
    exc = auto.CommandError(_failed(GONE_STDERR, stdout=GONE_STDOUT))
    said = pulumi_messages.reason(exc, "preview")
    assert said.startswith("error: Preview failed: update of resource") and "Resource monitor" not in said
    only = auto.CommandError(_failed(GONE_STDERR))
    assert pulumi_messages.reason(only, "preview") == "error: Resource monitor has terminated, shutting down"
