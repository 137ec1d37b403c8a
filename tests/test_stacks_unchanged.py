"""`gpupool stacks preview|up` skips a stack whose inputs are unchanged since its last successful up
(gpupool/deploy/unchanged.py, gpupool/deploy/stack_inputs.py): the decision as a pure function, then the
runner over tests/test_stacks_platform.py's fake stacks and backend (tags included). What must hold: the
record is written only after an up and its convergence check succeeded, and removed before every up and
destroy, so a failed run never leaves one that matches; a move, pending operations, kept MIG configs or an
update by hand make a stack run; --all runs every stack; destroy never skips."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("pulumi")

from pulumi import automation as auto  # noqa: E402

from gpupool.analysis import shard_moves  # noqa: E402
from gpupool.deploy import stack_inputs, stacks, unchanged  # noqa: E402
from gpupool.k8s.mig_in_use import ANNOTATION_KEPT  # noqa: E402
from gpupool.model import sharding  # noqa: E402
from tests.test_stacks_platform import (  # noqa: E402
    SPEC,
    TENANTS,
    FakeStack,
    World,
    _failed,
    _ops,
    _platform,
    _shard,
    project,  # noqa: F401
)

INPUTS = "sha256:" + "1" * 64
OTHER = "sha256:" + "2" * 64


# ---------------------------------------------------------------- the decision, a pure function


def _why(run=None, *, exists=True, inputs=INPUTS, tag=f"{INPUTS}@t1", last_update="t1", state=None):
    read: list[str] = []

    def recorded():
        read.append("tag")
        return unchanged.parse(tag)

    def exported():
        read.append("state")
        return state or {"resources": []}

    why = unchanged.why_run(
        exists=exists, run=run, inputs=inputs, recorded=recorded, last_update=last_update, state=exported
    )
    return why, read


def _run(held=("a",), assigned=("a",), leaving=(), arriving=()):
    role = sharding.Role(platform=False, shard=0)
    return shard_moves.StackRun("dev.tenants-0", role, assigned, held, True, leaving, arriving)


def test_unchanged_inputs_and_nothing_else_skip():
    assert _why() == (None, ["tag", "state"])
    assert _why(_run())[0] is None


@pytest.mark.parametrize(
    "case, expected",
    [
        (dict(exists=False), "does not exist"),
        (dict(run=_run(held=(), arriving=("a",))), "its tenants change (1 arriving, new or from another stack; 0 "),
        (dict(run=_run(held=("a", "b"), leaving=("b",))), "; 1 leaving for another stack; 0 removed from the spec)"),
        (dict(run=_run(held=("a", "z"), assigned=("a",))), "; 0 leaving for another stack; 1 removed from the spec)"),
        (dict(inputs=None), "cannot be computed"),
        (dict(tag=None), "no successful up recorded"),
        (dict(tag="sha256:1"), "no successful up recorded"),  # not a value gpupool wrote
        (dict(tag=f"{OTHER}@t1"), "inputs changed since its last successful up (sha256:222222222222 -> "),
        (dict(last_update="t2"), "updated since its last successful `gpupool stacks up`"),
        (dict(last_update=None), "updated since"),
        (dict(state={"resources": [], "pending_operations": [{"type": "creating"}]}), "pending operations"),
    ],
)
def test_each_condition_makes_the_stack_run(case, expected):
    run = case.pop("run", None)
    why, _ = _why(run, **case)
    assert why is not None and expected in why, why


def test_kept_mig_configs_make_the_platform_stack_run():
    configmap = {"outputs": {"metadata": {"annotations": {ANNOTATION_KEPT: "all-1g.10gb"}}}}
    why, _ = _why(state={"resources": [{"urn": "u"}, configmap]})
    assert why is not None and "re-layout" in why


def test_the_tag_and_the_state_are_read_only_when_cheaper_conditions_hold():
    assert _why(exists=False)[1] == []
    assert _why(_run(held=()))[1] == []
    assert _why(tag=f"{OTHER}@t1")[1] == ["tag"]


def test_a_record_round_trips_through_its_tag_value():
    record = unchanged.Record(INPUTS, "2026-12-05T12:57:08.693000")
    assert unchanged.parse(record.value()) == record
    assert unchanged.parse(None) is None and unchanged.parse("") is None


# ---------------------------------------------------------------- the runner


def _holdings(shards: int) -> dict[str, list[str]]:
    """The states a converged sharded platform has: each shard stack holding what the spec assigns it."""
    out: dict[str, list[str]] = {"dev": []}
    for k, names in sharding.assignment(TENANTS, shards).items():
        out[sharding.shard_stack("dev", k)] = names
    return out


def _converged_platform(project, tmp_path):
    """A sharded platform after one successful `gpupool stacks up`: every stack ran and recorded."""
    _shard(project, 2)
    world = World(_holdings(2))
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert [o.result for o in p.outcomes] == ["succeeded"] * 3, stacks.summary(p.outcomes)
    assert all(unchanged.parse(world.tags[s].get(stack_inputs.TAG)) for s in world.states), world.tags
    world.calls.clear()
    world.tag_calls.clear()
    return world


def test_a_second_up_with_nothing_changed_runs_nothing(project, tmp_path):
    world = _converged_platform(project, tmp_path)
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert not _ops(world, "up") and not _ops(world, "preview")
    assert [(o.stack, o.result) for o in p.outcomes] == [(s, "skipped") for s in world.states]
    line = stacks.summary(p.outcomes).splitlines()[0]
    assert line.startswith("dev: up skipped (unchanged since its last successful up (inputs sha256:")
    assert line.endswith("); --all runs it)")
    doc = json.loads(stacks.as_json(p.outcomes))
    assert doc[0]["result"] == "skipped" and doc[0]["note"].startswith("unchanged since its last successful up")


def test_a_tenant_s_edit_runs_its_shard_only(project, tmp_path):
    world = _converged_platform(project, tmp_path)
    home = sharding.shard_stack("dev", sharding.shard_of("research", 2))
    tenant = project / "dev" / "tenants" / "research.yaml"
    tenant.write_text(tenant.read_text().replace("research-students", "research-interns"))
    p, logs = _platform(project, world, tmp_path)
    p.run("up")
    assert _ops(world, "up") == [(home, None)]
    assert {o.stack: o.result for o in p.outcomes} == {
        s: ("succeeded" if s == home else "skipped") for s in world.states
    }
    assert any(line.startswith(f"{home}: runs: its inputs changed since its last successful up") for line in logs)
    # and a preview of the same edit, before its up, previews that shard only
    tenant.write_text(tenant.read_text().replace("research-interns", "research-guests"))
    world.calls.clear()
    comment = tmp_path / "preview.txt"
    p, _ = _platform(project, world, tmp_path, preview_out=comment)
    p.run("preview")
    assert [c[1] for c in world.calls if c[0] == "preview"] == [home]
    others = sorted(set(world.states) - {home})
    assert sorted(ln.split(":")[0] for ln in comment.read_text().splitlines() if " preview skipped (" in ln) == others
    assert f"preview of {home}\n" in comment.read_text()


def test_all_runs_every_stack_and_records_them(project, tmp_path):
    world = _converged_platform(project, tmp_path)
    p, _ = _platform(project, world, tmp_path, all_stacks=True)
    p.run("up")
    assert sorted(s for s, _ in _ops(world, "up")) == sorted(world.states)
    assert ("remove_tag", "dev") in world.tag_calls and ("set_tag", "dev") in world.tag_calls
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert [o.result for o in p.outcomes] == ["skipped"] * 3


def test_a_failed_up_leaves_no_record_so_the_next_run_runs_it(project, tmp_path, monkeypatch):
    world = _converged_platform(project, tmp_path)
    seen: list[bool] = []  # was the stack's record still there when its up started? (a kill then keeps it)
    up = FakeStack.up

    def watched_up(self, **kw):
        seen.append(stack_inputs.TAG in world.tags.get(self.name, {}))
        return up(self, **kw)

    monkeypatch.setattr(FakeStack, "up", watched_up)
    tenant = project / "dev" / "tenants" / "research.yaml"
    tenant.write_text(tenant.read_text().replace("research-students", "research-interns"))
    home = sharding.shard_stack("dev", sharding.shard_of("research", 2))
    world.fail[home] = _failed("error: update failed")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError):
        p.run("up")
    assert stack_inputs.TAG not in world.tags[home] and seen == [False]
    # the edit is reverted: the inputs equal the old record again, which is gone, so the shard still runs
    tenant.write_text(tenant.read_text().replace("research-interns", "research-students"))
    del world.fail[home]
    world.calls.clear()
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert _ops(world, "up") == [(home, None)]


def test_an_up_that_does_not_converge_records_nothing(project, tmp_path, monkeypatch):
    world = _converged_platform(project, tmp_path)
    tenant = project / "dev" / "tenants" / "research.yaml"
    tenant.write_text(tenant.read_text().replace("research-students", "research-interns"))
    home = sharding.shard_stack("dev", sharding.shard_of("research", 2))
    preview = FakeStack.preview

    def diverging(self, **kw):
        if kw.get("expect_no_changes"):
            raise auto.CommandError(_failed("error: no changes were expected but changes were proposed"))
        return preview(self, **kw)

    monkeypatch.setattr(FakeStack, "preview", diverging)
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError, match="did not converge"):
        p.run("up")
    assert _ops(world, "up") == [(home, None)] and stack_inputs.TAG not in world.tags[home]


def test_an_update_by_hand_pending_operations_or_a_move_make_a_stack_run(project, tmp_path):
    world = _converged_platform(project, tmp_path)
    world.updated["dev"] += 1  # `pulumi refresh` by hand
    # A `pulumi up` by hand killed mid-way: its checkpoint holds a pending create, and on a file backend every
    # checkpoint moves the listed last update (gpupool/deploy/records.py cites the engine's lines).
    world.states["dev.tenants-0"]["pending_operations"] = [{"resource": {"urn": "urn:x"}, "type": "creating"}]
    world.updated["dev.tenants-0"] += 1
    p, logs = _platform(project, world, tmp_path)
    p.run("up")
    assert sorted(s for s, _ in _ops(world, "up")) == ["dev", "dev.tenants-0"]
    assert any("dev: runs: it was updated since" in line for line in logs), logs
    # 2 -> 3 shards: the tenants that move make both their stacks run, whatever their records say
    world.calls.clear()
    spec = project / SPEC
    spec.write_text(spec.read_text().replace("tenantShards: 2", "tenantShards: 3"))
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    moves = [t for t in TENANTS if sharding.shard_of(t, 2) != sharding.shard_of(t, 3)]
    assert moves, "2 -> 3 shards moves no tenant of the dev spec: the case tests nothing"
    stacks_of = {sharding.shard_stack("dev", sharding.shard_of(t, n)) for t in moves for n in (2, 3)}
    assert stacks_of <= {s for s, _ in _ops(world, "up")}


def test_destroy_never_skips_and_removes_the_records(project, tmp_path):
    world = _converged_platform(project, tmp_path)
    p, _ = _platform(project, world, tmp_path)
    p.run("destroy")
    assert sorted(s for s, _ in _ops(world, "destroy")) == sorted(world.states)
    assert not any(stack_inputs.TAG in tags for tags in world.tags.values())
    world.calls.clear()
    p, _ = _platform(project, world, tmp_path)
    p.run("up")  # the objects are gone: nothing may be skipped
    assert sorted(s for s, _ in _ops(world, "up")) == sorted(world.states)


def test_one_stack_without_shards_skips_too(project, tmp_path):
    world = World({"dev": TENANTS})
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    world.calls.clear()
    p, _ = _platform(project, world, tmp_path)
    p.run("preview")
    assert world.calls == [] and stacks.summary(p.outcomes).startswith("dev: preview skipped (unchanged since")


def test_a_backend_that_cannot_remove_the_record_runs_nothing(project, tmp_path):
    world = _converged_platform(project, tmp_path)

    def refuse(stack, key):
        raise auto.CommandError(_failed("error: tags are read-only here"))

    tenant = project / "dev" / "tenants" / "research.yaml"
    tenant.write_text(tenant.read_text().replace("research-students", "research-interns"))
    p, _ = _platform(project, world, tmp_path)
    p.workspace = SimpleNamespace(**{**vars(p.workspace), "remove_tag": refuse})
    with pytest.raises(stacks.StackError, match="could not remove its gpupool:inputs tag"):
        p.run("up")
    assert not _ops(world, "up")


def _exports(world: World) -> list[str]:
    return [c[1] for c in world.calls if c[0] == "export"]


def test_a_settled_stack_s_state_is_not_read_on_a_file_backend(project, tmp_path, monkeypatch):
    """Issue 40's reads: a stack whose record is its fingerprint now at its listed last update is skipped
    without `pulumi stack export`; an edited tenant's shard is read (its moves are planned from its state)."""
    world = _converged_platform(project, tmp_path)
    exported: list[str] = []
    real = stacks.exported_state
    monkeypatch.setattr(stacks, "exported_state", lambda ws, name: exported.append(name) or real(ws, name))
    p, _ = _platform(project, world, tmp_path)
    p.run("preview")
    assert exported == [] and [o.result for o in p.outcomes] == ["skipped"] * 3
    home = sharding.shard_stack("dev", sharding.shard_of("research", 2))
    tenant = project / "dev" / "tenants" / "research.yaml"
    tenant.write_text(tenant.read_text().replace("research-students", "research-interns"))
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert exported == [home] and _ops(world, "up") == [(home, None)]


