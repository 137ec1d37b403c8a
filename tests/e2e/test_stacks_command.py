"""`gpupool stacks preview|up|destroy STACK` end to end: the Automation API driving the project's own program
(Pulumi.yaml, its virtualenv, __main__.py) through the real pulumi CLI, language host and provider, against
a local API server, on the file backend.

What it proves: an up from empty converges (state == cluster, and the command's own
`preview --expect-no-changes` passed); a preview then plans nothing; a second `up` while a run holds the
lock is refused without touching it, and once the holder is dead the next `up` recovers the run SIGKILLed
holding its lock from the typed ConcurrentUpdateError (the lock cancelled, the killed run's edit applied,
converged); a
lock from another host is left alone unless --single-writer vouches for it; once sharded, a second `up`
after a one-tenant edit runs only that tenant's shard stack and skips the others as unchanged (their
recorded inputs, a stack tag in the file backend, still match), while `--all` takes every stack; destroy
keeps the tenants. The other tests pass `--all` (tests/e2e/cli.py), as they were written for runs that take
every stack. One summary line per stack. The kills are triggered by events (the lock file appearing), not by timers.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import UTC

import pytest

from .cli import CliProject, cluster_objects, sigkill_pulumi, state_objects, tenant_labelled
from .faults import wait_for

pytestmark = pytest.mark.e2e

DEV_NODES = {
    "dev-gpu-l4-1": {"nvidia.com/gpu.shared": "16"},
    "dev-gpu-a100-1": {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"},
}


@pytest.fixture(scope="module")
def cluster(private_control_plane):
    for name, resources in DEV_NODES.items():
        private_control_plane.create_gpu_node(name, resources)
    return private_control_plane


@pytest.fixture(scope="module")
def project(cluster, cli_toolchain_bin, tmp_path_factory) -> CliProject:
    return CliProject(cli_toolchain_bin, cluster.kubeconfig, tmp_path_factory.mktemp("stacks-cmd"))


def _converged(project: CliProject, cluster, run: subprocess.CompletedProcess) -> None:
    assert run.returncode == 0, run.stdout[-6000:]
    assert re.search(r"^dev: up succeeded \(.*converged\)$", run.stdout, re.M), run.stdout[-3000:]
    state = project.export()
    assert not state["deployment"].get("pending_operations"), state["deployment"]["pending_operations"]
    assert sorted(state_objects(state)) == sorted(cluster_objects(cluster))
    assert not project.lock_files()


def test_up_from_empty_converges_and_preview_then_plans_nothing(project, cluster):
    up = project.run("up")
    _converged(project, cluster, up)
    quota = cluster.get_json("resourcequota", "gpu-quota", "-n", "research")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "8"
    preview = project.run("preview")
    assert preview.returncode == 0, preview.stdout[-3000:]
    assert re.search(r"^dev: preview succeeded \(no changes\)$", preview.stdout, re.M), preview.stdout[-3000:]


def test_a_lock_held_by_a_live_pulumi_is_refused_and_left_alone(project, cluster, tmp_path):
    """A run that is still going (on this host: a live process named pulumi that started before it took
    the lock) keeps its lock: the second `up` is refused by the engine's ConcurrentUpdateError, exits 1,
    changes nothing and leaves the lock. The holder is made deterministic: a killed run's real lock file,
    rewritten to name a live `pulumi` process (a copy of sleep) and a time after that process started."""
    import os
    import shutil
    import socket
    from datetime import datetime

    # The edit the killed run was making lands with the run that recovers its lock, at the end.
    project.edit("stacks/dev/tenants/research.yaml", "nvidia.com/gpu.shared: 8", "nvidia.com/gpu.shared: 6")
    up = project.start("up")
    wait_for(lambda: project.lock_files(), 300, "the up's lock", up)
    sigkill_pulumi(up)
    (path,) = project.lock_files()
    fake = tmp_path / "pulumi"
    shutil.copy(shutil.which("sleep"), fake)
    holder = subprocess.Popen([str(fake), "300"])
    try:
        time.sleep(1.2)
        lock = json.loads(path.read_text())
        lock.update(pid=holder.pid, hostname=socket.gethostname(), timestamp=datetime.now(UTC).isoformat())
        path.write_text(json.dumps(lock))
        before = project.export()["deployment"].get("resources")
        second = project.run("up")
        assert second.returncode == 1, second.stdout[-3000:]
        assert "locked by a live run" in second.stdout and "stale lock" not in second.stdout, second.stdout[-3000:]
        assert re.search(r"^dev: up failed \(locked by a live run", second.stdout, re.M), second.stdout[-3000:]
        assert project.lock_files() == [path] and json.loads(path.read_text())["pid"] == holder.pid
        assert project.export()["deployment"].get("resources") == before
    finally:
        holder.kill()
        holder.wait()
    assert os.path.exists(path)
    recovered = project.run("up")  # the holder is gone now: its lock is a dead run's
    assert "stale lock" in recovered.stdout and "holder gone" in recovered.stdout, recovered.stdout[-3000:]
    _converged(project, cluster, recovered)
    quota = cluster.get_json("resourcequota", "gpu-quota", "-n", "research")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "6"


def test_a_foreign_lock_needs_single_writer(project, cluster):
    """A lock that names another host: nobody here can tell whether that run is alive, so it is refused;
    the deploy job's --single-writer (its concurrency group) vouches that it is a dead run's."""
    up = project.start("up")
    wait_for(lambda: project.lock_files(), 300, "the up's lock", up)
    sigkill_pulumi(up)
    (path,) = project.lock_files()
    lock = json.loads(path.read_text())
    path.write_text(json.dumps({**lock, "hostname": "runner-that-is-gone"}))
    refused = project.run("up")
    assert refused.returncode == 1 and "runner-that-is-gone" in refused.stdout, refused.stdout[-3000:]
    assert "--single-writer" in refused.stdout and project.lock_files() == [path]
    started = time.monotonic()
    vouched = project.run("up", env={"GPUPOOL_SINGLE_WRITER": "1"})
    assert "stale lock" in vouched.stdout, vouched.stdout[-3000:]
    _converged(project, cluster, vouched)
    assert time.monotonic() - started < 600


TENANTS = ("inference", "notebooks", "research")


def _tenant_objects(cluster) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every live object labelled with a tenant: namespaces, quotas, limit ranges,
    RoleBindings and the per-tenant admission policies and bindings."""
    return {(i["kind"], i["metadata"].get("namespace", ""), i["metadata"]["name"]) for i in tenant_labelled(cluster)}


