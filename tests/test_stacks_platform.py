"""`gpupool stacks` over a platform's stacks (gpupool/deploy/stacks.py), with fake stacks in place of the
Automation API's (no toolchain): which stacks run, in which order and pass, with which config; the first
failure stops the run; a dead run's lock is cancelled only when every holder is gone; a torn sidecar is
removed before any stack is touched; completed pending operations are dropped; a killed pulumi is reported
as killed. These were ci/pulumi-stack.sh's unit tests (test_pulumi_stack_script.py, test_pulumi_stack_shards.py);
the real engine runs the same paths in tests/e2e/test_cli_path.py, test_crash_safety.py, test_sharding.py,
test_s3_backend.py and test_stacks_command.py.

The fakes raise what the Automation API raises: pulumi/automation/errors.py create_command_error makes a
ConcurrentUpdateError of a failed command whose stderr holds "the stack is currently locked by", and a
CommandError carries only str(CommandResult) ("\\n code: N\\n stdout: ...\\n stderr: ...", _cmd.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

pytest.importorskip("pulumi")

from pulumi import automation as auto  # noqa: E402

from gpupool.analysis import shard_moves  # noqa: E402
from gpupool.deploy import stack_inputs, stacks  # noqa: E402
from gpupool.model import sharding  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TENANTS = ["inference", "notebooks", "research"]
SPEC = "dev/spec.yaml"
FILE_LOCK_URL = "file:///state/.pulumi/locks/organization/p/dev/0b1c.json"
# As pulumi prints it for an s3:// backend (diy lockURLForError: the backend URL, query included).
S3_LOCK_URL = (
    "s3://gpupool-state/gpupool/.pulumi/locks/organization/p/dev/c7c36c1c.json"
    "?endpoint=http%3A%2F%2F127.0.0.1%3A34895&region=us-east-1&s3ForcePathStyle=true"
)


def _lock_text(host: str, pid: int, when: datetime | None = None, url: str = FILE_LOCK_URL) -> str:
    ts = (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or "
        "delete the lock file with `pulumi cancel`.\n"
        f"  {url}: created by ci@{host} (pid {pid}) at {ts}\n"
    )


def _failed(stderr: str, code: int = 1, stdout: str = "") -> auto.CommandResult:
    return auto.CommandResult(stdout=stdout, stderr=stderr, code=code)


class World:
    """The backend the fake stacks share: states, config, one lock, and every call in order."""

    def __init__(self, states: dict[str, list[str]] | None = None):
        self.states: dict[str, dict] = {}
        for stack, tenants in (states or {}).items():
            urn = f"urn:pulumi:{stack}::gpupool::gpupool:tenancy:Tenant::tenant-"
            resources = [{"urn": urn + t, "type": "gpupool:tenancy:Tenant"} for t in tenants]
            self.states[stack] = {"resources": resources}
        self.config: dict[str, dict[str, auto.ConfigValue]] = {}
        self.lock: str | None = None
        self.fail: dict[str, auto.CommandResult] = {}  # stack -> how its up/destroy fails
        self.calls: list[tuple] = []
        self.refreshes: list[tuple[str, str, dict]] = []  # (stack, refresh or preview_refresh, keywords)
        self.imported: dict[str, dict] = {}
        self.selected: list[tuple[str, bool]] = []  # (stack, was the sidecar torn then)
        self.torn: Path | None = None
        self.tags: dict[str, dict[str, str]] = {}  # stack -> its tags (gpupool.deploy.unchanged's record)
        self.updated: dict[str, int] = {}  # stack -> how many updates it had: its "last update" time
        self.tag_calls: list[tuple[str, str]] = []  # (list_tags, set_tag or remove_tag, stack), in order
        self.checkpoint_free: dict[str, str | None] = {}  # stack -> PULUMI_SKIP_CHECKPOINTS in its last up

    def list_stacks(self):
        return [
            SimpleNamespace(
                name=n, last_update=f"update {self.updated.get(n, 0)}", resource_count=len(s.get("resources") or [])
            )
            for n, s in self.states.items()
        ]

    def list_tags(self, stack):
        self.tag_calls.append(("list_tags", stack))
        return dict(self.tags.get(stack, {}))

    def set_tag(self, stack, key, value):
        self.tag_calls.append(("set_tag", stack))
        self.tags.setdefault(stack, {})[key] = value

    def remove_tag(self, stack, key):
        self.tag_calls.append(("remove_tag", stack))
        self.tags.get(stack, {}).pop(key, None)


class FakeStack:
    def __init__(self, world: World, platform: stacks.Platform, name: str):
        self.w, self.p, self.name = world, platform, name

    def _call(self, op: str, config_file: str | None = None, **extra) -> None:
        # A release pass's keep list is a setting of its run only: in the --config-file copy, never the stack file.
        keep = None
        if config_file:
            keep = (yaml.safe_load(Path(config_file).read_text())["config"] or {}).get(shard_moves.KEEP_KEY)
        self.w.calls.append((op, self.name, keep, *sorted(extra.items())))

    def get_all_config(self):
        return dict(self.w.config.get(self.name, {}))

    def set_all_config(self, config):
        self._call("config", keys=tuple(sorted(config)))
        self.w.config.setdefault(self.name, {}).update(config)

    def preview(self, **kw):
        self._call("preview", kw.get("config_file"), expect_no_changes=bool(kw.get("expect_no_changes")))
        return SimpleNamespace(stdout=f"preview of {self.name}\n", change_summary={"same": 3})

    def _state_changing(self, op: str, config_file: str | None = None):
        self._call(op, config_file)
        if self.w.lock is not None:
            raise auto.ConcurrentUpdateError(_failed(self.w.lock, 255))
        if self.name in self.w.fail:
            raise auto.CommandError(self.w.fail[self.name])
        self.w.states.setdefault(self.name, {"resources": []})
        self.w.updated[self.name] = self.w.updated.get(self.name, 0) + 1
        return SimpleNamespace(summary=SimpleNamespace(resource_changes={"same": 3, "update": 1}))

    def up(self, **kw):
        self.w.checkpoint_free[self.name] = self.p.workspace.env_vars.get("PULUMI_SKIP_CHECKPOINTS")
        return self._state_changing("up", kw.get("config_file"))

    def refresh(self, **kw):  # the read before an up (gpupool.deploy.stacks.Platform._read_cluster)
        self.w.refreshes.append((self.name, "refresh", kw))
        return SimpleNamespace(stdout="")

    def preview_refresh(self, **kw):  # a --refresh preview's drift section
        self.w.refreshes.append((self.name, "preview_refresh", kw))
        return SimpleNamespace(stdout=f"drift of {self.name}\n", change_summary={"same": 2, "delete": 1})

    def destroy(self, **kw):
        return self._state_changing("destroy", kw.get("config_file"))

    def cancel(self):
        self._call("cancel")
        self.w.lock = None

    def export_stack(self):
        return auto.Deployment(version=3, deployment=self.w.states.get(self.name, {}))

    def import_stack(self, deployment):
        self._call("import")
        self.w.imported[self.name] = deployment.deployment
        self.w.states[self.name] = deployment.deployment


class FakePlatform(stacks.Platform):
    def __init__(self, world: World, settings: stacks.Settings, name: str = "dev"):
        self.world = world
        workspace = SimpleNamespace(
            list_stacks=world.list_stacks,
            list_tags=world.list_tags,
            set_tag=world.set_tag,
            remove_tag=world.remove_tag,
            env_vars={},
            export_stack=lambda name: auto.Deployment(version=3, deployment=world.states.get(name, {})),
        )
        super().__init__(settings, name, workspace=workspace)  # type: ignore[arg-type]

    def sweep_cluster(self, platform, spec, wanted=True):  # the label sweep (tests/test_sweep.py): recorded here
        self.world.calls.append(("sweep", spec.cluster.name, "wanted" if wanted else "nothing wanted"))

    def select(self, name: str, create: bool = True):  # type: ignore[override]
        torn = self.world.torn
        self.world.selected.append((name, torn is not None and torn.exists()))
        if not create and name not in self.world.states:  # as `pulumi stack select` refuses it
            raise auto.StackNotFoundError(_failed(f"error: no stack named '{name}' found", 255))
        return FakeStack(self.world, self, name)


@pytest.fixture
def project(tmp_path) -> Path:
    """A project directory: Pulumi.yaml naming its virtualenv, which has a python, and the dev stack's spec."""
    d = tmp_path / "project"
    (d / "venv" / "bin").mkdir(parents=True)
    os.symlink(shutil.which("python3") or "/usr/bin/python3", d / "venv" / "bin" / "python")
    (d / "Pulumi.yaml").write_text("name: p\nruntime:\n  name: python\n  options:\n    virtualenv: venv\n")
    shutil.copytree(REPO / "stacks" / "dev", d / "dev")
    return d


