"""Tenant shards (spec ``sharding.tenantShards``) on the user's path: ``gpupool stacks`` driving the real
pulumi CLI, the Python language host, the provider and a private kube-apiserver over the platform stack
``dev`` and its shard stacks ``dev.tenants-<k>``.

One sharded platform lives through the module, in order: from empty with 2 shards, a tenant onboarding,
2 -> 3 shards, a SIGKILL in the release pass of 3 -> 1 and one in the apply pass of 1 -> 3 (each rerun must
converge), a SIGKILL in a checkpoint-free onboarding whose tenant is then removed from the spec (the rerun's
label sweep must remove what no stack holds), and destroy. The shards' ups run checkpoint-free
(gpupool.deploy.stacks.CHECKPOINT_FREE), so every kill in a shard here is one in that mode. (Switching sharding on for an existing unsharded stack, with every tenant object
kept, is tests/e2e/test_stacks_command.py's.) After every run: exit 0 (so the command's own ``preview --expect-no-changes`` of every
stack passed), each stack's state holds exactly the tenants ``gpupool shards`` assigns it, no tenant is in
two states, and what the cluster has labelled managed-by=gpupool is exactly the union of the states.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gpupool.analysis import shard_moves
from gpupool.k8s import manifests
from gpupool.k8s.desired import ANNOTATION_RETAINED, LABEL_PLATFORM
from gpupool.rules.engine import load_valid_spec

from .adoption import namespace_uids
from .cli import CliProject, cluster_objects, state_objects, tenant_labelled
from .cluster import ControlPlane
from .faults import fault_at, kill_group
from .gate import Gate, Held, Match

pytestmark = pytest.mark.e2e

SPEC = "stacks/shard/spec.yaml"
TENANT_DIR = "stacks/shard/tenants"
NODES = {
    "shard-gpu-l4-1": {"nvidia.com/gpu.shared": "16"},
    "shard-gpu-a100-1": {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"},
}
# team-00 .. team-06 at first, team-07 onboarded. Production tenants (every third) get a 3g.40gb and the
# tier's maxPerPod (a ValidatingAdmissionPolicy each); the others a time-sliced replica, which the device plugin
# allocates at most one of per container (failRequestsGreaterThanOne), so a policy each too; team-02 has a
# maxPerPod of its own.
FIRST = [f"team-{i:02d}" for i in range(7)]
ONBOARDED = "team-07"
SPEC_TEXT = """\
apiVersion: gpupool.dev/v1alpha1
kind: GpuPlatform
cluster:
  name: shard
  gpuOperator:
    chartVersion: v26.7.0
    namespace: gpu-operator
{sharding}nodePools:
  - name: l4-shared
    gpu: L4
    gpusPerNode: 4
    nodes: [shard-gpu-l4-1]
    pricePerGpuHour: 0.80
    sharing:
      timeSlicing:
        replicas: 4
  - name: a100-mig
    gpu: A100-80GB
    gpusPerNode: 4
    nodes: [shard-gpu-a100-1]
    pricePerGpuHour: 3.20
    sharing:
      mig:
        preset: all-balanced
tiers:
  - name: production
    priority: 100000
    isolation: dedicated
    maxPerPod:
      nvidia.com/mig-3g.40gb: 1
  - name: standard
    priority: 10000
  - name: batch
    priority: 1000
    preemptionPolicy: Never
tenantFiles:
  - tenants/
