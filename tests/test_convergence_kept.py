"""gpupool stacks' convergence check runs its preview with GPUPOOL_CONVERGENCE_CHECK set (and only it), so that the
program compares the MIG configs and device-plugin keys the up kept as that up wrote them (gpupool.k8s.mig_in_use):
a re-layout that finished converges in the same `gpupool stacks up`."""

from __future__ import annotations

from types import SimpleNamespace

from gpupool.deploy import stacks
from gpupool.k8s.mig_in_use import CONVERGENCE_ENV


class _Stack:
    def __init__(self):
        self.name = "dev"
        self.workspace = SimpleNamespace(env_vars={"PULUMI_HOME": "/h"})
        self.seen: list[dict] = []

    def preview(self, **kw):
        assert kw["expect_no_changes"] is True
        self.seen.append(dict(self.workspace.env_vars))


def test_only_the_convergence_preview_sees_the_variable_and_the_workspace_is_restored():
    stack = _Stack()
    me = SimpleNamespace(outcomes=[], platform_stack="dev")
    stacks.Platform._converged(me, stack, {"update": 1}, True, None)  # type: ignore[arg-type]
    assert stack.seen == [{"PULUMI_HOME": "/h", CONVERGENCE_ENV: "1"}]
    assert stack.workspace.env_vars == {"PULUMI_HOME": "/h"}
    assert me.outcomes[0].note == "converged"