def _shard(project: Path, shards: int) -> None:
    spec = project / SPEC
    spec.write_text(spec.read_text().replace("tenantFiles:", f"sharding:\n  tenantShards: {shards}\n\ntenantFiles:"))


def _platform(project: Path, world: World, tmp_path: Path, **settings) -> tuple[FakePlatform, list[str]]:
    logs: list[str] = []
    s = stacks.Settings(
        project_dir=project,
        backend_url=settings.pop("backend_url", f"file://{tmp_path / 'state'}?metadata=skip"),
        log=logs.append,
        output=lambda _: None,
        **settings,
    )
    world.config.setdefault("dev", {})["gpupool:spec"] = auto.ConfigValue(SPEC)
    return FakePlatform(world, s), logs


def _ops(world: World, op: str) -> list[tuple[str, str | None]]:
    return [(c[1], c[2]) for c in world.calls if c[0] == op]


# ---------------------------------------------------------------- a sharded platform


def test_switching_sharding_on_releases_everything_from_the_platform_stack_first(project, tmp_path):
    _shard(project, 2)
    world = World({"dev": TENANTS})
    world.config["dev"] = {"gpupool:probe": auto.ConfigValue("s3cr3t", secret=True)}
    p, logs = _platform(project, world, tmp_path)
    p.run("up")
    ups = _ops(world, "up")
    assert ups[0] == ("dev", "[]"), ups  # the release pass: dev keeps no tenant
    holders = {sharding.shard_stack("dev", sharding.shard_of(t, 2)) for t in TENANTS}
    assert sorted(ups[1:]) == sorted((s, None) for s in holders)  # then each shard with tenants, once
    assert ("dev", None) not in ups[1:]  # dev had nothing to add: its release pass was all of it
    for s in holders:  # the platform stack's config (a secret stays one), then its own role
        assert world.config[s]["gpupool:shard"].value == sharding.shard_role(int(s.rsplit("-", 1)[1]))
        assert world.config[s]["gpupool:spec"].value == SPEC
        assert world.config[s]["gpupool:probe"].secret and world.config[s]["gpupool:probe"].value == "s3cr3t"
    assert "up dev (release pass: only the tenants it keeps)" in logs
    # every up ended with the convergence check, and the summary has one line per stack
    assert [c[1] for c in world.calls if c[0] == "preview"] == [s for s, _ in ups]
    assert all(("expect_no_changes", True) in c for c in world.calls if c[0] == "preview")
    assert [o.stack for o in p.outcomes] == [s for s, _ in ups]
    assert all(o.line().endswith("(1 update; converged)") for o in p.outcomes), stacks.summary(p.outcomes)