"""
RB = "RoleBinding"
VAP, VAPB = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
MAX_PER_POD_PREFIX = "gpupool-max-per-pod."


def spec_text(shards: int | None) -> str:
    return SPEC_TEXT.format(sharding=f"sharding:\n  tenantShards: {shards}\n" if shards else "")


def tenant_text(name: str) -> str:
    i = int(name.rsplit("-", 1)[1])
    doc: dict = {"name": name, "owners": [f"{name}-admins"], "costCenter": f"cc-{1000 + i}"}
    if i % 3 == 0:
        doc.update(tier="production", gpus={"nvidia.com/mig-3g.40gb": 1})
    else:
        doc.update(tier="batch" if i % 2 else "standard", gpus={"nvidia.com/gpu.shared": 1})
    if i == 2:
        doc["maxPerPod"] = {"nvidia.com/gpu.shared": 1}
    return yaml.safe_dump(doc, sort_keys=False)


def set_shards(project: CliProject, shards: int | None) -> None:
    project.write(SPEC, spec_text(shards))


def add_tenant(project: CliProject, name: str) -> None:
    project.write(f"{TENANT_DIR}/{name}.yaml", tenant_text(name))


def new_project(cluster: ControlPlane, bin_dir: Path, root: Path, shards: int | None) -> CliProject:
    for name, resources in NODES.items():
        cluster.create_gpu_node(name, resources)
    project = CliProject(bin_dir, cluster.kubeconfig, root, stack="dev", spec=SPEC)
    set_shards(project, shards)
    for name in FIRST:
        add_tenant(project, name)
    return project


# ---------------------------------------------------------------- reading the stacks and the cluster


def stack_names(project: CliProject) -> list[str]:
    """The platform's stacks, from the file backend's directory (not from `pulumi stack ls`, which the
    command under test reads)."""
    files = (project.state / ".pulumi" / "stacks").rglob("*.json")
    names = {f.name[: -len(".json")] for f in files if not f.name.endswith(".bak")}
    return sorted(n for n in names if n == project.stack or n.startswith(project.stack + ".tenants-"))


def exports(project: CliProject) -> dict[str, dict]:
    return {s: project.export(s) for s in stack_names(project)}


def held(export: dict) -> dict[str, set[str]]:
    """What a state holds, read two ways: its Tenant components' names and its tenant Namespaces."""
    components, namespaces = set(), set()
    for r in export["deployment"].get("resources") or []:
        if r.get("delete"):
            continue
        if r["type"] == "gpupool:tenancy:Tenant":
            components.add(shard_moves.tenant_of(r))
        elif r["type"] == "kubernetes:core/v1:Namespace":
            name = (r.get("outputs") or {}).get("metadata", {}).get("name", "")
            if name.startswith("team-"):
                namespaces.add(name)
    return {"components": components, "namespaces": namespaces}


