"""`gpupool stacks up` runs no pulumi command whose answer it does not use.

Each pulumi run loads (and decrypts) the whole state: on a stack of a few hundred resources that is about a
second of CPU, and `make test` runs gpupool stacks up about a hundred and fifty times. Two runs per up were
waste:

- `auto.Stack.up` follows the update with `stack output --json` twice and `stack history` (pulumi/automation/
  _stack.py, `up`: `self.outputs()` then `self.info()`); gpupool reads only the change counts, which the
  engine's summary event carries (gpupool.deploy.lean_stack);
- the shard layout exported every stack's state before the up, also for one stack without shards, where
  there is nothing to plan.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("pulumi")

from pulumi import automation as auto  # noqa: E402

from gpupool.deploy.lean_stack import LeanStack  # noqa: E402
from tests.test_stacks_platform import TENANTS, World, _platform, _shard, project  # noqa: E402,F401


def _lean_stack() -> LeanStack:
    return object.__new__(LeanStack)  # no workspace: every pulumi run would fail, which is the point


def test_up_takes_its_counts_from_the_summary_event_not_from_three_more_pulumi_runs(monkeypatch):
    ran: list[str] = []

    def pulumi_run(what):
        def run(self, *a, **kw):
            ran.append(what)
            raise AssertionError(f"{what} ran pulumi")

        return run

    monkeypatch.setattr(auto.Stack, "outputs", pulumi_run("stack output"))
    monkeypatch.setattr(auto.Stack, "info", pulumi_run("stack history"))
    events = []

    def auto_up(self, **kw):
        """auto.Stack.up's sequence (pulumi/automation/_stack.py): the update, whose engine events reach
        on_event, then self.outputs() and self.info()."""
        kw["on_event"](SimpleNamespace(summary_event=None))
        kw["on_event"](SimpleNamespace(summary_event=SimpleNamespace(resource_changes={"create": 7, "same": 2})))
        outputs = self.outputs()
        summary = self.info(True)
        return auto.UpResult(stdout="", stderr="", summary=summary, outputs=outputs)

    monkeypatch.setattr(auto.Stack, "up", auto_up)
    up = _lean_stack().up(color="never", on_event=events.append)
    assert ran == []
    assert up.summary.resource_changes == {"create": 7, "same": 2}
    assert up.summary.result == "succeeded" and up.outputs == {}
    assert len(events) == 2  # the caller's own on_event still sees every event


def test_outside_an_up_outputs_and_info_are_auto_s_own(monkeypatch):
    monkeypatch.setattr(auto.Stack, "outputs", lambda self: {"x": "from pulumi"})
    monkeypatch.setattr(auto.Stack, "info", lambda self, show_secrets=True: "from pulumi")
    s = _lean_stack()
    assert s.outputs() == {"x": "from pulumi"}
    assert s.info() == "from pulumi"


def _exports(world: World, platform) -> list[str]:
    seen: list[str] = []
    select = platform.select

    def counting_select(name, create=True):
        stack = select(name, create)
        export = stack.export_stack

        def export_stack():
            seen.append(name)
            return export()

        stack.export_stack = export_stack
        return stack

    platform.select = counting_select
    workspace_export = platform.workspace.export_stack

    def counting_export(name):  # the layout reads every state through the workspace, several at once
        seen.append(name)
        return workspace_export(name)

    platform.workspace.export_stack = counting_export
    return seen


def test_one_stack_without_shards_exports_its_state_once_per_up(project, tmp_path):
    world = World({"dev": TENANTS})
    p, _ = _platform(project, world, tmp_path)
    seen = _exports(world, p)
    p.run("up")
    assert [c[0] for c in world.calls if c[0] in ("up", "preview")] == ["up", "preview"]
    assert seen == ["dev"]  # the pending-operations check after the up; no layout export before it


def test_a_sharded_platform_still_reads_every_state_before_planning_moves(project, tmp_path):
    _shard(project, 2)
    world = World({"dev": TENANTS})
    p, _ = _platform(project, world, tmp_path)
    seen = _exports(world, p)
    p.run("up")
    ups = [c[1] for c in world.calls if c[0] == "up"]
    assert seen[0] == "dev" and len(seen) == 1 + len(ups)  # the layout's export of dev, then one per up