def test_no_move_is_one_pass_without_a_keep_list(project, tmp_path):
    _shard(project, 2)
    holdings: dict[str, list[str]] = {"dev": []}
    for k, names in sharding.assignment(TENANTS, 2).items():
        if names:
            holdings[sharding.shard_stack("dev", k)] = names
    world = World(holdings)
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    ups = _ops(world, "up")
    assert ups[0] == ("dev", None) and all(keep is None for _, keep in ups)
    assert sorted(s for s, _ in ups) == sorted(holdings)


def test_tenant_shards_run_up_without_checkpoints_and_the_platform_stack_with_them(project, tmp_path):
    """A shard holds only objects the provider upserts, so its up may skip the per-step checkpoints; the platform
    stack's Helm release and rollout steps may not. The sweep follows every stack, once (gpupool.deploy.sweep)."""
    _shard(project, 2)
    world = World({"dev": TENANTS})  # a move: the release pass of dev, then the shards' apply pass
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    shards = [s for s, _ in _ops(world, "up") if s != "dev"]
    assert shards and world.checkpoint_free == {"dev": None, **{s: "true" for s in shards}}, world.checkpoint_free
    assert "PULUMI_SKIP_CHECKPOINTS" not in p.workspace.env_vars  # only for the shards' runs
    assert [c for c in world.calls if c[0] == "sweep"] == [("sweep", "dev", "wanted")]
    assert world.calls[-1][0] == "sweep"  # after the last stack's convergence check