def test_on_pulumi_cloud_every_state_is_read_and_pending_operations_make_a_stack_run(project, tmp_path, monkeypatch):
    """Pulumi Cloud lists its own update history, not the state's time: there a state is read before a skip,
    and pending operations that came without a new last update still make the stack run."""
    world = _converged_platform(project, tmp_path)
    exported: list[str] = []
    real = stacks.exported_state
    monkeypatch.setattr(stacks, "exported_state", lambda ws, name: exported.append(name) or real(ws, name))
    world.states["dev.tenants-0"]["pending_operations"] = [{"resource": {"urn": "urn:x"}, "type": "creating"}]
    cloud = "https://api.pulumi.com"
    p, logs = _platform(project, world, tmp_path, backend_url=cloud)
    p.run("up")
    assert sorted(exported) == sorted(world.states)
    assert _ops(world, "up") == [("dev.tenants-0", None)]
    assert any("dev.tenants-0: runs: its state has pending operations" in line for line in logs), logs
    # Its up completed nothing of that dead run (urn:x is in no state): not recorded, so it runs again.
    assert stack_inputs.TAG not in world.tags["dev.tenants-0"]


def test_an_up_that_keeps_old_mig_configs_is_not_recorded(project, tmp_path, monkeypatch):
    """A re-layout's kept configs make the next run run the platform stack (it drops them if unused): that
    state is not recorded, since a recorded one would be skipped unread."""
    world = _converged_platform(project, tmp_path)
    kept = {"urn": "urn:cm", "outputs": {"metadata": {"annotations": {ANNOTATION_KEPT: "a100-balanced"}}}}
    up = FakeStack.up

    def keeping(self, **kw):
        result = up(self, **kw)
        if self.name == "dev":
            world.states["dev"] = {"resources": [kept]}
        return result

    monkeypatch.setattr(FakeStack, "up", keeping)
    p, logs = _platform(project, world, tmp_path, all_stacks=True)
    p.run("up")
    assert stack_inputs.TAG not in world.tags["dev"]
    assert any(line.startswith("dev: not recorded: it keeps old MIG") for line in logs), logs
    world.calls.clear()
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert _ops(world, "up") == [("dev", None)]


