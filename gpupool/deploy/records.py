"""The inputs records of a platform's stacks (gpupool.deploy.unchanged), as `gpupool stacks` reads and writes
them: one stack tag each, removed before every up or destroy, written after an up that converged with a clean
state, and read, four stacks at a time, before any stack runs.

A stack is *settled* when its record is the fingerprint computed now at the last update the backend lists
now. On a DIY backend that says all its state could: every state the engine writes, a killed run's
checkpoint with pending operations included, carries the time it was written (`Manifest{Time: time.Now()}`
in SnapshotManager.snap, pkg/backend/snapshot.go of pulumi v3.274.1), and `pulumi stack ls` lists that time
as the last update (diyStackSummary.LastUpdate, pkg/backend/diy/stack.go). So a settled stack's state is the
one its recorded up left: clean (nothing is recorded otherwise), holding exactly the tenants its
fingerprint covers. Its state is then not exported, which at 1,000 tenants is 41 `pulumi stack export`s
fewer for a preview that skips every stack. Pulumi Cloud lists its own update history: there every
state is still read.

`pulumi state delete|edit|move|...` and `pulumi stack import` save the state with the time it already had
(TotalStateEdit in pkg/cmd/pulumi/state/io.go and SaveSnapshot in pkg/cmd/pulumi/stack/io.go serialize the
snapshot's own manifest; both clear pending operations). So the record also holds the number of resources
the backend lists: a state that lost or gained resources by hand is not settled. An edit that keeps the
count is, like a change made in the cluster, seen by the next `--all` run (the nightly one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from pulumi import automation as auto

from gpupool.analysis import shard_moves
from gpupool.deploy import pulumi_messages as msg
from gpupool.deploy import stack_inputs, unchanged
from gpupool.deploy.outcomes import Outcome, StackError
from gpupool.deploy.workspace import read_each
from gpupool.model import sharding

# Backends whose listed last update is the time of the state they hold (the DIY backend's URL schemes).
DIY_SCHEMES = ("file", "s3", "gs", "azblob")


def trusts_last_update(backend_url: str) -> bool:
    return urlsplit(backend_url).scheme in DIY_SCHEMES


class Records:
    """The records part of gpupool.deploy.stacks.Platform (a mixin: these are its attributes)."""

    s: Any  # Settings
    platform_stack: str
    workspace: Any
    outcomes: list[Outcome]
    _previews: list[str]
    _tags: dict[str, dict[str, str]]
    _listing: list | None
    _write_previews: Callable[[], None]

    def existing_stacks(self, reuse: bool = False) -> list[str]:
        return [
            s.name
            for s in self._list_stacks(reuse)
            if s.name == self.platform_stack or s.name.startswith(f"{self.platform_stack}.tenants-")
        ]

    def _stack_tags(self, name: str) -> dict[str, str]:
        if name not in self._tags:
            self._tags[name] = self._listed_tags(name)
        return self._tags[name]

    def _listed_tags(self, name: str) -> dict[str, str]:
        return dict(self.workspace.list_tags(name) or {})

    def _forget(self, name: str, op: str) -> None:
        """Remove the stack's inputs record before an up or destroy: a run that then fails or is killed leaves
        none, so the next run cannot skip the stack. When that cannot be done, nothing is run."""
        try:
            if stack_inputs.TAG in self._stack_tags(name):
                self.workspace.remove_tag(name, stack_inputs.TAG)
                self._tags[name].pop(stack_inputs.TAG, None)
        except (auto.CommandError, OSError) as exc:
            why = msg.reason(exc) if isinstance(exc, auto.CommandError) else msg.unrunnable(exc)
            note = f"could not remove its {stack_inputs.TAG} tag before the {op} ({why}); nothing was run"
            self.outcomes.append(Outcome(name, op, "failed", note=note))
            raise StackError(f"{name}: {op} failed: {note}") from None

    def _record(self, name: str, inputs: str) -> None:
        """After an up and its convergence check succeeded: the stack's inputs and its last update as the
        backend lists it now, so that a later preview or up may skip it while both still hold. A failure
        here costs only that: the next run runs the stack."""
        try:
            last = self.last_updates().get(name)
            if last is None:
                self.s.log(f"{name}: the backend lists no last update of it; its inputs are not recorded")
                return
            value = unchanged.Record(inputs, last).value()
            self.workspace.set_tag(name, stack_inputs.TAG, value)
            self._tags.setdefault(name, {})[stack_inputs.TAG] = value
        except (auto.CommandError, OSError) as exc:
            why = msg.reason(exc) if isinstance(exc, auto.CommandError) else msg.unrunnable(exc)
            self.s.log(f"warning: {name}: its inputs were not recorded ({why}); the next run runs it")

    def last_updates(self, reuse: bool = False) -> dict[str, str | None]:
        """Stack name -> its last update (up, refresh or destroy) as the backend lists it, with the number of
        resources it lists (`TIME#COUNT`): a state edited by hand keeps its time (the module's docstring) but
        not its count when resources left it, as `pulumi state delete` does."""
        return {s.name: _listed(s) for s in self._list_stacks(reuse)}

    def _list_stacks(self, reuse: bool = False) -> list:
        """`pulumi stack ls` (a second and a half at 41 stacks: it reads every state); REUSE: the listing this
        run already made before any stack ran, for the skip decisions."""
        if not (reuse and self._listing is not None):
            self._listing = list(self.workspace.list_stacks())
        return self._listing

    def skipping(self, op: str) -> bool:
        return op in ("preview", "up") and not self.s.all_stacks

    def settled_stacks(
        self, inputs_of: Callable[[sharding.Role], str | None] | None, last_updates: Mapping[str, str | None]
    ) -> set[str]:
        """Read every existing stack's record (four at a time; a failed read is read again alone when its stack
        comes), and return the stacks that are settled (the module's docstring), none but on a DIY backend."""
        names = [n for n in self.existing_stacks(reuse=True) if n in last_updates]
        self._tags.update(read_each(names, self._listed_tags, quiet=True))
        if inputs_of is None or not trusts_last_update(self.s.backend_url):
            return set()
        settled = set()
        for name in names:
            role = shard_moves.role_of(self.platform_stack, name)
            record = unchanged.parse(self._tags.get(name, {}).get(stack_inputs.TAG))
            inputs = inputs_of(role) if role is not None and record is not None else None
            if inputs is not None and record == unchanged.Record(inputs, last_updates[name] or ""):
                settled.add(name)
        return settled

    def skipped(
        self,
        name: str,
        op: str,
        run: shard_moves.StackRun | None,
        inputs: str | None,
        last_updates: Mapping[str, str | None],
        state: Callable[[], Mapping[str, Any]],
    ) -> bool:
        """Is stack NAME skipped (its outcome then says so)? Logs why it runs otherwise."""
        reason = unchanged.why_run(
            exists=name in last_updates,
            run=run,
            inputs=inputs,
            recorded=lambda: unchanged.parse(self._stack_tags(name).get(stack_inputs.TAG)),
            last_update=last_updates.get(name),
            state=state,
        )
        if reason is not None:
            self.s.log(f"{name}: runs: {reason}")
            return False
        assert inputs is not None
        outcome = Outcome(name, op, "skipped", note=unchanged.skipped_note(inputs))
        self.outcomes.append(outcome)
        if op == "preview":  # the pull-request comment (--preview-out) says which stacks it does not show
            self._previews.append(outcome.line() + "\n")
            self._write_previews()
        return True


def _listed(summary: Any) -> str | None:
    when = _timestamp(getattr(summary, "last_update", None))
    count = getattr(summary, "resource_count", None)
    return when if when is None or count is None else f"{when}#{count}"


def _timestamp(when: Any) -> str | None:
    """A StackSummary's last_update (a datetime) as a string that compares equal exactly when it is."""
    if when is None:
        return None
    return when.isoformat() if hasattr(when, "isoformat") else str(when)