def test_a_failed_stack_means_no_sweep(project, tmp_path):
    world = World()
    world.fail["dev"] = _failed("error: update failed")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError):
        p.run("up")
    assert not [c for c in world.calls if c[0] == "sweep"]  # a stack's leftovers are its rerun's to adopt


def test_the_sweep_reads_the_cluster_the_program_is_given(project):
    from gpupool.deploy import run_config, stack_inputs

    saved = {"gpupool:kubeconfig": ("kube/config", True), "gpupool:context": ("ci", False)}
    config = stack_inputs.run_config(saved, {}, "p")
    assert run_config.connection(config, project) == (str(project / "kube" / "config"), "ci")  # the program's cwd
    config = stack_inputs.run_config(saved, {"gpupool:context": "laptop", "gpupool:kubeconfig": "/etc/k"}, "p")
    assert run_config.connection(config, project) == ("/etc/k", "laptop")  # -c wins, as in the program
    contents = "apiVersion: v1\nkind: Config\n"
    assert run_config.connection({"gpupool:kubeconfig": (contents, True)}, project) == (contents, None)
    assert run_config.connection({}, project) == (None, None)  # the ambient $KUBECONFIG, as for the provider


def test_the_sweep_s_outcome_names_what_it_removed_and_a_failed_sweep_fails_the_run(project, tmp_path, monkeypatch):
    from gpupool.deploy import sweep
    from gpupool.rules.engine import load_valid_spec

    world = World()
    p, logs = _platform(project, world, tmp_path)
    spec = load_valid_spec(project / SPEC)
    binding = sweep.Found(next(k for k in sweep.KINDS if k.kind == "RoleBinding"), "gone", "owners", "u1", False, True)
    got: list[tuple] = []

    def swept(spec_, kubeconfig, context, wanted=True):
        got.append((spec_.cluster.name, kubeconfig, context))
        return sweep.Result([binding], [], retained=2)

    monkeypatch.setattr(sweep, "for_spec", swept)
    world.config["dev"]["gpupool:kubeconfig"] = auto.ConfigValue("/k/config")
    stacks.Platform.sweep_cluster(p, p.select("dev"), spec)
    assert got == [("dev", "/k/config", None)]
    assert "sweep: removed RoleBinding gone/owners (labelled gpupool.dev/platform=dev, held by no stack)" in logs
    assert p.outcomes[-1].line() == (
        "dev: sweep succeeded (1 delete; removed what no stack holds: RoleBinding gone/owners; "
        "2 retained on delete, left as Pulumi leaves them)"
    )

    def refused(*_, **__):
        raise sweep.SweepError("listing rolebindings labelled gpupool.dev/platform=dev answered HTTP 403")

    monkeypatch.setattr(sweep, "for_spec", refused)
    with pytest.raises(stacks.StackError, match="dev: sweep failed: listing rolebindings .* HTTP 403; objects a"):
        stacks.Platform.sweep_cluster(p, p.select("dev"), spec)
    assert p.outcomes[-1].result == "failed" and "the next up sweeps again" in p.outcomes[-1].note


def test_backend_reads_run_several_at_once_and_a_quiet_failure_is_left_to_its_caller():
    import threading

    from gpupool.deploy.workspace import READERS, read_each

    inside, most, lock = 0, 0, threading.Lock()
    release = threading.Barrier(READERS, timeout=10)

    def read(name: str) -> str:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        release.wait()  # every reader of the first batch is in at once, or this times out
        with lock:
            inside -= 1
        if name == "broken":
            raise auto.CommandError(_failed("error: could not read", 255))
        return name.upper()

    names = [f"s{i}" for i in range(READERS - 1)] + ["broken"]
    assert read_each(names, read, quiet=True) == {n: n.upper() for n in names[:-1]}
    assert most == READERS
    with pytest.raises(auto.CommandError):
        read_each(names, read)


def test_a_failed_release_pass_stops_the_run_before_any_shard_adopts(project, tmp_path):
    _shard(project, 2)
    world = World({"dev": TENANTS})
    world.fail["dev"] = _failed("error: update failed")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError, match="dev: up failed: error: update failed"):
        p.run("up")
    assert _ops(world, "up") == [("dev", "[]")], world.calls
    assert stacks.summary(p.outcomes) == "dev: up failed (error: update failed)\n"
    assert not any(shard_moves.KEEP_SETTING in k for k in p.env)  # the keep list is no environment variable
    stack_file = project / "Pulumi.dev.yaml"  # nor in the stack file
    assert not stack_file.exists() or shard_moves.KEEP_SETTING not in stack_file.read_text()


