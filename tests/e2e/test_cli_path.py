"""The user's path: `pulumi preview --diff` / `pulumi up` in (a copy of) the project directory, through the
pulumi CLI and the Python language host, with the CI recipe's commands: ``gpupool stacks`` (the console
script of the project's virtualenv, on the Automation API).

One dev stack lives through the module, in order: first up (adopting namespaces made beforehand with
kubectl), the language host's caveat, a tenant onboarding, an invalid spec, a torn state sidecar, destroy
and the up that adopts what it retained. The adoptions are issue 18's create semantics, tested here to
cost no `up` of their own.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from components.program import PLATFORM_NAME

from .adoption import assert_adopted, namespace_uids
from .cli import CliProject, cluster_objects, failed_run, state_objects

pytestmark = pytest.mark.e2e

DEV_NODES = {
    "dev-gpu-l4-1": {"nvidia.com/gpu.shared": "16"},
    "dev-gpu-a100-1": {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"},
}
# One tenant file: onboarding is exactly this in a pull request. 1 of the L4 pool's 2 spare shared GPUs.
NEW_TENANT = """\
name: vision
tier: batch
gpus:
  nvidia.com/gpu.shared: 1
owners: [vision-admins]
costCenter: cc-5500
"""
SPEC = "stacks/dev/spec.yaml"
# Namespaces a platform team made by hand before gpupool (one with a label of the team's own).
HAND_MADE = ("research", "inference")
TEAM_LABEL = "example.com/team=inference-oncall"
# A tier that does not exist (line 2, column 7) and a GPU grant beyond the pool's capacity.
BAD_TENANT = """\
name: broken
tier: platinum
gpus:
  nvidia.com/gpu.shared: 99
"""


@pytest.fixture(scope="module")
def control_plane(private_control_plane):
    """Its own control plane: test_gpupool_up.py deploys the same dev stack's objects on the shared one."""
    return private_control_plane


@pytest.fixture(scope="module")
def project(control_plane, cli_toolchain_bin, tmp_path_factory) -> CliProject:
    for name, resources in DEV_NODES.items():
        control_plane.create_gpu_node(name, resources)
    # The file backend as `pulumi login file://DIR` gives it (test_crash_safety.py uses the recommended URL).
    return CliProject(
        cli_toolchain_bin, control_plane.kubeconfig, tmp_path_factory.mktemp("cli-path"), backend_query=""
    )


def _ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, failed_run(p)
    return p.stdout


def _steps(preview_text: str) -> dict[str, str]:
    """Resource name -> op symbol (+, ~, -, +-, ...) of the changed steps `pulumi preview --diff` prints."""
    steps = {}
    for m in re.finditer(r"^\s*([+~-]{1,2}|\+-)\s+\S+:\s+\((\w[\w-]*)\)\n\s*\[urn=([^\]]+)\]", preview_text, re.M):
        steps[m.group(3).split("::")[-1].removeprefix(f"{PLATFORM_NAME}-")] = m.group(2)
    return steps


def test_first_up_then_the_recipe_s_expect_no_changes_preview_passes(project, control_plane):
    """Also issue 18's adoption of namespaces made beforehand with kubectl (as on a cluster where teams
    already work): the first up adopts them as they are, the same objects (uid) now in the state with
    gpupool's labels, through a provider whose stored config has upsertExistingObjects "true", and the
    team's own label stays (tests/e2e/adoption.py says what this can and cannot prove here)."""
    control_plane.kubectl("create", "namespace", HAND_MADE[0])
    control_plane.kubectl("create", "namespace", HAND_MADE[1])
    control_plane.kubectl("label", "namespace", HAND_MADE[1], TEAM_LABEL)
    before = namespace_uids(control_plane, HAND_MADE)
    assert sorted(before) == sorted(HAND_MADE)
    out = _ok(project.run("up"))
    assert_adopted(project.export(), control_plane, before, project.dir / SPEC)
    team = control_plane.get_json("namespace", HAND_MADE[1])["metadata"]["labels"]
    assert team.get(TEAM_LABEL.split("=")[0]) == TEAM_LABEL.split("=")[1], team
    assert re.search(r"\+ \d+ created", out), out[-3000:]
    # `up` ends with `pulumi preview --expect-no-changes`: exit 0 above means the stack converged.
    quota = control_plane.get_json("resourcequota", "gpu-quota", "-n", "research")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "8"
    assert sorted(state_objects(project.export())) == sorted(cluster_objects(control_plane))
    # A second run of the recipe changes nothing.
    again = _ok(project.run("up"))
    assert not re.search(r"\d+ (created|updated|deleted|replaced)", again), again[-3000:]


def test_the_old_language_host_needs_the_venv_on_path(project):
    """The caveat `gpupool stacks` works around: without the venv first on PATH, the host this toolchain can
    build (v3.79) runs the program with the system `python` and the Pulumi SDK is not found, even though
    Pulumi.yaml says `virtualenv: .venv` (this CLI sends that option over gRPC, the old host reads flags)."""
    system_has_sdk = (
        subprocess.run(["python3", "-c", "import pulumi"], env=project.env, capture_output=True).returncode == 0
    )
    if system_has_sdk:
        pytest.skip("the system python has the Pulumi SDK, so the caveat cannot show here")
    p = project.pulumi("preview", "--non-interactive")
    assert p.returncode != 0
    assert "Pulumi SDK has not been installed" in p.stdout + p.stderr, p.stdout[-3000:] + p.stderr[-3000:]


