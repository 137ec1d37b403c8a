"""The state backend docs/howto/ci.md recommends, an object-store bucket (``PULUMI_BACKEND_URL=s3://…``), on the
user's path (``gpupool stacks``, the pulumi CLI, the language host) against a real API server: an
S3-compatible server (gofakes3, a versioned bucket, ``tests/e2e/s3.py`` says how far it is faithful) on
loopback.

In order, on one generated platform (``GPUPOOL_S3_TENANTS`` tenants, 6 by default, and as many again onboarded
in one batch), sharded as a large platform is (``sharding.tenantShards: 1``: the platform stack ``s3``, with
checkpoints, and the tenant shard ``s3.tenants-0``, whose ``up`` runs checkpoint-free, so the kill below lands in
that mode on the bucket): ``up`` converges, the state is in the bucket and ``preview`` plans no change; SIGKILL of
``pulumi up`` while it creates the batch, its lock as the runner that died would have left it: refused
without ``GPUPOOL_SINGLE_WRITER``, and the workflow's rerun (``GPUPOOL_SINGLE_WRITER=1``) cancels it and
converges; a second concurrent ``up`` is refused by the lock and changes nothing; ``destroy``. "Converged" is test_crash_safety.py's: the command exits 0 (its
``preview --expect-no-changes`` passed), state == cluster (no orphan, no duplicate) and no tenant lost.
"""

from __future__ import annotations

import json
import os
import re
import socket

import pytest
import yaml

from bench.bench_validate import POOL_KINDS, generate

from .cli import CliProject, state_objects
from .faults import SPEC, assert_converged, count, fault_at, limit_ranges_with, set_request_memory, writes
from .gate import Gate, freeze, thaw
from .s3 import BINARY, CLIENT_ENV, FakeS3

pytestmark = pytest.mark.e2e

TENANTS = int(os.environ.get("GPUPOOL_S3_TENANTS", "6"))
STACK = "s3"
SHARD = f"{STACK}.tenants-0"  # every tenant, checkpoint-free (gpupool.deploy.stacks.CHECKPOINT_FREE)
STACKS = [STACK, SHARD]
PREFIX = "gpupool"  # s3://BUCKET/gpupool: the state lives under this key prefix
# What the deploy job sets (.github/workflows/gpupool.yml, `up`): its concurrency group runs one job per stack.
WORKFLOW = {"GPUPOOL_SINGLE_WRITER": "1"}
TENANT_KINDS = "namespaces,resourcequotas,limitranges,rolebindings"


class S3Project(CliProject):
    """The CLI project with its state in the bucket: locks are objects under ``.pulumi/locks/``."""

    s3: FakeS3

    def lock_files(self) -> list[str]:  # type: ignore[override]
        return sorted(self.s3.list(f"{PREFIX}/.pulumi/locks/"))

    def state_key(self, stack: str | None = None) -> str:
        return f"{PREFIX}/.pulumi/stacks/gpupool/{stack or self.stack}.json"


@pytest.fixture(scope="module")
def cluster(private_control_plane):
    return private_control_plane


@pytest.fixture(scope="module")
def gate(cluster):
    """Faults at the API request they target (tests/e2e/gate.py)."""
    with Gate(cluster, ["namespaces", "limitranges"]) as g:
        yield g