def layout(project: CliProject) -> dict:
    """`gpupool shards SPEC -o json`: the stacks and the tenants the spec assigns to each."""
    p = subprocess.run(
        [
            str(project.dir / ".venv" / "bin" / "gpupool"),
            "shards",
            SPEC,
            "--platform-stack",
            project.stack,
            "-o",
            "json",
        ],
        cwd=project.dir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def spec_tenants(project: CliProject) -> list[str]:
    return sorted(p.stem for p in (project.dir / TENANT_DIR).glob("*.yaml"))


def desired_tenant_objects(project: CliProject) -> dict[str, set[tuple[str, str, str]]]:
    """Tenant -> (kind, namespace, name) of every object gpupool renders for it (the program's source)."""
    plan = manifests.build(load_valid_spec(project.dir / SPEC))
    out: dict[str, set[tuple[str, str, str]]] = {}
    for comp, objs in plan.by_component().items():
        if comp.startswith("tenant:"):
            out[comp.split(":", 1)[1]] = {
                (o.manifest["kind"], o.manifest["metadata"].get("namespace", ""), o.manifest["metadata"]["name"])
                for o in objs
            }
    return out


def tenant_objects_in_cluster(cluster: ControlPlane) -> dict[str, dict[str, dict]]:
    """Tenant -> kind -> {(namespace, name): (uid, resourceVersion)} of the objects labelled with a tenant."""
    out: dict[str, dict[str, dict]] = {}
    for i in tenant_labelled(cluster):
        meta = i["metadata"]
        kinds = out.setdefault(meta["labels"]["gpupool.dev/tenant"], {})
        kinds.setdefault(i["kind"], {})[(meta.get("namespace", ""), meta["name"])] = (
            meta["uid"],
            meta["resourceVersion"],
        )
    return out


def sections(out: str) -> list[tuple[str, str]]:
    """(header, text) per stack the command ran: header as logged, e.g. `up dev.tenants-1 (release pass: ...)`."""
    parts = re.split(r"^\[gpupool stacks\] ((?:up|preview|destroy) \S+.*)$", out, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def changed(text: str) -> bool:
    return bool(re.search(r"^\s+[-+~]*\s*\d+ (created|updated|deleted|replaced)", text, re.M))


def assert_converged(project: CliProject, cluster: ControlPlane, run: subprocess.CompletedProcess) -> dict:
    """The run succeeded; every stack holds exactly its tenants; the states and the cluster agree."""
    assert run.returncode == 0, run.stdout[-8000:]
    states = exports(project)
    doc = layout(project)
    assigned = {s["stack"]: set(s["tenants"]) for s in doc["stacks"]}
    tenants = spec_tenants(project)
    # Every stack that holds tenants now or is assigned some ran, and its up ended with the preview
    # `--expect-no-changes` (the command stops at the first failed stack).
    ran = [h.split()[1] for h, _ in sections(run.stdout) if h.startswith("up ")]
    ran += re.findall(r"^(\S+): up skipped \(unchanged since its last successful up", run.stdout, re.M)  # (not --all)
    for stack in assigned if doc["tenantShards"] or len(states) > 1 else ():
        if assigned[stack] or stack in states:
            assert stack in ran, (stack, ran)
    seen: Counter = Counter()
    for stack, export in states.items():
        assert not export["deployment"].get("pending_operations"), (stack, export["deployment"]["pending_operations"])
        h = held(export)
        want = assigned.get(stack, set())
        assert h["components"] == want, (stack, h["components"], want)
        assert h["namespaces"] == want, (stack, h["namespaces"], want)
        seen.update(h["components"])
    assert sorted(seen) == tenants and set(seen.values()) == {1}, f"tenants not held exactly once: {seen}"
    if doc["tenantShards"]:
        assert not held(states[project.stack])["components"], "the platform stack holds tenants"
    # Union of the states == what the cluster has labelled managed-by=gpupool: no orphan, no duplicate. A tenant
    # removed from the spec leaves what it retains on delete (its namespace, quotas, defaults), unmanaged.
    in_state = Counter(o for e in states.values() for o in state_objects(e))
    in_cluster = Counter(cluster_objects(cluster))
    for obj in retained_of_removed(cluster, tenants):
        del in_cluster[obj]
    assert not [o for o, n in in_state.items() if n > 1], "an object is managed by two stacks"
    assert in_state == in_cluster, {
        "only in cluster (orphans)": sorted(set(in_cluster) - set(in_state))[:20],
        "only in states (lost)": sorted(set(in_state) - set(in_cluster))[:20],
    }
    # Every tenant's rendered objects exist, exactly once (RoleBinding and admission policy included).
    desired = desired_tenant_objects(project)
    assert sorted(desired) == tenants
    for tenant, objs in desired.items():
        kinds = {k for k, _, _ in objs}
        assert {"Namespace", "ResourceQuota", "LimitRange", RB} <= kinds, (tenant, kinds)
        for obj in objs:
            assert in_cluster[obj] == 1, (tenant, obj, in_cluster[obj])
    assert not project.lock_files(), project.lock_files()
    return states


def retained_of_removed(cluster: ControlPlane, tenants: list[str]) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of what tenants no longer in the spec left: each must say it is retained on
    delete (what Pulumi and the label sweep leave); anything else of theirs is an orphan."""
    out, orphans = [], []
    for i in tenant_labelled(cluster):
        meta = i["metadata"]
        if meta["labels"]["gpupool.dev/tenant"] in tenants:
            continue
        obj = (i["kind"], meta.get("namespace", ""), meta["name"])
        retained = (meta.get("annotations") or {}).get(ANNOTATION_RETAINED) == "true"
        (out if retained else orphans).append(obj)
    assert not orphans, f"a removed tenant's objects that are not retained on delete remain: {orphans}"
    return out


def with_policy(project: CliProject) -> set[str]:
    """Tenants with a per-pod maximum policy (every tenant also has a priority guard: a bare VAP says little)."""
    return {
        t
        for t, objs in desired_tenant_objects(project).items()
        if any(k == VAP and n.startswith(MAX_PER_POD_PREFIX) for k, _, n in objs)
    }


# ---------------------------------------------------------------- killing a run mid-pass


def pulumi_up_pid(p: subprocess.Popen, stack: str) -> int | None:
    """The pid of `pulumi up ... --stack STACK` in P's process group, if running. The Automation API runs
    `pulumi --non-interactive up --yes --skip-preview ... --stack STACK` (pulumi/automation/_cmd.py puts the
    flag before the subcommand)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        pgrp = int(stat[stat.rindex(")") + 2 :].split()[2])
        args = [a for a in argv[1:] if a != b"--non-interactive"]
        if (
            pgrp == p.pid
            and argv[0].rsplit(b"/", 1)[-1] == b"pulumi"
            and args[:1] == [b"up"]
            and stack.encode() in argv
        ):
            return int(d.name)
    return None


def rolebinding_uids(cluster: ControlPlane, tenant: str) -> set[str]:
    """The uids of TENANT's owners' RoleBindings (one API call: polled while a run goes)."""
    status, obj = cluster.api("GET", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{tenant}/rolebindings")
    assert status == 200, obj
    return {i["metadata"]["uid"] for i in obj["items"] if i["metadata"]["name"].startswith("tenant-owners-")}


def rolebinding_exists(cluster: ControlPlane, tenant: str) -> bool:
    return bool(rolebinding_uids(cluster, tenant))


# ---------------------------------------------------------------- the sharded platform


@pytest.fixture(scope="module")
def cluster(private_control_plane):
    return private_control_plane


@pytest.fixture(scope="module")
def project(cluster, cli_toolchain_bin, tmp_path_factory) -> CliProject:
    return new_project(cluster, cli_toolchain_bin, tmp_path_factory.mktemp("shards"), 2)


def test_a_sharded_spec_from_empty_converges_with_each_tenant_in_its_shard(project, cluster):
    doc = layout(project)
    assert [s["stack"] for s in doc["stacks"]] == ["dev", "dev.tenants-0", "dev.tenants-1"]
    assert all(s["tenants"] for s in doc["stacks"][1:]), "a shard with no tenant tests little"
    # A secret in the platform stack's config (CI may keep a kubeconfig so): the shards must get it, each
    # encrypted with its own passphrase salt.
    init = subprocess.run(
        [str(project.bin_dir / "pulumi"), "stack", "init", "dev"], cwd=project.dir, env=project.env, capture_output=True
    )
    assert init.returncode == 0, init.stderr
    p = project.pulumi("config", "set", "--secret", "gpupool:probeSecret", "s3cr3t-value")
    assert p.returncode == 0, p.stderr
    run = project.run("up")
    states = assert_converged(project, cluster, run)
    assert sorted(states) == ["dev", "dev.tenants-0", "dev.tenants-1"]
    assert [h.split()[1] for h, _ in sections(run.stdout)] == ["dev", "dev.tenants-0", "dev.tenants-1"]
    # The platform stack holds the platform part: the tiers' PriorityClasses, the operator's namespace.
    platform = {(k, n) for k, _, n in state_objects(states["dev"])}
    assert {("PriorityClass", "production"), ("Namespace", "gpu-operator")} <= platform
    assert not [o for e in list(states.values())[1:] for o in state_objects(e) if o[0] == "PriorityClass"]
    # Every tenant: the production ones for the tier's maxPerPod, the others for one shared unit per container.
    assert with_policy(project) == set(FIRST)
    # The shard stacks got the platform stack's config and their own gpupool:shard.
    for k in (0, 1):
        p = project.pulumi("config", "--json", stack=f"dev.tenants-{k}")
        config = json.loads(p.stdout)
        assert config["gpupool:shard"]["value"] == f"tenants-{k}"
        # `-c` values are for the run only (issue 41 item 5): a shard keeps what the platform stack saved, and
        # ran with the run's gpupool:spec (its tenants above are the ones SPEC puts in it).
        saved = json.loads(project.pulumi("config", "--json", stack="dev").stdout).get("gpupool:spec")
        assert config.get("gpupool:spec") == saved
        assert config["gpupool:probeSecret"]["secret"] is True
        p = project.pulumi("config", "get", "gpupool:probeSecret", stack=f"dev.tenants-{k}")
        assert p.returncode == 0 and p.stdout.strip() == "s3cr3t-value", p.stderr
        text = (project.dir / "stacks" / f"Pulumi.dev.tenants-{k}.yaml").read_text()  # Pulumi.yaml: stackConfigDir
        assert "s3cr3t-value" not in text and "encryptionsalt" in text, text


def test_onboarding_one_tenant_changes_only_its_shard(project, cluster):
    home = next(s["stack"] for s in layout_after(project, ONBOARDED) if ONBOARDED in s["tenants"])
    add_tenant(project, ONBOARDED)
    run = project.run("up")
    assert_converged(project, cluster, run)
    ups = [(h.split()[1], t) for h, t in sections(run.stdout) if h.startswith("up ")]
    assert {s for s, _ in ups} == {"dev", "dev.tenants-0", "dev.tenants-1"}
    for stack, text in ups:
        if stack == home:
            assert re.search(r"\+ \d+ created", text), text[-3000:]
        else:
            assert not changed(text), (stack, text[-3000:])
    objs = tenant_objects_in_cluster(cluster)[ONBOARDED]
    assert set(objs) >= {"Namespace", "ResourceQuota", "LimitRange", RB}, objs


def layout_after(project: CliProject, tenant: str) -> list[dict]:
    """The layout with TENANT's file added (restored afterwards)."""
    path = project.dir / TENANT_DIR / f"{tenant}.yaml"
    add_tenant(project, tenant)
    try:
        return layout(project)["stacks"]
    finally:
        path.unlink()


def test_raising_the_shard_count_moves_tenants_and_keeps_the_others_untouched(project, cluster):
    before = tenant_objects_in_cluster(cluster)
    old = {t: s["stack"] for s in layout(project)["stacks"] for t in s["tenants"]}
    set_shards(project, 3)
    new = {t: s["stack"] for s in layout(project)["stacks"] for t in s["tenants"]}
    moved = sorted(t for t in new if new[t] != old[t])
    assert moved and len(moved) < len(new), (old, new)
    assert {new[t] for t in moved} == {"dev.tenants-2"}, "jump hash: 2 -> 3 moves only into the new shard"
    run = project.run("up")
    assert_converged(project, cluster, run)
    # The stacks that lost tenants released them first, then every stack applied.
    headers = [h for h, _ in sections(run.stdout) if h.startswith("up ")]
    losing = sorted({old[t] for t in moved})
    release = [h.split()[1] for h in headers if "release pass" in h]
    assert release == losing, headers
    assert headers.index(next(h for h in headers if h == "up dev.tenants-2")) > len(release) - 1
    after = tenant_objects_in_cluster(cluster)
    for t in new:
        assert set(after[t]) >= {"Namespace", "ResourceQuota", "LimitRange", RB}, (t, after[t])
        if t in with_policy(project):
            assert VAP in after[t] and VAPB in after[t], (t, after[t])
        # No namespace was replaced; retained objects kept their identity.
        assert after[t]["Namespace"].keys() == before[t]["Namespace"].keys()
        assert [u for u, _ in after[t]["Namespace"].values()] == [u for u, _ in before[t]["Namespace"].values()]
        if t not in moved:
            for kind in (RB, VAP, VAPB):
                assert after[t].get(kind) == before[t].get(kind), (t, kind, "an unmoved tenant's object changed")
    # The moved tenants' non-retained objects were deleted by their old stack and created by the new one.
    for t in moved:
        assert after[t][RB] != before[t][RB], (t, "the RoleBinding of a moved tenant was not re-created")


def assert_no_tenant_in_two_states(project: CliProject) -> None:
    """The invariant the two passes keep at every point of a move, a dead run's too."""
    seen = Counter(t for e in exports(project).values() for t in held(e)["components"])
    assert not [t for t, n in seen.items() if n > 1], f"tenants in two states: {seen}"


def owners_binding(namespaces, op: str) -> Match:
    """OP of a tenant owners' RoleBinding in one of NAMESPACES (the request a fault waits for)."""
    names = set(namespaces)
    return lambda h: (
        h.resource == "rolebindings" and h.op == op and h.namespace in names and h.name.startswith("tenant-owners-")
    )


def binding_gone(cluster: ControlPlane) -> Callable[[Held], bool]:
    return lambda h: (
        cluster.api("GET", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{h.namespace}/rolebindings/{h.name}")[0]
        == 404
    )


def binding_there(cluster: ControlPlane) -> Callable[[Held], bool]:
    return lambda h: (
        cluster.api("GET", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{h.namespace}/rolebindings/{h.name}")[0]
        == 200
    )


@pytest.mark.fault
def test_sigkill_in_the_release_pass_then_in_the_apply_pass_of_a_move_then_rerun_converges(project, cluster):
    """3 -> 1 shards: dev.tenants-1 and dev.tenants-2 release their tenants, then dev.tenants-0 adopts them.
    The first run is killed while dev.tenants-1 deletes (at its first RoleBinding deletion, which lands),
    the rerun while dev.tenants-0 creates (at its first RoleBinding creation, which lands); the third run
    must converge. Each kill is triggered by that API request (tests/e2e/gate.py), in `pulumi up` of that
    stack, and nothing the killed run sent after it lands."""
    old = {t: s["stack"] for s in layout(project)["stacks"] for t in s["tenants"]}
    set_shards(project, 1)
    leaving = sorted(t for t, s in old.items() if s != "dev.tenants-0")
    victims = [t for t in leaving if old[t] == "dev.tenants-1"]
    assert victims and len(leaving) > len(victims), old

    def victims_bindings() -> int:
        return sum(len(rolebinding_uids(cluster, t)) for t in victims)

    with Gate(cluster, ["rolebindings"]) as gate:
        before = victims_bindings()
        up = project.start("up")
        fault_at(
            gate,
            up,
            owners_binding(victims, "DELETE"),
            what="the release pass of dev.tenants-1 to delete a RoleBinding",
            point=lambda: pulumi_up_pid(up, "dev.tenants-1") is not None,
            land=binding_gone(cluster),
            action=kill_group,
        )
        out = CliProject.output(up)
        assert "up dev.tenants-1 (release pass" in out, out[-4000:]
        assert "[gpupool stacks] up dev.tenants-2" not in out, "the kill came after dev.tenants-1's release"
        assert project.lock_files(), "the killed run left no lock: the kill did not hit an update"
        assert victims_bindings() == before - 1, "not killed at the release pass's first RoleBinding deletion"
        assert_no_tenant_in_two_states(project)

        released = {t: rolebinding_uids(cluster, t) for t in leaving}  # still the old stacks' where not released

        def adopted() -> list[str]:  # leaving tenants with a RoleBinding dev.tenants-0 created
            return [t for t in leaving if rolebinding_uids(cluster, t) - released[t]]

        up = project.start("up")
        fault_at(
            gate,
            up,
            owners_binding(leaving, "CREATE"),
            what="the apply pass of dev.tenants-0 to create a RoleBinding",
            point=lambda: pulumi_up_pid(up, "dev.tenants-0") is not None,
            land=binding_there(cluster),
            action=kill_group,
        )
    out = CliProject.output(up)
    assert "cancelling the dead run's lock" in out, out[-4000:]
    assert "[gpupool stacks] up dev.tenants-0\n" in out, out[-4000:]
    assert project.lock_files(), "the killed run left no lock: the kill did not hit an update"
    assert len(adopted()) == 1, "not killed at the apply pass's first RoleBinding"
    assert_no_tenant_in_two_states(project)

    rerun = project.run("up")
    assert "cancelling the dead run's lock" in rerun.stdout, rerun.stdout[-4000:]
    assert_converged(project, cluster, rerun)


@pytest.mark.fault
def test_sigkill_in_a_checkpoint_free_onboarding_then_the_tenant_removed_then_the_rerun_sweeps_it(project, cluster):
    """A shard's up writes its state only at its end (gpupool.deploy.stacks.CHECKPOINT_FREE). Onboarding
    team-08 is killed once its owners' RoleBinding has landed (the gate: that API request): the shard's state
    does not hold team-08, while the cluster has its namespace and binding. Then team-08 is removed from the
    spec, as a pull request after a failed deploy may do. No state holds its objects, so Pulumi cannot delete
    them: the rerun's label sweep (gpupool.deploy.sweep) must remove the binding and every other object of
    team-08 that is not retained on delete, name them, and leave the retained ones as a removal with
    checkpoints would have (its namespace and quota). 0 lost, 0 orphaned: assert_converged."""
    victim = "team-08"
    add_tenant(project, victim)
    home = next(s["stack"] for s in layout(project)["stacks"] if victim in s["tenants"])
    with Gate(cluster, ["rolebindings"]) as gate:
        up = project.start("up")
        fault_at(
            gate,
            up,
            owners_binding([victim], "CREATE"),
            what=f"the onboarding of {victim} in {home} to create its RoleBinding",
            point=lambda: pulumi_up_pid(up, home) is not None,
            land=binding_there(cluster),
            action=kill_group,
        )
    assert project.lock_files(), "the killed run left no lock: the kill did not hit an update"
    assert rolebinding_exists(cluster, victim)
    state = held(project.export(home))
    assert victim not in state["components"] and victim not in state["namespaces"], (
        f"{home} checkpointed {victim} mid-run: the shard's up did not run checkpoint-free"
    )
    (project.dir / TENANT_DIR / f"{victim}.yaml").unlink()

    rerun = project.run("up", all_stacks=False)  # as the deploy job runs it: unchanged stacks skipped
    assert "cancelling the dead run's lock" in rerun.stdout, rerun.stdout[-4000:]
    assert re.search(rf"^{re.escape(home)}: up succeeded", rerun.stdout, re.M), "the killed stack was skipped"
    assert re.search(
        rf"sweep: removed RoleBinding {victim}/tenant-owners-\S+ \(labelled {LABEL_PLATFORM}=shard", rerun.stdout
    ), rerun.stdout[-4000:]
    assert re.search(r"^dev: sweep succeeded \(\d+ delete; removed what no stack holds: ", rerun.stdout, re.M), (
        rerun.stdout[-3000:]
    )
    assert not rolebinding_exists(cluster, victim)
    left = {k for k, _, _ in retained_of_removed(cluster, spec_tenants(project))}
    assert "Namespace" in left and "ResourceQuota" in left, left  # retained, as a removal with checkpoints keeps
    assert_converged(project, cluster, rerun)
    # Every stack unchanged, so every stack skipped; the sweep still runs, finds nothing to remove and only
    # counts the retained objects.
    again = project.run("up", all_stacks=False)
    assert len(re.findall(r"^\S+: up skipped", again.stdout, re.M)) == len(stack_names(project)), again.stdout[-3000:]
    assert re.search(r"^dev: sweep succeeded \(no changes; \d+ retained on delete", again.stdout, re.M), again.stdout[
        -3000:
    ]


def test_destroy_takes_the_shards_first_and_keeps_retained_tenant_namespaces(project, cluster):
    tenants = spec_tenants(project)
    uids = namespace_uids(cluster, tenants)
    run = project.run("destroy")
    assert run.returncode == 0, run.stdout[-6000:]
    order = [h.split()[1] for h, _ in sections(run.stdout) if h.startswith("destroy ")]
    shards = sorted((s for s in stack_names(project) if s != "dev"), key=lambda s: int(s.rsplit("-", 1)[1]))
    assert order == shards[::-1] + ["dev"], order
    for stack, export in exports(project).items():
        assert export["deployment"].get("resources") in (None, []), stack
    # Retained tenants keep their namespace (same uid), quota and defaults; the platform objects go.
    assert namespace_uids(cluster, tenants) == uids
    for t in tenants:
        cluster.kubectl("get", "resourcequota", "gpu-quota", "-n", t)
        cluster.kubectl("get", "limitrange", "container-defaults", "-n", t)
        assert not rolebinding_exists(cluster, t), t
    for kind, name in (("priorityclass", "batch"), ("clusterrole", "gpupool-tenant-workloads")):
        assert cluster.kubectl("get", kind, name, check=False).returncode != 0, (kind, name)
