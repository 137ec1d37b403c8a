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
import re
import time
from collections import Counter

import pytest
import yaml

from bench.bench_validate import POOL_KINDS, generate

from .cli import CliProject, cluster_objects, sigkill_pulumi, state_objects
from .cluster import ControlPlane

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


def tenant_names(doc: dict) -> list[str]:
    return [t["name"] for t in doc["tenants"]]


def assert_converged(project: CliProject, cluster: ControlPlane, doc: dict, run) -> None:
    """The script's run succeeded (so its `preview --expect-no-changes` passed) and state == cluster."""
    assert run.returncode == 0, run.stdout[-6000:]
    deployment = project.export()
    assert not deployment["deployment"].get("pending_operations"), deployment["deployment"]["pending_operations"]
    urns = Counter(r["urn"] for r in deployment["deployment"]["resources"])
    assert not [u for u, n in urns.items() if n > 1], "duplicate resources in the state"
    in_state, in_cluster = Counter(state_objects(deployment)), Counter(cluster_objects(cluster))
    assert not [o for o, n in in_state.items() if n > 1], "an object is managed twice"
    assert in_state == in_cluster, {
        "only in cluster (orphans)": sorted(set(in_cluster) - set(in_state))[:20],
        "only in state (lost)": sorted(set(in_state) - set(in_cluster))[:20],
    }
    namespaces = {
        i["metadata"]["name"]: i["status"]["phase"] for i in cluster.get_json("namespaces", timeout=120)["items"]
    }
    quotas = {
        i["metadata"]["namespace"]
        for i in cluster.get_json("resourcequotas", "-A", "--field-selector", "metadata.name=gpu-quota", timeout=120)[
            "items"
        ]
    }
    lost = [t for t in tenant_names(doc) if namespaces.get(t) != "Active" or t not in quotas]
    assert not lost, f"tenants lost: {lost}"
    assert not project.lock_files(), project.lock_files()


def wait_for(predicate, timeout: float, what: str, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the up ended ({proc.returncode}) before {what}:\n{CliProject.output(proc)[-4000:]}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def count(cluster: ControlPlane, kind: str, pattern: str = "") -> int:
    p = cluster.kubectl(
        "get",
        kind,
        "-A",
        "-l",
        "app.kubernetes.io/managed-by=gpupool",
        "-o",
        "name",
        "--no-headers",
        check=False,
        timeout=60,
    )
    if p.returncode != 0:
        return 0
    return len(p.stdout.split()) if not pattern else len(re.findall(pattern, p.stdout))


def limit_ranges_with(cluster: ControlPlane, memory: str) -> int:
    p = cluster.kubectl(
        "get",
        "limitranges",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.spec.limits[0].defaultRequest.memory}{'\\n'}{end}",
        check=False,
        timeout=60,
    )
    return p.stdout.split().count(memory) if p.returncode == 0 else 0


def set_request_memory(project: CliProject, doc: dict, memory: str) -> None:
    """An update of every tenant's LimitRange (containerDefaults.requests.memory)."""
    for t in doc["tenants"]:
        t["containerDefaults"]["requests"]["memory"] = memory
    project.write(SPEC, yaml.safe_dump(doc, sort_keys=False, width=120))


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