@pytest.fixture(scope="module")
def s3(s3_toolchain_bin, tmp_path_factory):
    server = FakeS3(s3_toolchain_bin / BINARY, tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def full_doc(cluster) -> dict:
    """2 x TENANTS tenants: the first half is the stack, the second the batch onboarded mid-way."""
    doc = generate(2 * TENANTS, 4, nodes_per_pool=1)  # one node per pool: see test_crash_safety.py
    doc["sharding"] = {"tenantShards": 1}
    for i, pool in enumerate(doc["nodePools"]):
        for node in pool["nodes"]:
            cluster.create_gpu_node(node, {k: str(v) for k, v in POOL_KINDS[i % len(POOL_KINDS)][4].items()})
    return doc


@pytest.fixture(scope="module")
def doc(full_doc) -> dict:
    """The spec as deployed now (tests change it in place, in order)."""
    return {**full_doc, "tenants": full_doc["tenants"][:TENANTS]}


@pytest.fixture(scope="module")
def project(cluster, s3, doc, s3_toolchain_bin, tmp_path_factory) -> S3Project:
    p = S3Project(
        s3_toolchain_bin,
        cluster.kubeconfig,
        tmp_path_factory.mktemp("s3-backend"),
        stack=STACK,
        spec=SPEC,
        backend_url=s3.backend_url(PREFIX),
        backend_env=CLIENT_ENV,
    )
    p.s3 = s3
    write_spec(p, doc)
    return p


def write_spec(project: CliProject, doc: dict) -> None:
    project.write(SPEC, yaml.safe_dump(doc, sort_keys=False, width=120))


def lock_objects(project: S3Project) -> dict[str, dict]:
    return {k: json.loads(project.s3.get(k)) for k in project.lock_files()}


def test_up_converges_on_the_s3_backend_and_the_state_is_in_the_bucket(project, cluster, doc):
    run = project.run("up", env=WORKFLOW)
    assert re.search(r"\+ \d+ created", run.stdout), run.stdout[-3000:]
    assert_converged(project, cluster, doc, run, STACKS)
    # The states are the bucket's: each checkpoint object holds what `pulumi stack export` says, and nothing
    # was written to the local file-backend directory.
    keys = project.s3.list(f"{PREFIX}/")
    assert f"{PREFIX}/.pulumi/meta.yaml" in keys, keys
    for stack in STACKS:
        assert project.state_key(stack) in keys, keys
        assert any(k.startswith(f"{PREFIX}/.pulumi/history/gpupool/{stack}/") for k in keys), keys
        checkpoint = json.loads(project.s3.get(project.state_key(stack)))["checkpoint"]["latest"]
        exported = project.export(stack)["deployment"]
        assert [r["urn"] for r in checkpoint["resources"]] == [r["urn"] for r in exported["resources"]]
    assert len(checkpoint["resources"]) > 8 * TENANTS  # the shard holds the tenants
    assert not list(project.state.iterdir())
    # Bucket versioning keeps the earlier checkpoints (docs/howto/ci.md), on top of Pulumi's `.json.bak` object.
    assert len(project.s3.versions(project.state_key())) > 2
    assert f"{project.state_key()}.bak" in keys, keys
    # The unchanged stack plans no change.
    preview = project.run("preview")
    assert preview.returncode == 0, preview.stdout[-3000:]
    assert not re.search(r"\d+ to (create|update|delete|replace)", preview.stdout), preview.stdout[-3000:]


def test_sigkill_while_onboarding_then_the_workflow_s_rerun_recovers_the_lock(project, cluster, full_doc, doc, gate):
    """The CI case: the job that died ran on another runner, so its lock names a host that is not this one
    and a pid that means nothing here. Simulated: the killed run's lock object is rewritten with the gone
    runner's host name, as that runner would have written it. Without the workflow's guarantee the command
    cannot know the runner is gone, so it refuses; the deploy job (GPUPOOL_SINGLE_WRITER=1) recovers."""
    before = count(cluster, TENANT_KINDS)
    before_namespaces = count(cluster, "namespaces")
    doc["tenants"] = full_doc["tenants"]  # a batch of TENANTS new tenants, in one pull request
    write_spec(project, doc)
    up = project.start("up", env=WORKFLOW)
    want = max(1, TENANTS // 4)
    fault_at(gate, up, writes("namespaces", "CREATE"), after=want, what=f"{want + 1} new namespaces")
    assert up.returncode != 0
    locks = lock_objects(project)
    assert len(locks) == 1, f"the killed run left {len(locks)} lock objects, not its own: {locks}"
    ((key, lock),) = locks.items()
    assert f"/{SHARD}/" in key, f"the kill did not land in the shard's up: {key}"
    # Checkpoint-free: the shard's state in the bucket is the one before the killed run, though the batch's
    # first namespaces are in the cluster; the rerun adopts them.
    batch = {t["name"] for t in full_doc["tenants"][TENANTS:]}
    assert not batch & {n for k, _, n in state_objects(project.export(SHARD)) if k == "Namespace"}
    assert count(cluster, "namespaces") > before_namespaces
    assert lock["hostname"] == socket.gethostname() and lock["pid"] != os.getpid(), lock
    project.s3.put(key, json.dumps({**lock, "hostname": "runner-that-is-gone"}).encode())
    created = count(cluster, TENANT_KINDS)

    refused = project.run("up")
    assert refused.returncode != 0
    assert "the stack is currently locked" in refused.stdout, refused.stdout[-3000:]
    # The command read the holder from the S3 lock error (an s3:// URL with a query string before it).
    assert f"live lock: created by {lock['username']}@runner-that-is-gone (pid {lock['pid']}) at " in refused.stdout, (
        refused.stdout[-3000:]
    )
    assert "cancelling" not in refused.stdout, refused.stdout[-3000:]
    assert lock_objects(project).keys() == {key}
    assert count(cluster, TENANT_KINDS) == created

    rerun = project.run("up", env=WORKFLOW)
    assert f"stale lock: created by {lock['username']}@runner-that-is-gone (pid {lock['pid']})" in rerun.stdout, (
        rerun.stdout[-4000:]
    )
    assert "cancelling the dead run's lock" in rerun.stdout, rerun.stdout[-4000:]
    assert_converged(project, cluster, doc, rerun, STACKS)
    assert before < created < count(cluster, TENANT_KINDS), "the kill did not land in the middle of the batch"


def test_a_concurrent_second_up_is_refused_by_the_lock_and_changes_nothing(project, cluster, doc, gate):
    set_request_memory(project, doc, "3Gi")
    first = project.start("up", env=WORKFLOW)
    # Hold the first up still at its first update while the second runs (its process group stopped; it
    # stays alive and keeps its lock), so the two overlap however fast the first would be.
    gate.arm(writes("limitranges", "UPDATE"))
    assert gate.wait(600, first) is not None, CliProject.output(first)[-4000:]
    freeze(first.pid)
    gate.open()
    try:
        lock = lock_objects(project)
        assert lock, "the first up holds no lock at its first update"
        second = project.run("up", env=WORKFLOW)
        assert lock_objects(project) == lock, "the refused up touched the running up's lock"
    finally:
        thaw(first.pid)
    assert second.returncode != 0
    assert "the stack is currently locked" in second.stdout, second.stdout[-3000:]
    assert "live lock" in second.stdout and "cancelling" not in second.stdout, second.stdout[-3000:]
    assert not re.search(r"\d+ (created|updated|deleted|replaced)", second.stdout), second.stdout[-3000:]
    assert first.wait(timeout=900) == 0, CliProject.output(first)[-4000:]
    assert_converged(project, cluster, doc, first, STACKS)
    assert limit_ranges_with(cluster, "3Gi") == len(doc["tenants"])


def test_destroy_on_the_s3_backend(project, cluster, doc):
    assert count(cluster, "priorityclasses")
    out = project.run("destroy", env=WORKFLOW)
    assert out.returncode == 0, out.stdout[-4000:]
    assert re.search(r"- \d+ deleted", out.stdout), out.stdout[-3000:]
    for stack in STACKS:
        assert project.export(stack)["deployment"].get("resources") in (None, [])
        latest = json.loads(project.s3.get(project.state_key(stack)))["checkpoint"]["latest"]
        assert latest.get("resources") in (None, []), stack
    assert not project.lock_files()
    # Tenants that are not offboarded keep their namespace (docs/explanation/deploy.md, "What `pulumi destroy` does"); an
    # offboarded tenant's namespace and the platform's cluster objects are gone.
    offboarded = [t["name"] for t in doc["tenants"] if t.get("offboarded")]
    assert offboarded and len(offboarded) < len(doc["tenants"])
    for t in doc["tenants"]:
        ns = cluster.kubectl("get", "namespace", t["name"], "-o", "jsonpath={.status.phase}", check=False)
        if t.get("offboarded"):
            assert ns.returncode != 0 or ns.stdout == "Terminating", (t["name"], ns.stdout)
        else:
            assert ns.stdout == "Active", (t["name"], ns.stdout, ns.stderr)
    assert count(cluster, "priorityclasses") == 0
