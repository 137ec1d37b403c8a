"""Crash safety of the deploy path (``ci/pulumi-stack.sh up``) by fault injection against the real engine,
the real provider and a real API server, on a generated stack (``GPUPOOL_FAULT_TENANTS`` tenants in 10
pools: 30 by default, about 270 resources; 100 gives about 720).

Faults: SIGKILL of the ``pulumi up`` process in the middle of creating the stack, in the middle of
updating it, right after it took the lock, late in an update, and in the middle of deleting (the lock and
the pending operations of a dead run stay behind), a crash-restart of
kube-apiserver in the middle of an up, and a second concurrent up. (A torn metadata sidecar of the file backend
is test_cli_path.py's.) After each, the script must converge without a person: exit 0, ``preview --expect-no-changes``
passes (the script runs it), every object gpupool manages is in the cluster exactly as often as in the
state (no orphan, no duplicate), and no tenant namespace or quota is lost.

Each test builds on the stack the previous one left (module scope, in order).
"""

from __future__ import annotations

import os

import pytest
import yaml

from bench.bench_validate import POOL_KINDS, generate

from .cli import CliProject, sigkill_pulumi
from .cluster import ControlPlane
from .faults import assert_converged, count, limit_ranges_with, set_request_memory, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

# 30 tenants (about 270 resources) keep the module at a few minutes on 2 busy cores; the 100 is
# GPUPOOL_FAULT_TENANTS=100.
TENANTS = int(os.environ.get("GPUPOOL_FAULT_TENANTS", "30"))
SPEC = "stacks/fault/spec.yaml"


@pytest.fixture(scope="module")
def cluster(private_control_plane):
    """A control plane of its own: these tests crash and restart its API server."""
    return private_control_plane


@pytest.fixture(scope="module")
def spec_doc(cluster) -> dict:
    doc = generate(TENANTS, 10)
    for i, pool in enumerate(doc["nodePools"]):
        for node in pool["nodes"]:
            cluster.create_gpu_node(node, {k: str(v) for k, v in POOL_KINDS[i % len(POOL_KINDS)][4].items()})
    return doc


@pytest.fixture(scope="module")
def project(cluster, spec_doc, cli_toolchain_bin, tmp_path_factory) -> CliProject:
    p = CliProject(cli_toolchain_bin, cluster.kubeconfig, tmp_path_factory.mktemp("fault"), stack="fault", spec=SPEC)
    p.write(SPEC, yaml.safe_dump(spec_doc, sort_keys=False, width=120))
    return p


