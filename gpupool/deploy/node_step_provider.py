"""What the node steps' Pulumi dynamic providers share (drain_provider, mig_step_provider, rekey_drain_provider):
a diff on the inputs that mean the node must change, create/update that run the step, and errors meant for a
person sent as their one line.

The engine shows what the provider host sends on a failure, `traceback.format_exc()` (pulumi/dynamic/__main__.py,
`_abort_with_traceback`), which honours `sys.tracebacklimit`: an error meant for the operator (a blocked eviction,
a wait that timed out, an unreachable API server, a kubeconfig it cannot use) is sent as its one line. The limit
is set only in the provider host's own process (create/update run nowhere else), never in the program's: there
the SDK's stack walk (pulumi/runtime/resource.py, _get_stack_trace) would honour it too.
"""

from __future__ import annotations

import sys
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult


def expected_errors() -> tuple[type[BaseException], ...]:
    """The errors a node step reports to a person (imported late: the host unpickles the provider first)."""
    from gpupool.k8s import drain, kubeclient, mig_step

    return (mig_step.MigStepError, drain.DrainError, kubeclient.KubeAPIError, kubeclient.KubeconfigError)


class NodeStepProvider(ResourceProvider):
    """A step on one node: `_step(props)` returns the outputs; DIFF_KEYS are the inputs whose change runs it."""

    DIFF_KEYS: tuple[str, ...] = ()

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=any(olds.get(k) != news.get(k) for k in self.DIFF_KEYS))

    def _step(self, props: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _run(self, props: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._step(props)
        except expected_errors():
            sys.tracebacklimit = 0
            raise
        except Exception:
            # A bug keeps its traceback, even after an earlier expected error in this process.
            if getattr(sys, "tracebacklimit", None) == 0:
                del sys.tracebacklimit
            raise

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(props["node"], self._run(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self._run(news))