def test_a_failed_shard_stops_the_later_ones(project, tmp_path):
    _shard(project, 3)
    world = World({"dev": []})
    first = next(sharding.shard_stack("dev", k) for k, n in sharding.assignment(TENANTS, 3).items() if n)
    world.fail[first] = _failed("error: update failed")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError):
        p.run("up")
    assert _ops(world, "up")[-1] == (first, None)


def test_destroy_takes_the_shards_first_and_the_platform_last(project, tmp_path):
    _shard(project, 2)
    world = World({"dev": [], "dev.tenants-0": [], "dev.tenants-1": [], "dev.tenants-4": []})
    p, _ = _platform(project, world, tmp_path)
    p.run("destroy")
    destroys = [s for s, _ in _ops(world, "destroy")]
    assert destroys == ["dev.tenants-4", "dev.tenants-1", "dev.tenants-0", "dev"]
    # then the sweep, wanting nothing: what a killed checkpoint-free run made and no state recorded goes too
    assert world.calls[-1] == ("sweep", "dev", "nothing wanted")


def test_preview_covers_every_stack_and_collects_one_comment(project, tmp_path):
    _shard(project, 2)
    world = World({"dev": TENANTS, "dev.tenants-7": []})
    out = tmp_path / "preview.txt"
    out.write_text("an old comment\n")
    p, _ = _platform(project, world, tmp_path, preview_out=out)
    p.run("preview")
    previews = [s for s, _ in _ops(world, "preview")]
    assert previews[0] == "dev" and "dev.tenants-7" in previews  # a left-over shard releases
    assert out.read_text() == "".join(f"preview of {s}\n" for s in previews)
    assert not _ops(world, "up") and not world.imported


def test_the_pass_order_is_one_pure_function():
    """shard_moves.steps, which the runner walks: release passes first, destroy in reverse."""
    tenants = ["a", "b", "c", "d"]
    states = {"dev": {"deployment": {"resources": []}}}
    urn = "urn:pulumi:dev::gpupool::gpupool:tenancy:Tenant::tenant-"
    states["dev"]["deployment"]["resources"] = [{"urn": urn + t, "type": "gpupool:tenancy:Tenant"} for t in tenants]
    runs = shard_moves.stack_runs("dev", tenants, 2, states)
    up = shard_moves.steps("up", runs)
    assert up[0][0].stack == "dev" and up[0][1] == () and all(keep is None for _, keep in up[1:])
    assert [r.stack for r, _ in shard_moves.steps("destroy", runs)] == ["dev"]  # only what exists
    assert [r.stack for r, _ in shard_moves.steps("preview", runs)] == ["dev", "dev.tenants-0", "dev.tenants-1"]
    with pytest.raises(ValueError):
        shard_moves.steps("refresh", runs)


# ---------------------------------------------------------------- one stack: dead-run recovery


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_no_lock_runs_up_then_the_convergence_preview(project, tmp_path):
    world = World()
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert [c[0] for c in world.calls] == ["up", "preview", "sweep"], world.calls
    assert world.calls[1][-1] == ("expect_no_changes", True)
    assert stacks.summary(p.outcomes) == "dev: up succeeded (1 update; converged)\n"


def test_the_venv_from_pulumi_yaml_comes_first_on_path(project, tmp_path):
    p, _ = _platform(project, World(), tmp_path)
    assert p.env["PATH"].split(os.pathsep)[0] == str(project / "venv" / "bin")
    assert p.env["VIRTUAL_ENV"] == str(project / "venv") and p.env["PULUMI_BACKEND_URL"].startswith("file://")
    (project / "venv" / "bin" / "python").unlink()
    with pytest.raises(stacks.SetupError, match="has no bin/python"):
        stacks.project_env(project)


def test_a_project_directory_that_is_itself_a_virtualenv_is_refused_and_left_as_it_is(project, tmp_path):
    """What an old language host's `pulumi install` leaves (pyvenv.cfg and bin/ at the project's top, beside a
    good venv or not): refused with the command that installs right, nothing removed."""
    (project / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project / "bin").mkdir()
    with pytest.raises(stacks.SetupError) as err:
        stacks.project_env(project)
    message = str(err.value)
    assert f"{project} is itself a virtualenv" in message
    assert "python3 -m venv venv && venv/bin/pip install -r requirements.txt" in message
    assert (project / "pyvenv.cfg").is_file() and (project / "bin").is_dir()
    # A project whose Pulumi.yaml names the directory itself as its virtualenv meant it.
    (project / "Pulumi.yaml").write_text("name: p\nruntime:\n  name: python\n  options:\n    virtualenv: .\n")
    (project / "bin" / "python").symlink_to(sys.executable)
    assert stacks.project_env(project)["VIRTUAL_ENV"] == str(project / ".")


