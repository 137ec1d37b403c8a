"""Upgrading gpupool under a live stack: a stack created by gpupool 0.1's program (commit b4e5e3d: its
components at the stack's root with unprefixed names, provider `k8s`) previews with no replace and no
delete after the upgrade to GpuPlatform, and an `up` then converges.

What it proves: the aliases of components/platform.py (`legacy_urns`) carry every resource of the old
state over to its new URN, including the GPU Operator chart's children (helm.v4.Chart, a remote component
whose children inherit its alias in the engine) and the provider every object references. Both programs
run through the real engine and provider against a local API server, each in its own interpreter with its
own sources (the old one from `git archive`), on one file backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from .mig_manager_sim import MigManagerSim

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
OLD = "b4e5e3d"  # the last commit of the 0.1 layout (main before GpuPlatform)
STUB_CHART = REPO / "tests" / "charts" / "gpu-operator-stub"
NODES = {
    "dev-gpu-l4-1": {"nvidia.com/gpu.shared": "16"},
    "dev-gpu-a100-1": {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"},
}

# Runs one Automation API operation of gpupool's own program (components.program.main, inline) with the
# sources first on sys.path; prints the steps as JSON.
DRIVER = r"""
import json, os, sys
from pathlib import Path
src, op, state, home, spec, kubeconfig, chart, bin_dir = sys.argv[1:9]
sys.path.insert(0, src)
import gpupool, components.program
assert gpupool.__file__.startswith(src), gpupool.__file__
from pulumi import automation as auto

env = {"PULUMI_BACKEND_URL": f"file://{state}", "PULUMI_CONFIG_PASSPHRASE": "e2e", "PULUMI_HOME": home,
       "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"}
os.environ.update(env)
stack = auto.create_or_select_stack("dev", project_name="gpupool", program=components.program.main,
    opts=auto.LocalWorkspaceOptions(work_dir=home, pulumi_home=home, env_vars=env, secrets_provider="passphrase",
        pulumi_command=auto.PulumiCommand(root=str(Path(bin_dir).parent), skip_version_check=True),
        project_settings=auto.ProjectSettings(name="gpupool", runtime="python",
                                              backend=auto.ProjectBackend(url=f"file://{state}"))))
stack.set_all_config({"gpupool:spec": auto.ConfigValue(spec), "gpupool:kubeconfig": auto.ConfigValue(kubeconfig),
                      "gpupool:operatorChartPath": auto.ConfigValue(chart), "gpupool:skipAwait": auto.ConfigValue("true")})
steps = []
def on_event(e):
    pre = e.resource_pre_event
    if pre is not None and "pulumi:pulumi:Stack" not in pre.metadata.type:
        m = pre.metadata
        steps.append({"op": getattr(m.op, "value", str(m.op)), "urn": m.urn, "type": m.type,
                      "old": (m.old.urn if m.old else None)})
if op == "up":
    stack.up(on_event=on_event, on_output=lambda _: None, color="never")
else:
    stack.preview(on_event=on_event, on_output=lambda _: None, color="never")
exported = stack.export_stack().deployment
print(json.dumps({"steps": steps, "urns": [r["urn"] for r in exported.get("resources") or []]}))
"""


def _old_sources(dest: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", "--format=tar", OLD, "gpupool", "components", "schemas"], cwd=REPO, capture_output=True
    )
    if archive.returncode != 0:
        pytest.skip(f"commit {OLD} is not in this checkout's history (a shallow clone?)")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


@pytest.fixture(scope="module")
def world(private_control_plane, toolchain_bin, tmp_path_factory):
    cp = private_control_plane
    for name, resources in NODES.items():
        cp.create_gpu_node(name, resources)
    tmp = tmp_path_factory.mktemp("upgrade")
    shutil.copytree(REPO / "stacks" / "dev", tmp / "dev")
    (tmp / "state").mkdir()
    home = tmp / "home"
    from .stack import _provider_version

    plugin = home / "plugins" / f"resource-kubernetes-v{_provider_version()}"
    plugin.mkdir(parents=True)
    os.symlink(toolchain_bin / "pulumi-resource-kubernetes", plugin / "pulumi-resource-kubernetes")
    driver = tmp / "driver.py"
    driver.write_text(DRIVER)
    old = _old_sources(tmp / "old")

    def run(src: Path, op: str) -> dict:
        args = [str(src), op, str(tmp / "state"), str(home), str(tmp / "dev" / "spec.yaml")]
        args += [str(cp.kubeconfig), str(STUB_CHART), str(toolchain_bin)]
        p = subprocess.run(
            [sys.executable, str(driver), *args],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": ""},
        )
        assert p.returncode == 0, p.stderr[-6000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    with MigManagerSim(cp, tuple(NODES), pending_delay=0.2, apply_delay=0.5):
        yield {"run": run, "old": old, "new": REPO}


def test_a_stack_of_the_0_1_program_upgrades_without_a_replace(world):
    run = world["run"]
    created = run(world["old"], "up")
    old_urns = set(created["urns"])
    assert any("::tenant-research" in u for u in old_urns), "the old program did not create its tenants"
    assert not any("GpuPlatform" in u for u in old_urns)

    preview = run(world["new"], "preview")
    ops = [s["op"] for s in preview["steps"]]
    assert not [s for s in preview["steps"] if s["op"] in ("replace", "create-replacement", "delete-replaced")]
    # Only the retired MIG chain's node patches may go (issue 37: the per-node mig step replaced them). Node
    # patches are retained on delete (components/node_pool.py), so the Node keeps every label they wrote.
    deleted = [s for s in preview["steps"] if s["op"] == "delete"]
    retired = [s for s in deleted if "$kubernetes:core/v1:NodePatch::" in s["urn"]]
    assert deleted == retired, "a resource of the old state would be deleted"
    # Every old resource is planned under its new URN (an alias of it), as same or update; what is
    # created is only what 0.1 did not have (the GpuPlatform component at least).
    carried = {s["old"] for s in preview["steps"] if s["old"] and s["op"] in ("same", "update")}
    retired_urns = {s["old"] or s["urn"] for s in retired}
    stack_urns = {u for u in old_urns if "pulumi:pulumi:Stack" not in u and u not in retired_urns}
    assert stack_urns <= carried, sorted(stack_urns - carried)[:10]
    renamed = [s for s in preview["steps"] if s["old"] and s["old"] != s["urn"]]
    assert renamed and all("::gpupool-" in s["urn"] for s in renamed)
    created_types = {s["type"] for s in preview["steps"] if s["op"] == "create"}
    assert "gpupool:index:GpuPlatform" in created_types, ops

    up = run(world["new"], "up")
    assert not [s for s in up["steps"] if s["op"] in ("replace", "create-replacement", "delete-replaced")]
    assert all("$kubernetes:core/v1:NodePatch::" in s["urn"] for s in up["steps"] if s["op"] == "delete")
    unprefixed = [
        u
        for u in up["urns"]
        # The engine's default providers: `pulumi` and `pulumi-python` (the drain steps' dynamic provider).
        if not any(
            x in u
            for x in (
                "GpuPlatform",
                "pulumi:pulumi:Stack",
                "::gpupool-",
                "::pulumi:providers:pulumi::",
                "::pulumi:providers:pulumi-python::default",
            )
        )
    ]
    assert not unprefixed, unprefixed[:10]
    again = run(world["new"], "preview")
    changed = [s for s in again["steps"] if s["op"] != "same"]
    assert not changed, changed[:5]