def test_sigkill_in_the_middle_of_the_first_up_then_rerun_converges(project, cluster, spec_doc):
    up = project.start("up")
    want = max(1, TENANTS // 5)
    wait_for(lambda: count(cluster, "namespaces") >= want, 600, f"{want} namespaces", up)
    sigkill_pulumi(up)
    assert up.returncode != 0
    assert project.lock_files(), "the killed run left no lock: the fault did not hit an update"
    # Namespaces are created first and fast, so they are no measure of "mid-up"; every tenant object is.
    kinds = "namespaces,resourcequotas,limitranges,rolebindings"
    created = count(cluster, kinds)
    rerun = project.run("up")
    assert "cancelling the dead run's lock" in rerun.stdout, rerun.stdout[-4000:]
    assert_converged(project, cluster, spec_doc, rerun)
    assert created < count(cluster, kinds), "the kill came too late: the first up had created everything"
    # The recommended file-backend URL writes no metadata sidecars (nothing there to tear).
    assert not list(project.state.rglob("*.attrs"))


def test_sigkill_in_the_middle_of_an_update_then_rerun_converges(project, cluster, spec_doc):
    set_request_memory(project, spec_doc, "2Gi")
    up = project.start("up")
    wait_for(lambda: limit_ranges_with(cluster, "2Gi") >= TENANTS // 4, 600, "a quarter of the updates", up)
    sigkill_pulumi(up)
    assert limit_ranges_with(cluster, "2Gi") < TENANTS, "the kill came too late"
    rerun = project.run("up")
    assert_converged(project, cluster, spec_doc, rerun)
    assert limit_ranges_with(cluster, "2Gi") == TENANTS


def test_api_server_crash_restart_in_the_middle_of_an_up_then_rerun_converges(project, cluster, spec_doc):
    set_request_memory(project, spec_doc, "3Gi")
    up = project.start("up")
    wait_for(lambda: limit_ranges_with(cluster, "3Gi") >= TENANTS // 4, 600, "a quarter of the updates", up)
    cluster.restart("kube-apiserver", down_seconds=3)
    up.wait(timeout=900)
    first = CliProject.output(up)
    rerun = project.run("up")
    assert_converged(project, cluster, spec_doc, rerun)
    assert limit_ranges_with(cluster, "3Gi") == TENANTS, first[-3000:]


def test_a_concurrent_second_up_is_refused_by_the_lock_and_changes_nothing(project, cluster, spec_doc):
    set_request_memory(project, spec_doc, "4Gi")
    first = project.start("up")
    wait_for(lambda: project.lock_files(), 300, "the first up's lock", first)
    lock = project.lock_files()
    second = project.run("up")
    assert second.returncode != 0
    assert "the stack is currently locked" in second.stdout, second.stdout[-3000:]
    assert "live lock" in second.stdout and "cancelling" not in second.stdout, second.stdout[-3000:]
    assert project.lock_files() == lock, "the refused up touched the running up's lock"
    assert first.wait(timeout=900) == 0, CliProject.output(first)[-4000:]
    assert_converged(project, cluster, spec_doc, first)
    assert limit_ranges_with(cluster, "4Gi") == TENANTS


# More kill points: before the first step, late in an update, and in the middle of deleting.


def test_sigkill_right_after_the_lock_is_taken_then_rerun_converges(project, cluster, spec_doc):
    """The run dies holding the lock before (or just as) its first step starts: nothing to redo but the lock."""
    set_request_memory(project, spec_doc, "1Gi")
    up = project.start("up")
    wait_for(lambda: project.lock_files(), 300, "the up's lock", up)
    sigkill_pulumi(up)
    assert "error:" not in CliProject.output(up), CliProject.output(up)[-3000:]  # it died, it did not fail
    assert project.lock_files(), "the killed run left no lock"
    assert limit_ranges_with(cluster, "1Gi") < TENANTS, "the kill came too late"
    rerun = project.run("up")
    assert "cancelling the dead run's lock" in rerun.stdout, rerun.stdout[-4000:]
    assert_converged(project, cluster, spec_doc, rerun)
    assert limit_ranges_with(cluster, "1Gi") == TENANTS


def test_sigkill_late_in_an_update_then_rerun_converges(project, cluster, spec_doc):
    set_request_memory(project, spec_doc, "1536Mi")
    up = project.start("up")
    late = TENANTS - max(1, TENANTS // 10)
    wait_for(lambda: limit_ranges_with(cluster, "1536Mi") >= late, 600, "nine tenths of the updates", up)
    sigkill_pulumi(up)
    rerun = project.run("up")
    assert_converged(project, cluster, spec_doc, rerun)
    assert limit_ranges_with(cluster, "1536Mi") == TENANTS


def rolebindings(cluster: ControlPlane) -> int:
    return count(cluster, "rolebindings")


def test_sigkill_in_the_middle_of_deleting_then_rerun_converges(project, cluster, spec_doc):
    """Deletes are the one kind of step whose half-done state cannot be adopted back: a dead run leaves
    objects deleted in the cluster but still in the state (or pending). Removing every tenant's owners
    deletes their RoleBindings (not retained)."""
    before = rolebindings(cluster)
    assert before >= TENANTS // 2, before
    for t in spec_doc["tenants"]:
        t.pop("owners", None)
    project.write(SPEC, yaml.safe_dump(spec_doc, sort_keys=False, width=120))
    up = project.start("up")
    wait_for(lambda: rolebindings(cluster) <= before // 2, 600, "half the deletes", up)
    sigkill_pulumi(up)
    assert rolebindings(cluster) > 0, "the kill came too late: every RoleBinding was already deleted"
    rerun = project.run("up")
    assert_converged(project, cluster, spec_doc, rerun)
    assert rolebindings(cluster) == 0