def test_a_dead_holder_s_lock_on_this_host_is_cancelled_and_up_retried(project, tmp_path):
    world = World()
    world.lock = _lock_text(socket.gethostname(), _dead_pid())
    p, logs = _platform(project, world, tmp_path)
    p.run("up")
    assert [c[0] for c in world.calls] == ["up", "cancel", "up", "preview", "sweep"], world.calls
    assert any("stale lock: created by ci@" in line and "(holder gone)" in line for line in logs), logs
    assert "dev: cancelling the dead run's lock (pulumi cancel) and retrying" in logs


def test_a_pid_reused_by_another_program_counts_as_dead(project, tmp_path):
    world = World()
    world.lock = _lock_text(socket.gethostname(), os.getpid())  # alive, but python, not pulumi
    p, _ = _platform(project, world, tmp_path)
    p.run("up")
    assert ("cancel", "dev", None) in world.calls


def test_a_live_pulumi_holder_s_lock_is_never_touched(project, tmp_path):
    live = tmp_path / "live" / "pulumi"  # a process whose name is `pulumi`
    live.parent.mkdir()
    shutil.copy(shutil.which("sleep") or "/bin/sleep", live)
    holder = subprocess.Popen([str(live), "30"])
    try:
        time.sleep(1.2)
        world = World()
        world.lock = _lock_text(socket.gethostname(), holder.pid)
        p, logs = _platform(project, world, tmp_path)
        with pytest.raises(stacks.StackError) as err:
            p.run("up")
    finally:
        holder.kill()
        holder.wait()
    assert [c[0] for c in world.calls] == ["up"], world.calls  # no cancel, no retry, no preview
    assert any(line.startswith("dev: live lock: created by ci@") for line in logs), logs
    assert "locked by a live run" in str(err.value) and "the stack is currently locked by 1 lock(s)" in str(err.value)
    assert stacks.summary(p.outcomes).startswith("dev: up failed (locked by a live run, ci@")
    assert world.lock is not None


def test_a_foreign_host_s_lock_is_cancelled_only_for_a_single_writer(project, tmp_path):
    world = World()
    world.lock = _lock_text("runner-that-is-gone", 4242)
    p, logs = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError, match="--single-writer"):
        p.run("up")
    assert "cancel" not in [c[0] for c in world.calls]
    assert "dev: live lock: created by ci@runner-that-is-gone (pid 4242) at " in logs[-1], logs
    world.calls.clear()
    p, _ = _platform(project, world, tmp_path, single_writer=True)
    p.run("up")
    assert [c[0] for c in world.calls] == ["up", "cancel", "up", "preview", "sweep"], world.calls


def test_the_s3_backend_s_lock_lines_are_read_the_same(project, tmp_path):
    """The holder line of an s3:// backend names a URL with a query string; the holder is still found."""
    s3 = "s3://gpupool-state/gpupool?endpoint=http://127.0.0.1:34895&s3ForcePathStyle=true"
    world = World()
    world.lock = _lock_text(socket.gethostname(), _dead_pid(), url=S3_LOCK_URL)
    p, logs = _platform(project, world, tmp_path, backend_url=s3)
    p.run("up")
    assert [c[0] for c in world.calls] == ["up", "cancel", "up", "preview", "sweep"], world.calls
    assert any(f"created by ci@{socket.gethostname()} (pid" in line and "holder gone" in line for line in logs)
    world.calls.clear()
    world.lock = _lock_text("runner-that-is-gone", 4242, url=S3_LOCK_URL)
    # all_stacks: dev's inputs are unchanged since that up, which would skip it before it met the lock
    p, logs = _platform(project, world, tmp_path, backend_url=s3, all_stacks=True)
    with pytest.raises(stacks.StackError):
        p.run("up")
    assert "dev: live lock: created by ci@runner-that-is-gone (pid 4242) at " in logs[-1], logs
    p, _ = _platform(project, world, tmp_path, backend_url=s3, single_writer=True, all_stacks=True)
    p.run("up")
    assert [c[0] for c in world.calls].count("cancel") == 1


