"""Whether `gpupool stacks preview|up` may skip a stack: nothing it would write from has changed since its
last successful up.

After an up and its convergence check succeed, `gpupool stacks` records in the stack's tag `gpupool:inputs`
(gpupool.deploy.stack_inputs.TAG) the stack's inputs fingerprint and the stack's last-update time as the
backend lists it; before every up or destroy it removes the tag. A tag lives in the backend beside the
state (the file backend keeps it in `<stack>.pulumi-tags`, which `pulumi up` leaves alone), so an ephemeral
CI runner finds it; a stack output would not do: the engine writes outputs during an up that may still fail.

A stack runs unless all of these hold (why_run names the first that does not):

- it exists, and its tenants stay where they are (shard_moves: none leaving or arriving, held == assigned);
- its recorded fingerprint equals the one computed now;
- the backend's last update of the stack is still the one recorded (no `pulumi up`, `refresh` or `destroy`
  by hand since);
- its state has no pending operations (a dead run's), and keeps no old MIG or device-plugin config of a
  re-layout (the ConfigMap annotations gpupool.k8s.mig_in_use describes: the next run drops them).

The last condition is checked once, on the state an up leaves (`unclean`: such a state is not recorded), and
again before a skip only where the backend's listed last update does not prove the state unchanged since
(gpupool.deploy.records: a *settled* stack on a DIY backend is skipped without reading its state).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpupool.analysis.shard_moves import StackRun
from gpupool.deploy import stack_inputs
from gpupool.k8s.mig_in_use import ANNOTATION_KEPT, ANNOTATION_KEPT_PLUGIN

SEPARATOR = "@"  # between the fingerprint and the last-update time in the tag's value


@dataclass(frozen=True)
class Record:
    """What the tag holds: the inputs fingerprint of the stack's last successful up, and the stack's
    last-update time right after it."""

    inputs: str
    last_update: str

    def value(self) -> str:
        return f"{self.inputs}{SEPARATOR}{self.last_update}"


def parse(value: str | None) -> Record | None:
    """The record in a tag value, or None (no tag, or not one gpupool wrote)."""
    inputs, sep, last_update = (value or "").partition(SEPARATOR)
    if not sep or not inputs.startswith("sha256:") or not last_update:
        return None
    return Record(inputs, last_update)


def why_run(
    *,
    exists: bool,
    run: StackRun | None,
    inputs: str | None,
    recorded: Callable[[], Record | None],
    last_update: str | None,
    state: Callable[[], Mapping[str, Any]],
) -> str | None:
    """Why the stack runs, or None when it may be skipped. RUN: its place in a sharded platform (None: the
    one stack of an unsharded one). RECORDED (its tag) and STATE (its `pulumi stack export` deployment) are
    read only when every cheaper condition holds."""
    if not exists:
        return "it does not exist yet"
    if run is not None and (run.leaving or run.arriving or set(run.held) != set(run.assigned)):
        gone = len(set(run.held) - set(run.assigned) - set(run.leaving))
        return (
            f"its tenants change ({len(run.arriving)} arriving, new or from another stack; {len(run.leaving)} "
            f"leaving for another stack; {gone} removed from the spec)"
        )
    if inputs is None:
        return "its inputs cannot be computed (no gpupool:spec, or the spec does not load)"
    record = recorded()
    if record is None:
        return f"no successful up recorded (stack tag {stack_inputs.TAG})"
    if record.inputs != inputs:
        was, now = stack_inputs.short(record.inputs), stack_inputs.short(inputs)
        return f"its inputs changed since its last successful up ({was} -> {now})"
    if last_update is None or last_update != record.last_update:
        return "it was updated since its last successful `gpupool stacks up` (a pulumi command by hand?)"
    return unclean(state())


def unclean(deployment: Mapping[str, Any]) -> str | None:
    """Why a stack with this state must run (and so, just after an up, why it is not recorded), or None. Read
    before a skip, and once on the state an up leaves, since a settled stack's state is not read again."""
    if deployment.get("pending_operations"):
        return "its state has pending operations (a dead run's)"
    if keeps_old_configs(deployment):
        return "it keeps old MIG or device-plugin configs of a re-layout, which a run drops once they are unused"
    return None


def skipped_note(inputs: str) -> str:
    return f"unchanged since its last successful up (inputs {stack_inputs.short(inputs)}); --all runs it"


def keeps_old_configs(deployment: Mapping[str, Any]) -> bool:
    """Does a resource of the state carry the annotation of kept MIG or device-plugin configs?"""
    for resource in deployment.get("resources") or []:
        for side in ("outputs", "inputs"):
            meta = ((resource.get(side) or {}).get("metadata")) or {}
            annotations = meta.get("annotations") if isinstance(meta, dict) else None
            if isinstance(annotations, dict) and (
                ANNOTATION_KEPT in annotations or ANNOTATION_KEPT_PLUGIN in annotations
            ):
                return True
    return False