def _uids(cluster, kind: str) -> dict[str, str]:
    """Tenant -> the uid of its namespace, or of its owners' RoleBinding (tenant-owners-<ownerRole>)."""
    if kind == "namespace":
        return {t: cluster.get_json("namespace", t)["metadata"]["uid"] for t in TENANTS}
    out = {}
    for t in TENANTS:
        items = cluster.get_json("rolebindings", "-n", t)["items"]
        owners = [i for i in items if i["metadata"]["name"].startswith("tenant-owners-")]
        if owners:
            out[t] = owners[0]["metadata"]["uid"]
    return out


def test_switching_sharding_on_moves_every_tenant_in_two_passes(project, cluster):
    """The platform stack releases its tenants first (it forgets the retained objects, deletes the
    RoleBindings), then each shard stack creates what it holds: no namespace is ever deleted, and each
    stack's state ends up holding exactly the tenants `gpupool shards` assigns it."""
    from gpupool.analysis import shard_moves
    from gpupool.model import sharding

    namespaces = _uids(cluster, "namespace")
    objects = _tenant_objects(cluster)
    assert {k for k, _, _ in objects} >= {"Namespace", "ResourceQuota", "RoleBinding", "ValidatingAdmissionPolicy"}
    project.edit("stacks/dev/spec.yaml", "tenantFiles:", "sharding:\n  tenantShards: 2\n\ntenantFiles:")
    up = project.run("up")
    assert up.returncode == 0, up.stdout[-6000:]
    assert "up dev (release pass" in up.stdout, up.stdout[-4000:]
    for stack in ("dev", "dev.tenants-0", "dev.tenants-1"):
        assert re.search(rf"^{re.escape(stack)}: up succeeded \(.*converged\)$", up.stdout, re.M), up.stdout[-3000:]
    assert _uids(cluster, "namespace") == namespaces
    # Every tenant object is there after the move, the admission policies too (the RoleBindings were recreated).
    assert _tenant_objects(cluster) == objects
    assert set(_uids(cluster, "rolebinding")) == set(TENANTS)
    assert shard_moves.held_in_state(project.export("dev")) == set()
    for k in (0, 1):
        held = shard_moves.held_in_state(project.export(f"dev.tenants-{k}"))
        assert held == set(sharding.held_by(sharding.Role(False, k), list(TENANTS), 2)), (k, held)
    again = project.run("preview")
    assert again.returncode == 0 and again.stdout.count("preview succeeded (no changes)") == 3, again.stdout[-3000:]


def test_a_one_tenant_edit_runs_its_shard_only_and_all_runs_every_stack(project, cluster):
    """Proves the skip end to end on the real CLI and file backend, after the sharding test's up recorded
    every stack's inputs: an owner added to research changes only research's shard stack, which runs and
    converges (the RoleBinding has the new group), while the platform stack and the other shard are skipped
    with the reason; `preview --all` then takes all three again. Costs one shard's up and three previews."""
    from gpupool.model import sharding

    home = sharding.shard_stack("dev", sharding.shard_of("research", 2))
    project.edit("stacks/dev/tenants/research.yaml", "research-students]", "research-students, research-interns]")
    up = project.run("up", all_stacks=False)
    assert up.returncode == 0, up.stdout[-6000:]
    ran = re.findall(r"^(\S+): up succeeded \(.*converged\)$", up.stdout, re.M)
    skipped = re.findall(
        r"^(\S+): up skipped \(unchanged since its last successful up \(inputs sha256:[0-9a-f]{12}\)", up.stdout, re.M
    )
    assert ran == [home], up.stdout[-3000:]
    assert sorted(skipped) == sorted({"dev", "dev.tenants-0", "dev.tenants-1"} - {home}), up.stdout[-3000:]
    subjects = {
        s["name"]
        for rb in cluster.get_json("rolebindings", "-n", "research")["items"]
        if rb["metadata"]["name"].startswith("tenant-owners-")
        for s in rb.get("subjects") or []
    }
    assert "research-interns" in subjects, subjects
    every = project.run("preview", all_stacks=True)
    assert every.returncode == 0 and every.stdout.count("preview succeeded (no changes)") == 3, every.stdout[-3000:]


def test_destroy_takes_the_shards_first_and_keeps_the_tenants(project, cluster):
    down = project.run("destroy")
    assert down.returncode == 0, down.stdout[-4000:]
    order = re.findall(r"^(\S+): destroy succeeded", down.stdout, re.M)
    assert order and order[-1] == "dev" and set(order) == {"dev", "dev.tenants-0", "dev.tenants-1"}, order
    assert cluster.get_json("namespace", "research")["metadata"]["name"] == "research"
    assert not project.export()["deployment"].get("resources")