def test_a_torn_metadata_sidecar_is_removed_before_any_stack_is_touched(project, tmp_path):
    """With a torn sidecar every pulumi command fails, `stack ls` and `stack select` included: the repair
    comes first, for preview too."""
    state = tmp_path / "state" / ".pulumi" / "stacks" / "p"
    state.mkdir(parents=True)
    torn, ok = state / "dev.json.attrs", state / "prod.json.attrs"
    (state / "dev.json").write_text("{}")  # the blob the sidecar describes (a sidecar without one breaks nothing)
    torn.write_bytes(b"")
    ok.write_text('{"user.cache_control":"","user.content_type":"application/octet-stream"}\n')
    world = World()
    world.torn = torn
    p, logs = _platform(project, world, tmp_path, backend_url=f"file://{tmp_path / 'state'}")
    p.run("preview")
    assert not torn.exists() and ok.exists()
    assert world.selected and not any(was_torn for _, was_torn in world.selected), world.selected
    assert logs[0].startswith(f"removing torn metadata sidecar {torn}"), logs


def test_a_failure_that_is_not_a_lock_is_not_retried(project, tmp_path):
    world = World()
    world.fail["dev"] = _failed("warning: x\nerror: update failed")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError):
        p.run("up")
    assert [c[0] for c in world.calls] == ["up"], world.calls


def test_a_killed_pulumi_is_reported_as_killed_not_as_an_error(project, tmp_path):
    """SIGKILL of the pulumi CLI (a cancelled job): the run failed because it died, not on an error of its
    own (test_crash_safety.py asserts that the killed run printed no `error:`)."""
    world = World()
    world.fail["dev"] = _failed("", code=-9, stdout="Updating (dev):\n  + namespace research creating")
    p, _ = _platform(project, world, tmp_path)
    with pytest.raises(stacks.StackError) as err:
        p.run("up")
    assert str(err.value) == "dev: up failed: pulumi up was killed by SIGKILL"
    assert "error:" not in stacks.summary(p.outcomes)


def test_pending_operations_the_rerun_completed_are_dropped_and_others_left(project, tmp_path):
    world = World({"dev": []})
    done = {"resource": {"urn": "urn:a"}, "type": "creating"}
    world.states["dev"] = {"resources": [{"urn": "urn:a"}], "pending_operations": [done]}
    p, logs = _platform(project, world, tmp_path)
    p.run("up")
    assert world.imported["dev"]["pending_operations"] == []
    assert [c[0] for c in world.calls] == ["up", "import", "preview", "sweep"], world.calls
    orphan = {"resource": {"urn": "urn:b"}, "type": "creating"}
    world.states["dev"] = {"resources": [{"urn": "urn:a"}], "pending_operations": [orphan]}
    world.updated["dev"] += 1  # a dead run's checkpoint: on a file backend it moves the listed last update
    world.imported.clear()
    p, logs = _platform(project, world, tmp_path)
    p.run("up")
    assert not world.imported and any("urn:b" in line and "pulumi refresh" in line for line in logs), logs
    # That state is not recorded, so the next run runs the stack again rather than skip it unread.
    assert any(line.startswith("dev: not recorded: its state has pending operations") for line in logs), logs
    assert stack_inputs.TAG not in world.tags.get("dev", {})


def test_the_layout_s_exports_leave_secrets_encrypted():
    """Workspace.export_stack adds --show-secrets, which decrypts every secret of the state; the layout and the
    skip decision read none, so gpupool asks for the export without it (through the workspace's own command,
    home and environment)."""
    from gpupool.deploy.workspace import exported_state

    calls: list[tuple] = []

    class Command:
        def run(self, args, cwd, env):
            calls.append((args, cwd, env))
            return SimpleNamespace(stdout='{"version": 3, "deployment": {"resources": []}}')

    ws = SimpleNamespace(
        pulumi_command=Command(), work_dir="/p", pulumi_home="/h", env_vars={"PULUMI_BACKEND_URL": "s3://b"}
    )
    assert exported_state(ws, "dev.tenants-3") == {"resources": []}
    assert calls == [
        (["stack", "export", "--stack", "dev.tenants-3"], "/p", {"PULUMI_HOME": "/h", "PULUMI_BACKEND_URL": "s3://b"})
    ]