def test_a_state_that_lost_resources_by_hand_is_read_and_its_stack_runs(project, tmp_path, monkeypatch):
    """`pulumi state delete` keeps the state's listed time (gpupool/deploy/records.py cites the CLI's lines) but
    not its resource count, which the record holds too: the stack is not settled, its state is read, and the
    tenant whose component went runs again."""
    world = _converged_platform(project, tmp_path)
    home = sharding.shard_stack("dev", sharding.shard_of("research", 2))
    resources = world.states[home]["resources"]
    world.states[home]["resources"] = [r for r in resources if not r["urn"].endswith("tenant-research")]
    assert len(world.states[home]["resources"]) == len(resources) - 1
    exported: list[str] = []
    real = stacks.exported_state
    monkeypatch.setattr(stacks, "exported_state", lambda ws, name: exported.append(name) or real(ws, name))
    p, logs = _platform(project, world, tmp_path)
    p.run("up")
    assert exported == [home] and _ops(world, "up") == [(home, None)]


def test_one_stack_on_pulumi_cloud_is_read_without_secrets_and_runs_on_pending_operations(
    project, tmp_path, monkeypatch
):
    """The unsharded platform's one stack on a backend whose last update proves nothing: its state is read (the
    export without --show-secrets) and a pending operation makes it run."""
    world = World({"dev": TENANTS})
    cloud = "https://api.pulumi.com"
    p, _ = _platform(project, world, tmp_path, backend_url=cloud)
    p.run("up")
    exported: list[str] = []
    real = stacks.exported_state
    monkeypatch.setattr(stacks, "exported_state", lambda ws, name: exported.append(name) or real(ws, name))
    world.calls.clear()
    p, _ = _platform(project, world, tmp_path, backend_url=cloud)
    p.run("preview")
    assert exported == ["dev"] and world.calls == []
    world.states["dev"]["pending_operations"] = [{"resource": {"urn": "urn:x"}, "type": "creating"}]
    p, logs = _platform(project, world, tmp_path, backend_url=cloud)
    p.run("preview")
    assert any("dev: runs: its state has pending operations" in line for line in logs), logs