def test_onboarding_one_tenant_previews_exactly_that_tenant_s_objects(project, control_plane):
    project.write("stacks/dev/tenants/vision.yaml", NEW_TENANT)
    text = _ok(project.run("preview"))
    steps = _steps(text)
    assert steps, text[-4000:]
    assert set(steps.values()) == {"create"}, steps
    # The component and one object per file gpupool renders for the tenant, nothing else.
    expected = {
        "tenant-vision",
        "tenant-vision-ns",
        "tenant-vision-gpu-quota",
        "tenant-vision-priority-guard",
        "tenant-vision-priority-guard-policy",
        "tenant-vision-priority-guard-binding",
        # gpu.shared is time-sliced with failRequestsGreaterThanOne: the per-container check (GP310's policy)
        "tenant-vision-max-per-pod",
        "tenant-vision-max-per-pod-binding",
        "tenant-vision-container-defaults",
        "tenant-vision-owners",
    }
    assert set(steps) == expected, steps
    assert re.search(rf"\+ {len(expected)} to create", text), text[-2000:]
    assert not re.search(r"\d+ to (update|delete|replace)", text), text[-2000:]
    _ok(project.run("up"))
    assert control_plane.get_json("namespace", "vision")["status"]["phase"] == "Active"


def test_an_invalid_spec_fails_preview_with_locations_and_changes_nothing(project, control_plane):
    before = project.export(show_secrets=True)["deployment"]["resources"]
    path = project.write("stacks/dev/tenants/broken.yaml", BAD_TENANT)
    try:
        for op in ("preview", "up"):
            p = project.run(op)
            assert p.returncode != 0, p.stdout[-3000:]
            # The same located diagnostics as `gpupool validate`, not a traceback.
            assert re.search(r"stacks/dev/tenants/broken\.yaml:2:7: error: ", p.stdout), p.stdout[-4000:]
            assert "Traceback" not in p.stdout, p.stdout[-4000:]
        assert project.export(show_secrets=True)["deployment"]["resources"] == before
        assert control_plane.kubectl("get", "namespace", "broken", check=False).returncode != 0
    finally:
        path.unlink()


def test_a_torn_metadata_sidecar_of_the_file_backend_is_repaired(project):
    """The plain file:// backend writes `<state>.attrs` sidecars non-atomically (truncate, then write): a run
    killed in between leaves an empty one, and every later command fails to load the checkpoint."""
    sidecars = [f for f in project.state.rglob("*.json.attrs") if "/stacks/" in f.as_posix()]
    assert sidecars, sorted(map(str, project.state.rglob("*")))
    for f in sidecars:
        f.write_bytes(b"")
    raw = project.pulumi("preview", "--non-interactive")
    assert raw.returncode != 0 and "EOF" in raw.stdout + raw.stderr, raw.stdout[-2000:] + raw.stderr[-2000:]
    out = _ok(project.run("up"))
    assert "removing torn metadata sidecar" in out, out[-3000:]


def test_destroy_keeps_retained_tenant_namespaces_unless_offboarded(project, control_plane):
    """Also issue 18's up after destroy: the retained namespaces stay (same uid), and the next up adopts
    them, in the state with gpupool's labels through a provider whose stored config has
    upsertExistingObjects "true" (tests/e2e/adoption.py says what this can and cannot prove here)."""
    project.edit("stacks/dev/tenants/notebooks.yaml", "tier: standard", "tier: standard\noffboarded: true")
    _ok(project.run("up"))
    retained = namespace_uids(control_plane, ("research", "inference", "vision"))
    out = _ok(project.run("destroy"))
    assert re.search(r"- \d+ deleted", out), out[-3000:]
    assert project.export()["deployment"].get("resources") in (None, [])
    # Retained (not offboarded) tenants keep their namespace, quota, defaults and role binding.
    for tenant in ("research", "inference", "vision"):
        assert control_plane.get_json("namespace", tenant)["status"]["phase"] == "Active"
        control_plane.kubectl("get", "resourcequota", "gpu-quota", "-n", tenant)
        control_plane.kubectl("get", "limitrange", "container-defaults", "-n", tenant)
    # The offboarded tenant and the platform objects (operator namespace, configs, tiers) are gone.
    gone = control_plane.kubectl("get", "namespace", "notebooks", "-o", "json", check=False)
    assert gone.returncode != 0 or '"Terminating"' in gone.stdout
    for kind, name in (("priorityclass", "batch"), ("clusterrole", "gpupool-tenant-workloads")):
        assert control_plane.kubectl("get", kind, name, check=False).returncode != 0, (kind, name)
    # The offboarded tenant's file goes (the documented removal); `up` takes the retained objects over again.
    (project.dir / "stacks/dev/tenants/notebooks.yaml").unlink()
    control_plane.wait_for(
        lambda: control_plane.kubectl("get", "namespace", "notebooks", check=False).returncode,
        timeout=120,
        what="namespace notebooks finalised",
    )
    _ok(project.run("up"))
    deployment = project.export()
    assert sorted(state_objects(deployment)) == sorted(cluster_objects(control_plane))
    assert len(retained) == 3, retained
    assert_adopted(deployment, control_plane, retained, project.dir / SPEC)
