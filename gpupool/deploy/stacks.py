"""Run preview, up or destroy over a platform's Pulumi stacks with the project's own program.

One stack without sharding; with `sharding.tenantShards` the platform stack STACK and its shard stacks
STACK.tenants-<k> (gpupool.analysis.shard_moves decides which run, in which order and with which pass).
Each stack is selected or, for preview and up, created (a first deploy's pull request previews a stack that
does not exist yet); destroy only selects: an unknown stack is an error that names the stacks there, and
nothing is created. It gets the run's config (a shard also the platform stack's config and its
`gpupool:shard`), and then:

- preview: `preview --diff`;
- up: dead-run recovery (a stale lock cancelled on the typed ConcurrentUpdateError, then one retry), `up`
  (a tenant shard's checkpoint-free: CHECKPOINT_FREE), the dead run's completed pending operations dropped,
  and the convergence check (`preview --expect-no-changes`);
- destroy: the same recovery, then `destroy` (shards first, the platform stack last).
After the last stack of an up or destroy, the label sweep (gpupool.deploy.sweep). preview and up skip a stack whose inputs are unchanged since its last successful up (gpupool.deploy.unchanged:
the fingerprint of gpupool.deploy.stack_inputs, recorded in a stack tag after the up and its convergence
check, removed before every up and destroy); `--all` (Settings.all_stacks) runs every stack.

Before any stack is touched, a torn metadata sidecar of a file backend is removed (with one, every pulumi
command fails, `stack ls` included).

The program is the project's (Pulumi.yaml, its virtualenv first on PATH), so a plain `pulumi up` by hand
keeps working on an unsharded stack.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml
from pulumi import automation as auto

from gpupool.analysis import shard_moves
from gpupool.deploy import pulumi_messages as msg
from gpupool.deploy import recovery, run_config, stack_inputs, unchanged, validated_spec
from gpupool.deploy.lean_stack import LeanStack
from gpupool.deploy.outcomes import Outcome as Outcome  # re-exported with summary and as_json, for the CLI
from gpupool.deploy.outcomes import StackError as StackError
from gpupool.deploy.outcomes import as_json as as_json
from gpupool.deploy.outcomes import summary as summary
from gpupool.deploy.records import Records
from gpupool.deploy.workspace import SetupError as SetupError  # re-exported: the CLI exits 2 on it
from gpupool.deploy.workspace import exported_document, exported_state, extra_env, read_each
from gpupool.deploy.workspace import project_env as project_env
from gpupool.deploy.workspace import workspace as project_workspace
from gpupool.k8s.mig_in_use import CONVERGENCE_ENV
from gpupool.k8s.rollout import REFRESH_EXCLUDE
from gpupool.model import sharding

OPS = ("preview", "up", "destroy")
# Whether an action refreshes (reads every managed object back from the cluster into the state) before it
# plans. `up` does: without it, an object deleted or edited behind Pulumi's back is invisible (the state still
# has it, so the plan is "no changes") and "converged" would only mean "matches the state". A preview does not
# by default (it is what people run while editing; CI's pull-request preview passes --refresh to show drift);
# destroy does not (deleting an object that is already gone succeeds).
REFRESH_DEFAULT = {"preview": False, "up": True, "destroy": False}
T = TypeVar("T")
DRIFT_HEADING = (
    "Drift: where the cluster differs from the state (pulumi refresh --preview-only; a delete is an object gone "
    "from the cluster, which the next up creates again):\n"
)
PLAN_HEADING = "\nThe update (program against the state):\n"
# A tenant shard's up runs without per-step checkpoints: the file and object-store backends otherwise rewrite
# the whole state after every step, quadratic in the stack's size. A shard holds only Kubernetes objects, which
# gpupool's provider upserts, so a killed run's state is the one before it and the rerun adopts what it made;
# what the spec no longer wants, no state holds, and the label sweep after every up removes it
# (gpupool.deploy.sweep). The platform stack keeps its checkpoints: a Helm release or a node's rollout step
# that a killed run made cannot simply be made again.
CHECKPOINT_FREE = "PULUMI_SKIP_CHECKPOINTS"


@dataclass
class Settings:
    project_dir: Path
    backend_url: str
    config: dict[str, str] = field(default_factory=dict)  # -c KEY=VALUE
    save_config: bool = False  # --save-config: write them into the stack file, else for this run only
    single_writer: bool = False
    preview_out: Path | None = None
    # Read the cluster into the state first (`--refresh`): None = the action's default, REFRESH_DEFAULT.
    refresh: bool | None = None
    # --all: preview and up run every stack, also those whose inputs are unchanged (gpupool.deploy.unchanged)
    all_stacks: bool = False
    log: Callable[[str], None] = lambda msg: print(f"[gpupool stacks] {msg}", file=sys.stderr)
    output: Callable[[str], None] = lambda text: print(text, end="" if text.endswith("\n") else "\n")


class Platform(Records):
    """The stacks of one platform in one project."""

    def __init__(
        self,
        settings: Settings,
        platform_stack: str,
        workspace: auto.Workspace | None = None,
        command: auto.PulumiCommand | None = None,
    ):
        self.s = settings
        self.platform_stack = platform_stack
        # The workspace keeps this very dict and passes it to every pulumi command: a release pass adds its
        # variable for the duration of its run (run_one).
        self.env: dict[str, str] = {**project_env(settings.project_dir), "PULUMI_BACKEND_URL": settings.backend_url}
        self.workspace = workspace or project_workspace(settings.project_dir, self.env, command)
        self.outcomes: list[Outcome] = []
        self._previews: list[str] = []  # the preview texts so far, for --preview-out
        self._platform_config: dict[str, auto.ConfigValue] | None = None  # read once a run (shard_config)
        self._tags: dict[str, dict[str, str]] = {}  # stack -> its tags, as last read or written this run
        self._states: dict[str, dict] = {}  # stack -> its `pulumi stack export` as layout read it
        self._listing: list | None = None  # the last `pulumi stack ls`
        self._unclean: dict[str, str] = {}  # stack -> why its state after this run's up is not recorded

    # -- stacks and their config -------------------------------------------------------------------

    def select(self, name: str, create: bool = True) -> auto.Stack:
        """The stack NAME; with CREATE it is created when missing (`pulumi stack init`), else a missing one is
        auto.StackNotFoundError (`pulumi stack select` refuses it: "no stack named ... found")."""
        if create:
            return LeanStack.create_or_select(name, self.workspace)
        return LeanStack.select(name, self.workspace)

    def configure_platform(self, create: bool = True) -> auto.Stack:
        stack = self.select(self.platform_stack, create)
        if self.s.save_config:  # asked for: into the stack file; an empty VALUE removes KEY from it
            saved = {k: auto.ConfigValue(v) for k, v in self.s.config.items() if v}
            if saved:
                stack.set_all_config(saved)
            removed = [k for k, v in self.s.config.items() if not v]
            if removed:
                stack.remove_all_config(removed)
        return stack

    def run_values(self) -> dict[str, str]:
        """The -c values each run gets through a --config-file copy (gpupool.deploy.run_config), leaving the
        stack files as they are; none once --save-config has written them."""
        return {} if self.s.save_config else dict(self.s.config)

    def configure_shard(self, name: str, shard: str, platform: auto.Stack, create: bool = True) -> auto.Stack:
        """A shard stack: the platform stack's config (secrets re-encrypted with its own salt) plus its role."""
        stack = self.select(name, create)
        stack.set_all_config(stack_inputs.shard_config(self.platform_config(platform), auto.ConfigValue(shard)))
        return stack

    def saved_config(self, platform: auto.Stack) -> stack_inputs.Config:
        """platform_config as the program reads it: full key -> (value, secret)."""
        return {k: (v.value, v.secret) for k, v in self.platform_config(platform).items()}

    def platform_config(self, platform: auto.Stack) -> dict[str, auto.ConfigValue]:
        """The platform stack's saved config (after --save-config wrote into it), read once a run."""
        if self._platform_config is None:
            self._platform_config = dict(platform.get_all_config())
        return self._platform_config

    def checked_spec(self, platform: auto.Stack):
        """(the spec path, its gpupool.rules.engine result) of the platform stack's gpupool:spec (this run's
        -c value first), or None when the stack names none (the program then says so)."""
        from gpupool.rules.engine import validate_file

        spec_path = self.run_values().get("gpupool:spec")
        if spec_path is None:
            spec_value = platform.get_all_config().get("gpupool:spec")
            if spec_value is None:
                return None
            spec_path = spec_value.value
        return spec_path, validate_file(str(self.s.project_dir / spec_path))

    def refuse_invalid_spec(self, op: str, checked) -> None:
        """An invalid spec stops preview and up before pulumi runs: its diagnostics printed once, as
        `gpupool validate` prints them (through pulumi each came back inline, in its Diagnostics section and
        in the error lines), and the platform stack's failed outcome."""
        from gpupool.present.text import plural

        if checked is None or checked[1].spec is not None:
            return
        spec_path, result = checked
        diagnostics = result.report.sorted()
        for d in diagnostics:
            self.s.output(d.render())
        errors = sum(d.is_error for d in diagnostics)
        note = (
            f"{spec_path}: {plural(errors, 'error')} in the spec; nothing was run "
            f"(`gpupool validate {spec_path}` shows them)"
        )
        self.outcomes.append(Outcome(self.platform_stack, op, "failed", note=note))
        raise StackError(f"{self.platform_stack}: {op} failed: {note}")

    def refuse_chart_outside(self, op: str, platform: auto.Stack, checked=None) -> None:
        """The stack config's local chart (`gpupool:operatorChartPath`, this run's -c value first): a relative
        path is the project's and must stay inside it (links followed), or preview and up stop before pulumi
        runs; an absolute one is the deploying machine's own choice (a mirror mounted on a runner) and is
        taken as given. Either way a chart without the structure gpupool relies on is a warning
        (gpupool.gpu.local_chart)."""
        from gpupool.gpu import local_chart
        from gpupool.gpu.operator_facts import chart_version

        key = "gpupool:operatorChartPath"
        value = self.run_values().get(key)
        if value is None:
            saved = platform.get_all_config().get(key)
            value = saved.value if saved is not None and not saved.secret else None
        if not value:
            return
        where = Path(value) if os.path.isabs(value) else self.s.project_dir / value
        if not os.path.isabs(value) and not local_chart.inside(where, self.s.project_dir):
            note = (
                f"{key}: resolves outside the project directory (links followed); commit the chart under it, "
                "e.g. vendor/charts/gpu-operator (docs/howto/chart-upgrade.md); nothing was run"
            )
            self.outcomes.append(Outcome(self.platform_stack, op, "failed", note=note))
            raise StackError(f"{self.platform_stack}: {op} failed: {note}")
        if where.exists():
            spec = checked[1].spec if checked is not None else None
            pinned = spec.cluster.operator.chart_version if spec is not None else chart_version()
            for problem in local_chart.problems(where, pinned):
                self.s.log(f"warning: {key}: the chart {problem}")

    def layout(
        self,
        platform: auto.Stack,
        with_states: bool,
        checked=None,
        settled: AbstractSet[str] = frozenset(),
    ) -> list[shard_moves.StackRun] | None:
        """The platform's stacks as shard_moves plans them, or None when it is one stack (not sharded, or the
        spec does not load: the platform stack's own run then reports why). A SETTLED stack's state is not
        read: it holds what it is assigned (gpupool.deploy.records)."""
        checked = checked or self.checked_spec(platform)
        if checked is None:
            return None
        result = checked[1]
        if result.spec is None:
            return None
        names = self.existing_stacks(reuse=True)
        if not result.spec.tenant_shards and all(n == self.platform_stack for n in names):
            return None  # one stack and no shards: nothing to plan, so no state to export (a pulumi run each)
        states: dict[str, dict] = {}
        self._states = states  # the skip decision reads them too (gpupool.deploy.unchanged)
        # shard_moves reads `pulumi stack export` documents: the deployment under its key
        read = [n for n in names if n not in settled] if with_states else []
        exported = read_each(read, lambda n: exported_state(self.workspace, n))
        for name in names:
            states[name] = {"deployment": dict(exported[name] or {})} if name in exported else {}
        tenants, shards = [t.name for t in result.spec.tenants], result.spec.tenant_shards
        runs = shard_moves.stack_runs(self.platform_stack, tenants, shards, states, settled)
        return runs if shard_moves.as_json(self.platform_stack, result.spec.tenant_shards, runs)["sharded"] else None

    # -- one stack ---------------------------------------------------------------------------------

    def _recovering(self, stack: auto.Stack, action: Callable[[], T]) -> T:
        """ACTION (an up or destroy); on a lock whose every holder is dead, `pulumi cancel` and once more.
        A lock with a live (or unknowable) holder is never touched: the run fails and says whose it is."""
        try:
            return action()
        except auto.ConcurrentUpdateError as exc:
            holders = recovery.lock_holders(str(exc))
            live = [h for h in holders if not recovery.holder_is_dead(h, self.s.single_writer)]
            if not holders or live:
                hint = "" if self.s.single_writer else " (--single-writer if no other run can hold it)"
                for h in live:
                    self.s.log(f"{stack.name}: live lock: created by {h}; not touching it{hint}")
                who = ", ".join(map(str, live or holders)) or "an unknown holder"
                raise StackError(
                    f"{stack.name}: locked by a live run, {who}; not touching it{hint}. pulumi: {msg.locked(exc)}"
                ) from None
            for h in holders:
                self.s.log(f"{stack.name}: stale lock: created by {h} (holder gone)")
            self.s.log(f"{stack.name}: cancelling the dead run's lock (pulumi cancel) and retrying")
            stack.cancel()
            return action()

    def _drop_completed_pending(self, stack: auto.Stack) -> None:
        exported = exported_document(self.workspace, stack.name)
        cleaned, unresolved = recovery.resolve_pending(dict(exported.deployment or {}))
        if unresolved:
            self.s.log(
                f"{stack.name}: pending operations of a dead run whose resource is not in the state; check them, "
                "then `pulumi refresh`:\n  " + "\n  ".join(unresolved)
            )
        if cleaned is not None:
            self.s.log(f"{stack.name}: dropping the pending operations of a dead run (this run completed them)")
            stack.import_stack(auto.Deployment(version=exported.version, deployment=cleaned))
        # Only a clean state is recorded: a settled stack's state is not read again (gpupool.deploy.records).
        self._unclean.pop(stack.name, None)
        why = unchanged.unclean(cleaned if cleaned is not None else dict(exported.deployment or {}))
        if why is not None:
            self._unclean[stack.name] = why

    def run_one(
        self,
        stack: auto.Stack,
        op: str,
        keep: tuple[str, ...] | None = None,
        record: str | None = None,
        checkpoints: bool = True,
    ) -> None:
        """OP on STACK (a release pass when KEEP); after a successful up, RECORD is the inputs fingerprint
        recorded in its tag (None: nothing is recorded). Without CHECKPOINTS an up writes its state once, at
        its end (a tenant shard: see CHECKPOINT_FREE)."""
        label = f"{op} {stack.name}" + (" (release pass: only the tenants it keeps)" if keep is not None else "")
        self.s.log(label)
        with extra_env(self.workspace, {} if checkpoints or op != "up" else {CHECKPOINT_FREE: "true"}):
            self._run_one(stack, op, record, shard_moves.keep_config(keep))

    def _run_one(
        self, stack: auto.Stack, op: str, record: str | None = None, settings: Mapping[str, str] | None = None
    ) -> None:
        """SETTINGS: this run's own stack settings beside the -c values (a release pass's keep list)."""
        with contextlib.ExitStack() as cleanup:
            try:
                config_file = cleanup.enter_context(
                    run_config.overlay(self.s.project_dir, stack.name, {**self.run_values(), **(settings or {})})
                )
            except (OSError, ValueError, yaml.YAMLError) as exc:  # the stack file to copy for -c does not read
                where = run_config.stack_file(self.s.project_dir, stack.name).name
                note = f"-c needs {where} as a readable YAML mapping ({type(exc).__name__}); nothing was run"
                self.outcomes.append(Outcome(stack.name, op, "failed", note=note))
                raise StackError(f"{stack.name}: {op} failed: {note}") from None
            if op != "preview":  # from here the stack changes: its record must not outlive a failed or killed run
                self._forget(stack.name, op)
            self._run_op(stack, op, config_file)
            if op == "up" and record is not None:
                if stack.name in self._unclean:
                    self.s.log(f"{stack.name}: not recorded: {self._unclean[stack.name]}; the next run runs it")
                else:
                    self._record(stack.name, record)

    def _exported(self, name: str) -> dict:
        return dict(self._states.get(name, {}).get("deployment") or {})

    def inputs(self, platform: auto.Stack, checked) -> Callable[[sharding.Role], str | None] | None:
        """Role -> the inputs fingerprint of its stack in this run (gpupool.deploy.stack_inputs), or None when
        the spec does not load (every stack then runs and none is recorded)."""
        if checked is None or checked[1].spec is None:
            return None
        saved = self.saved_config(platform)
        project = run_config.project_name(self.s.project_dir)
        computed = stack_inputs.StackInputs(checked[1].spec, self.s.project_dir)

        def of(role: sharding.Role) -> str | None:
            base = saved if role.platform else stack_inputs.shard_config(saved, (_shard_value(role), False))
            try:
                return computed.of_stack(role, stack_inputs.run_config(base, self.run_values(), project))
            except Exception as exc:  # noqa: BLE001  # the fingerprint saves time; it must never stop a deploy
                self.s.log(f"warning: the inputs of {role.name} cannot be fingerprinted ({exc!r}); it runs, unrecorded")
                return None

        return functools.cache(of)

    def refreshes(self, op: str) -> bool:
        return REFRESH_DEFAULT[op] if self.s.refresh is None else self.s.refresh

    def _run_op(self, stack: auto.Stack, op: str, config_file: str | None) -> None:
        out = self.s.output
        refresh = self.refreshes(op)
        try:
            if op == "preview":
                drift, note, gone = "", "", 0
                if refresh:  # what differs in the cluster, read without writing the state (refresh --preview-only)
                    out(DRIFT_HEADING)
                    read = stack.preview_refresh(
                        exclude=list(REFRESH_EXCLUDE),
                        diff=True,
                        color="never",
                        on_output=out,
                        on_error=out,
                        config_file=config_file,
                    )
                    drift, note = DRIFT_HEADING + read.stdout + PLAN_HEADING, msg.drift_note(read.change_summary)
                    out(PLAN_HEADING)
                    gone = msg.counts(read.change_summary).get("delete", 0)
                try:
                    result = stack.preview(
                        diff=True, color="never", on_output=out, on_error=out, config_file=config_file
                    )
                except auto.CommandError as exc:
                    if not (refresh and gone):
                        raise
                    hint = msg.gone_hint(gone, stack.name)
                    reason = f"{msg.reason(exc, op)} ({hint})"
                    self._previews.append(f"{drift}The plan could not be computed: {hint}.\n")
                    self._write_previews()
                    self.outcomes.append(Outcome(stack.name, op, "failed", note=reason))
                    raise StackError(f"{stack.name}: {op} failed: {reason}") from None
                self._previews.append(drift + result.stdout)
                self._write_previews()
                self.outcomes.append(Outcome(stack.name, op, "succeeded", msg.counts(result.change_summary), note))
            elif op == "up":

                def read_then_up() -> auto.UpResult:
                    if refresh:
                        self._read_cluster(stack, config_file)
                    return stack.up(diff=True, color="never", on_output=out, on_error=out, config_file=config_file)

                up = self._recovering(stack, read_then_up)
                self._drop_completed_pending(stack)
                changes = msg.counts(up.summary.resource_changes)
                self._converged(stack, changes, refresh, config_file)
            else:
                down = self._recovering(
                    stack,
                    lambda: stack.destroy(
                        refresh=refresh, color="never", on_output=out, on_error=out, config_file=config_file
                    ),
                )
                changes = msg.counts(down.summary.resource_changes)
                self.outcomes.append(Outcome(stack.name, op, "succeeded", changes))
        except StackError as exc:
            self.outcomes.append(Outcome(stack.name, op, "failed", note=str(exc).removeprefix(f"{stack.name}: ")))
            raise
        except auto.CommandError as exc:
            self.outcomes.append(Outcome(stack.name, op, "failed", note=msg.reason(exc, op)))
            raise StackError(f"{stack.name}: {op} failed: {msg.reason(exc, op)}") from None
        except OSError as exc:  # the pulumi CLI went away (or cannot be run) since the run began
            note = msg.unrunnable(exc)
            self.outcomes.append(Outcome(stack.name, op, "failed", note=note))
            raise StackError(f"{stack.name}: {op} failed: {note}") from None

    def _read_cluster(self, stack: auto.Stack, config_file: str | None) -> str:
        """`pulumi refresh`: the cluster read into the state, so an object deleted or edited behind gpupool's
        back is planned again (the rollout's node patches each keep their own marker, so they read back as
        they were written: gpupool.k8s.rollout). Pending creates of a dead run are cleared:
        gpupool's provider adopts an object that exists (the up creates it again). The cordon and uncordon patches are
        not read (gpupool.k8s.rollout.REFRESH_EXCLUDE)."""
        out = self.s.output
        return stack.refresh(
            clear_pending_creates=True,
            exclude=list(REFRESH_EXCLUDE),
            color="never",
            on_output=out,
            on_error=out,
            config_file=config_file,
        ).stdout

    def _converged(self, stack: auto.Stack, changes: dict[str, int], refresh: bool, config_file: str | None) -> None:
        """The convergence check after an up: a preview that must plan nothing. After a refresh (the cluster
        read just before the up, which then wrote what it changed) "converged" means the cluster matches the
        spec; without one (--no-refresh) it can only say the program matches the state, and says that."""
        # Old MIG configs and device-plugin keys this up kept (gpupool.k8s.mig_in_use) are compared as it wrote
        # them: the run that finished a re-layout converges, and the next run drops them.
        planned: list[str] = []
        try:
            with extra_env(getattr(stack, "workspace", None), {CONVERGENCE_ENV: "1"}):
                stack.preview(
                    expect_no_changes=True,
                    color="never",
                    on_output=lambda _: None,
                    on_event=lambda event: msg.record_planned(event, planned),
                    config_file=config_file,
                )
        except auto.CommandError as exc:
            # pulumi's --expect-no-changes refusal (the preview ran and planned changes: "error: no changes were
            # expected but changes were proposed" in pulumi's preview command, NoChangesExpectedError in newer
            # CLIs) versus a preview that could not run at all (the program raised, the cluster was unreachable)
            if "no changes were expected" in str(exc):
                note = (
                    "did not converge: a preview after the up still plans changes"
                    + (" (after reading the cluster)" if refresh else "")
                    + msg.planned_note(planned)
                    + f"; run `gpupool stacks preview {self.platform_stack} --refresh` to see them "
                    f"(pulumi: {msg.reason(exc)})"
                )
            else:
                note = f"the convergence check (a preview after the up) failed to run: {msg.reason(exc)}"
            raise StackError(f"{stack.name}: {note}") from None
        note = "converged" if refresh else "matches the state; the cluster was not read (--no-refresh)"
        self.outcomes.append(Outcome(stack.name, "up", "succeeded", changes, note))

    def _write_previews(self) -> None:
        """--preview-out FILE holds every preview so far: rewritten whole through gpupool.safe_write (no link
        followed, only a regular file replaced; the name is often in a pull request's checkout)."""
        if self.s.preview_out is None:
            return
        from gpupool import safe_write

        try:
            safe_write.write_output(self.s.preview_out, "".join(self._previews))
        except safe_write.Refused as exc:
            raise StackError(f"--preview-out {exc}; nothing was written") from None

    # -- the whole platform ------------------------------------------------------------------------

    def run(self, op: str) -> None:
        """OP over the platform's stacks in shard_moves.steps' order; the first failure stops the run (a
        shard must not adopt tenants whose release failed), and the next run recomputes from the states."""
        from gpupool.spec.diagnostics import printable

        for path in recovery.repair_torn_sidecars(self.s.backend_url, warn=self.s.log):
            self.s.log(
                f"removing torn metadata sidecar {printable(str(path))} (left by a run that died while writing it)"
            )
        self._write_previews()  # emptied (or refused) before any stack is touched
        create = op != "destroy"  # destroy acts only on what exists, as `pulumi destroy` does
        platform = self._setup(self.platform_stack, op, lambda: self.configure_platform(create))
        checked = self._setup(self.platform_stack, op, lambda: self.checked_spec(platform))
        if op != "destroy":  # destroy does not run the program
            self.refuse_invalid_spec(op, checked)
            self._setup(self.platform_stack, op, lambda: self.refuse_chart_outside(op, platform, checked))
        offered = self._offer_validated_spec(checked) if op != "destroy" else None
        try:
            self._run_stacks(op, platform, checked)
        finally:
            if offered is not None:
                self._withdraw(offered)
        if op == "preview":
            return
        if checked is None or checked[1].spec is None:  # a program that finds its spec elsewhere: unknown platform
            self.s.log(
                "no label sweep: the platform stack names no valid gpupool:spec, so its platform is unknown here"
            )
            return
        # Every stack converged (up) or is empty (destroy: no stack holds anything), so what none holds shows now.
        self.sweep_cluster(platform, checked[1].spec, wanted=op == "up")

    def sweep_cluster(self, platform: auto.Stack, spec, wanted: bool = True) -> None:
        """The label sweep after every stack's up or destroy (gpupool.deploy.sweep; after a destroy nothing is
        WANTED), its outcome one line. A failure is the run's: a killed run's leftovers (a removed tenant's
        RoleBinding) may remain until a sweep succeeds."""
        from gpupool.deploy import sweep

        saved = self.saved_config(platform)
        config = stack_inputs.run_config(saved, self.run_values(), run_config.project_name(self.s.project_dir))
        try:
            result = sweep.for_spec(spec, *run_config.connection(config, self.s.project_dir), wanted=wanted)
        except sweep.SweepError as exc:
            note = (
                f"{exc}; objects a killed run made that the spec no longer wants may remain (the next up sweeps again)"
            )
            self.outcomes.append(Outcome(self.platform_stack, "sweep", "failed", note=note))
            raise StackError(f"{self.platform_stack}: sweep failed: {note}") from None
        for found in result.removed:
            self.s.log(
                f"sweep: removed {found} (labelled {sweep.LABEL_PLATFORM}={spec.cluster.name}, held by no stack)"
            )
        changes = {"delete": len(result.removed)} if result.removed else {}
        self.outcomes.append(Outcome(self.platform_stack, "sweep", "succeeded", changes, result.note()))

    def _offer_validated_spec(self, checked) -> validated_spec.Offer | None:
        """The spec this run validated, handed to every program it runs (gpupool.deploy.validated_spec), which
        then validates it no more; None (each program validates) when there is none or it cannot be written."""
        env = getattr(self.workspace, "env_vars", None)  # (the tests' stand-ins have none)
        if checked is None or checked[1].spec is None or env is None:
            return None
        offered = validated_spec.offer(self.s.project_dir, self.s.project_dir / checked[0], checked[1])
        if offered is not None:
            self.workspace.env_vars = {**env, **offered.env}
        return offered

    def _withdraw(self, offered: validated_spec.Offer) -> None:
        env = getattr(self.workspace, "env_vars", None) or {}
        self.workspace.env_vars = {k: v for k, v in env.items() if k not in offered.env}
        offered.withdraw()

    def _run_stacks(self, op: str, platform: auto.Stack, checked) -> None:
        create = op != "destroy"
        skipping = self.skipping(op)
        inputs_of = (
            self._setup(self.platform_stack, op, lambda: self.inputs(platform, checked))
            if op == "up" or skipping
            else None
        )
        last_updates = self._setup(self.platform_stack, op, lambda: self.last_updates(reuse=True)) if skipping else {}
        settled = (
            self._setup(self.platform_stack, op, lambda: self.settled_stacks(inputs_of, last_updates))
            if skipping
            else set()
        )
        runs = self._setup(
            self.platform_stack, op, lambda: self.layout(platform, op == "up" or skipping, checked, settled)
        )
        if runs is None:
            inputs = inputs_of(sharding.PLATFORM_ROLE) if inputs_of else None
            state = (
                (lambda: {})
                if self.platform_stack in settled
                else (lambda: exported_state(self.workspace, self.platform_stack) or {})
            )
            if skipping and self._setup(
                self.platform_stack,
                op,
                lambda: self.skipped(self.platform_stack, op, None, inputs, last_updates, state),
            ):
                return
            self.run_one(platform, op, record=inputs)
            return
        for r, keep in shard_moves.steps(op, runs):
            inputs = inputs_of(r.role) if inputs_of else None
            if keep is None and skipping:  # a release pass is a move: never skipped
                state = functools.partial(self._exported, r.stack)  # ({} for a settled stack: not read)
                skip = functools.partial(self.skipped, r.stack, op, r, inputs, last_updates, state)
                if self._setup(r.stack, op, skip):
                    continue
            if r.role.platform:
                stack = platform
            else:
                shard = functools.partial(self.configure_shard, r.stack, r.shard_value, platform, create)
                stack = self._setup(r.stack, op, shard)
            # a release pass that keeps all the stack is assigned was all of its run: its inputs hold after it
            whole = keep is None or set(keep) == set(r.assigned)
            self.run_one(stack, op, keep=keep, record=inputs if whole else None, checkpoints=r.role.platform)

    def _setup(self, name: str, op: str, action: Callable[[], T]) -> T:
        """ACTION (selecting or creating stack NAME, setting or reading its config); a failure is the stack's
        failed outcome and a StackError in one line, never the Automation API's exception."""
        try:
            return action()
        except auto.StackNotFoundError:
            note = msg.unknown_stack(name, self.s.backend_url, self.workspace.list_stacks)
        except auto.CommandError as exc:
            note = msg.reason(exc)
        except OSError as exc:
            note = msg.unrunnable(exc)
        self.outcomes.append(Outcome(name, op, "failed", note=note))
        raise StackError(f"{name}: {op} failed: {note}")


def _shard_value(role: sharding.Role) -> str:
    """A shard stack's `gpupool:shard` value (shard_moves.StackRun.shard_value)."""
    return "" if role.shard is None else sharding.shard_role(role.shard)
